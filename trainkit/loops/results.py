"""The one results store that routes what ``self.log`` records.

:class:`Results` owns the logging context (which stage logs, which dataloader,
per step or per epoch) and everything ``self.log`` routes: the values callbacks
read (``callback_metrics``), those sent to loggers (``logged_metrics``) and
those the progress bar shows. The loop and the evaluation tell it where the run
is; ``Module.log`` hands it each value, which it records in the stage's
:class:`~trainkit.loops.metric_store.MetricStore` (what one logged value
records, and how it reduces, is that module's business).
"""

from __future__ import annotations

import copy
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import torch

from trainkit.loops.metric_store import (
    CLOSED,
    EVAL,
    EVAL_EPOCH,
    TRAIN_EPOCH,
    TRAIN_START,
    TRAIN_STEP,
    MetricStore,
    Number,
    as_tensor,
    is_mean,
)

if TYPE_CHECKING:
    from trainkit.loggers.base import Logger

# What self.log received, as it arrived: (on_step, on_epoch, prog_bar, logger,
# sync_dist, reduce_fx, batch_size); on_step, on_epoch, logger and batch_size possibly None.
LogArguments = tuple[bool | None, bool | None, bool, bool | None, bool, Any, int | None]
# Receives each self.log call while Results.capture is active.
LogRecorder = Callable[[str, Number, LogArguments], None]


class Collectives(Protocol):
    """What the results store needs from the strategy."""

    @property
    def is_global_zero(self) -> bool:
        """Whether this process writes to the loggers."""

    def reduce_logged(self, values: Any, point: str, *, always: bool = False) -> list[torch.Tensor]:
        """Reduce ``sync_dist`` values over all processes (see ``Strategy.reduce_logged``)."""


def display_names(store: MetricStore, *, prog_bar: bool | None, logger: bool | None) -> set[str]:
    """Every key (``name``, ``name_step``, ``name_epoch``) the filtered names produce.

    Args:
        store: the store.
        prog_bar: filter on the prog_bar flag (None: any).
        logger: filter on the logger flag (None: any).
    """
    keys: set[str] = set()
    for name in store.names(prog_bar=prog_bar, logger=logger):
        entry = store.entries[name]
        if entry.on_step:
            keys.add(entry.step_key)
        if entry.on_epoch:
            keys.add(entry.epoch_key)
    return keys


def to_floats(values: Mapping[str, Number], keys: Iterable[str] | None = None) -> dict[str, float]:
    """Read values into Python floats. This is where device synchronisation happens.

    Args:
        values: metric name to tensor or number.
        keys: keep only these names (None: all).
    """
    wanted = values if keys is None else {k: values[k] for k in keys if k in values}
    return {name: float(value) for name, value in wanted.items()}


_NOT_LOGGING = (
    "values can only be logged while fit/validate/test runs, in a step or an epoch hook "
    "(not in predict)"
)
# Hooks that are not named on_* (the on_* ones are recognised by their prefix).
_OTHER_HOOKS = frozenset(
    {"setup", "teardown", "prepare_data", "configure_model", "configure_optimizers"}
)


def _calling_hook() -> str | None:
    """The hook that called ``self.log`` (read off the stack, for a refusal's message)."""
    frame = sys._getframe(2)  # only on the error path: no cost to logging
    while frame is not None:
        name = frame.f_code.co_name
        if name.startswith("on_") or name in _OTHER_HOOKS:
            return name
        frame = frame.f_back  # type: ignore[assignment]
    return None


class Results:
    """Everything ``self.log`` routes, and the metrics callbacks, loggers and the progress bar read.

    The loop sets the logging context (:meth:`enter_training_step`,
    :meth:`enter_training_epoch`, :meth:`enter_evaluation`, :meth:`close`);
    :meth:`log` then knows which store a value goes to and which ``on_step`` /
    ``on_epoch`` defaults apply, as Lightning documents them: per step in
    training steps, per epoch in training epoch hooks and in evaluation.

    Args:
        collectives: the strategy (``reduce_logged`` for ``sync_dist`` values, and
            ``is_global_zero``: only global rank 0 writes to loggers).
        loggers: the loggers values are written to.
        batch_size_of: infers a batch's size, the default weight of an epoch mean.
    """

    def __init__(
        self,
        collectives: Collectives,
        loggers: list[Logger],
        batch_size_of: Callable[[Any], int],
    ) -> None:
        self._collectives = collectives
        self._batch_size_of = batch_size_of
        self.loggers = loggers
        #: Values logged in the current training epoch.
        self.train = MetricStore(collectives.reduce_logged, "training")
        #: Values logged in the current (or last) evaluation run.
        self.eval = MetricStore(collectives.reduce_logged, "evaluation")
        # Values logged in on_train_start, before the first epoch's store exists.
        self._start = MetricStore(collectives.reduce_logged, "on_train_start")
        #: The latest epoch results (training epochs and evaluation runs), by name.
        self.epoch_metrics: dict[str, Number] = {}
        # The latest value of each name meant for the loggers (logger=True), by
        # name: written or not (no logger, not rank 0), read as logged_metrics.
        self._logged: dict[str, torch.Tensor] = {}
        # What on_train_start logged for the loggers, written with the first epoch's end.
        self._start_pending: dict[str, Any] = {}
        self._unread: dict[str, Number] = {}
        # Epoch-level prog_bar names of earlier epochs of this run: the bar keeps
        # showing them (as Lightning's progress_bar_metrics do).
        self._bar_names: set[str] = set()
        self._warned_no_logger: set[str] = set()  # self.log(logger=True) names, no logger
        #: The last training loss (undetached; backward has freed its graph).
        self.last_loss: torch.Tensor | None = None
        self._context = CLOSED
        self._batch: Any = None
        self._suffix = ""
        self._dataloader_idx: int | None = None
        self._recorder: LogRecorder | None = None
        # Why self.log is refused now (closed context), for the error message.
        self._closed_reason = _NOT_LOGGING
        # The sanity check's results: callbacks see them while it runs; never kept.
        self._sanity_values: dict[str, Number] = {}
        # Evaluation step values are written at each dataloader's own batch count,
        # which runs on through the evaluation runs of one fit/validate/test call.
        self._eval_steps_owner: object = None
        self._eval_steps: dict[int, int] = {}

    # -------------------------------------------------------- logging context
    def enter_training_step(self, batch: Any) -> None:
        """``self.log`` now logs per step into the training store (batch: for its size).

        Args:
            batch: the batch being trained on.
        """
        self._context = TRAIN_STEP
        self._batch = batch

    def sync_step_values(self) -> None:
        """Reduce the training step values logged with ``sync_dist=True`` that are not yet.

        Every process calls this at the same point (before a decision they all
        take alike). Between the loggers' writes, ``callback_metrics`` holds each
        process's own step value until then: reducing it after every step would
        cost a collective per step (see docs/porting.md). Nothing to do (no
        collective) unless a value is logged per step with ``sync_dist=True``.
        """
        self.train.sync_step_values()

    def enter_training_epoch(self) -> None:
        """``self.log`` now logs per epoch into the training store (epoch hooks)."""
        self._context = TRAIN_EPOCH
        self._batch = None

    @property
    def logged_metrics(self) -> dict[str, torch.Tensor]:
        """The latest value of each name logged with ``logger=True``, as 0-dim CPU tensors.

        As Lightning's ``trainer.logged_metrics``: filled whether or not a logger
        writes them, and holding the latest training step's values, also between
        the ``log_every_n_steps`` writes and during a validation inside fit (values
        are read from the device only when asked for).
        """
        # The training store holds the latest steps' values until the next epoch (or
        # run) starts, so they are read in every context: on_validation_end too.
        self._keep_step_values(sync=False)
        if self._unread:
            floats = to_floats(dict(self._unread), set(self._unread))
            self._logged.update({name: torch.tensor(value) for name, value in floats.items()})
            self._unread.clear()
        return self._logged

    def _keep_step_values(self, *, sync: bool) -> None:
        # The training step values meant for the loggers, kept for logged_metrics
        # without writing them. Unsynced (read by one process), a sync_dist value
        # not reduced yet waits for the next write or the epoch's end.
        train = self.train
        keys = display_names(train, prog_bar=None, logger=True)
        if not sync:
            keys -= {
                entry.step_key
                for entry in train.entries.values()
                if entry.sync_dist and entry.synced is None
            }
        values = train.step_values(sync=sync)
        self._unread.update({name: values[name] for name in keys if name in values})

    def enter_training_epoch_end(self) -> None:
        """The training epoch's batches are done: reduce its values, then log per epoch.

        Callbacks and the Module's ``on_train_epoch_end`` then read this epoch's
        values in ``callback_metrics`` (every process calls this: ``sync_dist``
        values are reduced here).
        """
        self.enter_training_epoch()
        self.update_epoch_metrics(self.train.epoch_values(), logged_from=self.train)

    def reset_metrics(self) -> None:
        """Forget the metrics of earlier runs (a new validate/test call starts afresh)."""
        self.train.reset()
        self.eval.reset()
        self.epoch_metrics = {}
        self._logged, self._unread = {}, {}
        self._start_pending = {}
        self._bar_names = set()
        self.last_loss = None

    def enter_training_start(self) -> None:
        """``self.log`` now logs once, for ``on_train_start`` (see :meth:`end_training_start`)."""
        self._context = TRAIN_START
        self._batch = None
        self._start.reset()

    def end_training_start(self) -> None:
        """Keep what ``on_train_start`` logged for callbacks, and for the loggers.

        The loggers get it with the first training epoch's values, where Lightning
        writes a value ``on_train_start`` logs (an epoch value): see
        :meth:`end_training_epoch` and :meth:`write_pending_start`.
        """
        self._context = CLOSED
        values = self._start.epoch_values()  # every process: it may reduce sync_dist values
        if self._start.entries:
            self.update_epoch_metrics(values)
            self._bar_names |= display_names(self._start, prog_bar=True, logger=None)
            keys = display_names(self._start, prog_bar=None, logger=True)
            self._start_pending = {name: values[name] for name in keys if name in values}
            self._unread.update(self._start_pending)  # in logged_metrics from now on
        self._start.reset_computed_metrics()

    def write_pending_start(self, step: int, epoch: int) -> None:
        """Write what ``on_train_start`` logged if no epoch's end has (a fit stopped first).

        Args:
            step: the global step to write it at.
            epoch: the current epoch.
        """
        pending, self._start_pending = self._start_pending, {}
        if pending:
            self.write(pending, set(pending), step, epoch)

    def enter_evaluation(self, dataloader_idx: int | None = None, batch: Any = None) -> None:
        """``self.log`` now logs per epoch into the evaluation store.

        Args:
            dataloader_idx: with several dataloaders, the current one's index:
                names get a ``/dataloader_idx_N`` suffix.
            batch: the batch being evaluated (None in epoch hooks, outside a batch:
                there, ``on_step=True`` is an error, as in training epoch hooks).
        """
        self._context = EVAL if batch is not None else EVAL_EPOCH
        self.train.repeated.clear()  # a training step's shortcut never meets a suffix
        self._suffix = "" if dataloader_idx is None else f"/dataloader_idx_{dataloader_idx}"
        self._dataloader_idx = dataloader_idx
        self._batch = batch

    def close(self, hook: str | None = None) -> None:
        """``self.log`` is now an error (between runs, in predict, in ``hook``).

        Args:
            hook: the hook that runs next, where logging is not allowed (named in
                the error), e.g. "on_validation_end".
        """
        self._context = CLOSED
        self._batch = None
        self._suffix = ""
        self._dataloader_idx = None
        self._sanity_values = {}
        self._closed_reason = (
            _NOT_LOGGING
            if hook is None
            else f"{hook} cannot log: its values would reach no epoch's results. Log in "
            "the epoch-end hook before it, or write to `self.logger` directly"
        )

    def end_run(self) -> None:
        """The run is over: :meth:`close`, and the last loss is kept without its autograd
        history (a non-leaf tensor would make the Trainer impossible to deep-copy)."""
        self.close()
        if self.last_loss is not None:
            self.last_loss = self.last_loss.detach()

    @contextmanager
    def capture(self, recorder: LogRecorder) -> Iterator[None]:
        """While active, hand every ``self.log`` call to ``recorder`` instead of storing it.

        DataParallel's device copies log through this: the strategy combines
        their values into one per name and logs that with :meth:`log`.

        Args:
            recorder: receives ``(name, value, arguments)`` for each call.
        """
        self._recorder = recorder
        try:
            yield
        finally:
            self._recorder = None

    # ----------------------------------------------------------------- write
    def log(
        self,
        name: str,
        value: Any,
        on_step: bool | None,
        on_epoch: bool | None,
        prog_bar: bool,
        logger: bool | None,
        sync_dist: bool,
        reduce_fx: Any,
        batch_size: int | None,
        add_dataloader_idx: bool = True,
    ) -> None:
        """Record one ``self.log`` call (see ``Module.log`` for the arguments).

        Called for every logged value of every step: positional arguments and
        no work beyond choosing the store and the defaults. A training step's call
        that repeats an earlier one (same name and arguments) of a step-only value
        sets the value directly.
        """
        given = None  # the call's arguments, for a training step's shortcut
        if self._context == TRAIN_STEP and self._recorder is None and type(value) is torch.Tensor:
            given = (name, on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx)
            try:
                repeated = self.train.repeated.get(given)
            except TypeError:  # an unhashable reduce_fx: the full path says what is wrong
                repeated = None
            if repeated is not None:
                repeated.step_value = value.data  # as MetricStore.log stores it
                return
        recorder = self._recorder
        if recorder is not None:  # logged again later, with these arguments as they came
            arguments = (on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx, batch_size)
            recorder(name, value, arguments)
            return
        if logger is True and not self.loggers:
            self._warn_no_logger(name)
        logger = logger is not False  # None: True
        context = self._context
        if context == TRAIN_STEP:
            store = self.train
            on_step = True if on_step is None else on_step
            on_epoch = False if on_epoch is None else on_epoch
        elif context == EVAL:
            store = self.eval
            on_step = False if on_step is None else on_step
            on_epoch = True if on_epoch is None else on_epoch
        elif context == CLOSED:
            hook = _calling_hook() if self._closed_reason is _NOT_LOGGING else None
            where = f" in {hook}" if hook is not None else ""
            raise RuntimeError(f"self.log({name!r}) was refused{where}: {self._closed_reason}.")
        else:
            store = (
                self.train
                if context == TRAIN_EPOCH
                else self.eval
                if context == EVAL_EPOCH
                else self._start
            )
            if on_step or on_epoch is False:
                raise ValueError(
                    f"self.log({name!r}, on_step={on_step}, on_epoch={on_epoch}) was called in "
                    "an epoch hook, where values are logged once per epoch: leave on_step and "
                    "on_epoch at their defaults (on_step=False, on_epoch=True)."
                )
            on_step, on_epoch = False, True
        if batch_size is None:
            batch = self._batch
            batch_size = (
                self._batch_size_of(batch)
                if on_epoch and batch is not None and (reduce_fx == "mean" or is_mean(reduce_fx))
                else 1
            )
        options = (on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx)
        suffix = self._suffix if add_dataloader_idx else ""
        store.context = context
        entry = store.log(name, value, options, batch_size, suffix, self._dataloader_idx)
        if (
            given is not None
            and not suffix
            and self._dataloader_idx is None
            and store.steps_only(entry)
        ):
            store.repeated[given] = entry

    def _warn_no_logger(self, name: str) -> None:
        # Asked for by name, once a name (Lightning's words first), from rank 0.
        if name in self._warned_no_logger or not self._collectives.is_global_zero:
            return
        self._warned_no_logger.add(name)
        warnings.warn(
            f"You called `self.log({name!r}, ..., logger=True)` but have no logger configured. "
            "You can enable one by doing `Trainer(logger=ALogger(...))`. Remove `logger=True` to "
            "suppress this warning.",
            UserWarning,
            stacklevel=4,  # the self.log call
        )

    def update_epoch_metrics(
        self, values: Mapping[str, Number], logged_from: MetricStore | None = None
    ) -> None:
        """Record epoch results, so callbacks (early stopping, schedulers) can read them.

        A name logged both per step and per epoch is also kept under its plain
        name, at its epoch value, so that callbacks can monitor the name as logged.

        Args:
            values: metric name to value.
            logged_from: the store ``values`` come from, when they are reduced before
                the epoch-end hooks: its ``logger=True`` values are then in
                ``logged_metrics`` from here on, as Lightning's are during those
                hooks (the loggers get them after the hooks, with what they log).
        """
        self.epoch_metrics.update(values)
        self.epoch_metrics.update(self._plain_names(values))
        if logged_from is not None:
            keys = display_names(logged_from, prog_bar=None, logger=True)
            self._unread.update({name: values[name] for name in keys if name in values})

    def show_sanity_results(self, values: Mapping[str, Number]) -> None:
        """Let callbacks see the sanity check's results until it ends; they are not kept.

        Args:
            values: the sanity check's epoch values.
        """
        self._sanity_values = {**values, **self._plain_names(values)}

    def _plain_names(self, values: Mapping[str, Number]) -> dict[str, Number]:
        plain: dict[str, Number] = {}
        for store in (self.train, self.eval):
            for entry in store.entries.values():
                if entry.on_step and entry.on_epoch and entry.epoch_key in values:
                    plain[entry.plain_key] = values[entry.epoch_key]
        return plain

    def evaluation_outputs(
        self, values: Mapping[str, Number], count: int
    ) -> list[dict[str, float]]:
        """What ``validate()``/``test()`` return: one dict per dataloader.

        Each holds the epoch values sent to loggers (``logger=True``) that its
        dataloader logged, plus those logged outside any dataloader's batches
        (epoch hooks), as floats.

        Args:
            values: the evaluation run's epoch values.
            count: the number of dataloaders.
        """
        floats = to_floats(values)
        outputs: list[dict[str, float]] = [{} for _ in range(count)]
        for entry in self.eval.entries.values():
            key = entry.epoch_key
            if not entry.logger or not entry.on_epoch or key not in floats:
                continue
            index = entry.dataloader_idx
            for i in range(count) if index is None else (index,):
                outputs[i][key] = floats[key]
        return outputs

    def write(
        self, values: Mapping[str, Number], keys: set[str], step: int, epoch: int | None
    ) -> None:
        """Send the ``keys`` among ``values`` to every logger, from global rank 0 only.

        Args:
            values: metric name to value (tensors are read here).
            keys: the names to send (those logged with ``logger=True``).
            step: the global step to record them at (a value logged as "step" takes
                its place, and is not sent as a metric).
            epoch: the current epoch (written beside them as "epoch"; None, or a logged
                "step": not written).
        """
        if not self.loggers or not self._collectives.is_global_zero:
            # Kept as they are (no host sync here); logged_metrics converts them when read.
            self._unread.update({name: values[name] for name in keys if name in values})
            return
        floats = to_floats(dict(values), keys)
        if not floats:
            return
        # trainer.logged_metrics holds what was logged (made tensors when read);
        # "epoch" goes to the loggers only.
        self._unread.update(floats)
        if "step" in floats:  # a logged "step" is the step the loggers record at, as in Lightning
            step = int(floats.pop("step"))
        elif epoch is not None:
            floats["epoch"] = epoch  # an int, as Lightning writes it
        for logger in self.loggers:
            logger.log_metrics(metrics=floats, step=step)

    def write_evaluation_step(self, run: object, dataloader_idx: int | None) -> None:
        """Write the evaluation batch's ``on_step`` values (every process reads; rank 0 writes).

        They are written at the dataloader's count of evaluation batches in this
        call of fit/validate/test (``run``), without an "epoch" value.

        Args:
            run: the run (a new one restarts the counts).
            dataloader_idx: the dataloader the batch came from (None: the only one).
        """
        if run is not self._eval_steps_owner:
            self._eval_steps_owner, self._eval_steps = run, {}
        index = dataloader_idx or 0
        step = self._eval_steps.get(index, 0)
        self._eval_steps[index] = step + 1
        keys = {
            entry.step_key
            for entry in self.eval.entries.values()
            if entry.on_step and entry.logger and entry.dataloader_idx == dataloader_idx
        }
        if keys:
            values = self.eval.step_values(sync=True)
            self.write(values, keys, step, None)

    def write_step(self, step: int, epoch: int) -> None:
        """Write the training step values to the loggers (every process reads; rank 0 writes).

        Args:
            step: the global step the values were logged at.
            epoch: the current epoch.
        """
        values = self.train.step_values(sync=True)
        self.write(values, display_names(self.train, prog_bar=None, logger=True), step, epoch)

    def end_training_epoch(self, step: int, epoch: int) -> None:
        """Reduce the training epoch's values, keep them for callbacks and write them.

        Args:
            step: the global step to write them at.
            epoch: the epoch that ends.
        """
        self._keep_step_values(sync=True)  # the last step's, written or not
        values = self.train.epoch_values()
        self.update_epoch_metrics(values)
        self._bar_names |= display_names(self.train, prog_bar=True, logger=None) & set(values)
        keys = display_names(self.train, prog_bar=None, logger=True)
        pending, self._start_pending = self._start_pending, {}  # on_train_start's, if any
        self.write({**pending, **values}, keys | set(pending), step, epoch)

    def write_evaluation(self, step: int, epoch: int) -> None:
        """Write the last evaluation run's epoch results to the loggers.

        Args:
            step: the global step to write them at.
            epoch: the current epoch.
        """
        keys = display_names(self.eval, prog_bar=None, logger=True)
        # Its progress-bar values stay on the bar until logged again (the next
        # validation's included), as Lightning's do.
        shown = display_names(self.eval, prog_bar=True, logger=None)
        self._bar_names |= shown & set(self.epoch_metrics)
        self.write(self.epoch_metrics, keys, step, epoch)

    # ------------------------------------------------------------------ read
    @property
    def callback_metrics(self) -> CallbackMetrics:
        """Latest value of every logged metric (epoch results and current step values).

        A name logged both per step and per epoch appears as ``name_step``,
        ``name_epoch`` (once an epoch ended) and ``name``: the step value while
        its training epoch runs, the epoch value once the epoch ends. Values written
        into the returned dict are kept (see :class:`CallbackMetrics`).
        """
        values = dict(self.epoch_metrics)
        values.update(self._sanity_values)
        train = self.train
        values.update(train.step_values(sync=False))
        if not train.epoch_reduced:
            for entry in train.entries.values():
                if entry.on_step and entry.on_epoch and entry.step_value is not None:
                    values[entry.plain_key] = (
                        entry.step_value if entry.synced is None else entry.synced
                    )
        return CallbackMetrics({name: as_tensor(value) for name, value in values.items()}, self)

    def keep_metrics(self, values: Mapping[str, Any]) -> None:
        """Keep values written into ``trainer.callback_metrics`` among the epoch results.

        Each is kept as a tensor (a NumPy number too), so that checkpoints, which save
        the epoch results and load with ``weights_only=True``, can always be read back.

        Args:
            values: metric name to value.

        Raises:
            TypeError: a value is not a number or a tensor (nothing is kept then).
        """
        kept: dict[str, Number] = {}
        for name, value in values.items():
            try:
                kept[name] = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
            except (TypeError, ValueError, RuntimeError) as error:
                raise TypeError(
                    f"trainer.callback_metrics[{name!r}] = {value!r}: callback metrics are "
                    f"numbers or tensors, not {type(value).__name__} ({error}). Write a number "
                    "or a tensor."
                ) from None
        self.epoch_metrics.update(kept)

    def forget_metric(self, name: str) -> None:
        """Drop a name deleted from ``trainer.callback_metrics`` from the epoch results.

        Args:
            name: the metric's name.
        """
        self.epoch_metrics.pop(name, None)

    def progress_bar_metrics(self, *, fitting: bool, running: bool = True) -> dict[str, float]:
        """The training loss and every ``prog_bar`` metric, as floats.

        Reading this synchronises with the device: the progress bar reads it only
        when it redraws. While fit runs, the training loss is added as "loss"
        unless the user already shows that same value.

        Args:
            fitting: whether the run is (or the last run was) a fit: training values
                count only then.
            running: whether the run is still going (the "loss" entry is the bar's).
        """
        keys = display_names(self.eval, prog_bar=True, logger=None)
        if fitting:
            keys |= display_names(self.train, prog_bar=True, logger=None) | self._bar_names
        values = to_floats({**self.eval.step_values(sync=False), **self.callback_metrics}, keys)
        loss = self.last_loss
        if fitting and running and loss is not None and "loss" not in values:
            shown = (
                entry.step_value
                for entry in self.train.entries.values()
                if entry.prog_bar and isinstance(entry.step_value, torch.Tensor)
            )
            # A detached loss shares the loss's storage: same pointer, same value.
            if not any(value.data_ptr() == loss.data_ptr() for value in shown):
                values = {"loss": float(loss.detach()), **values}
        return values

    # ---------------------------------------------------------------- resume
    def state_dict(self) -> dict[str, Any]:
        """What a resumed epoch needs: the training epoch's values and the epoch results."""
        return {
            "train_metrics": self.train.state_dict(),
            "callback_metrics": dict(self.epoch_metrics),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved.

        Args:
            state: a checkpoint (or the dict :meth:`state_dict` returned).
        """
        self.train.load_state_dict(state.get("train_metrics", {}))
        self.epoch_metrics = dict(state.get("callback_metrics", {}))

    def adopt(self, callback_metrics: Mapping[str, Number], logged: Mapping[str, Number]) -> None:
        """Take over another process's results (``ddp_spawn``: rank 0's, when it is done).

        Args:
            callback_metrics: its callback metrics.
            logged: its logged metrics.
        """
        self.epoch_metrics.update(callback_metrics)
        self._logged = {name: as_tensor(value) for name, value in logged.items()}
        self._unread = {}


class CallbackMetrics(dict[str, torch.Tensor]):
    """``trainer.callback_metrics``: the latest values, in a dict whose writes are kept.

    Callbacks write values into it for monitoring callbacks to read (a score a
    callback computes, for ``ModelCheckpoint(monitor=...)``), as they do into
    Lightning's: each value set (``d[name] = v``, ``update``, ``setdefault``, ``|=``)
    is kept among the run's epoch results, so every later read has it, until a
    value logged under the same name replaces it; a name deleted is dropped. The
    loggers get only what ``self.log`` logged.

    Args:
        values: the values read.
        results: the run's results, which keep what is written.
    """

    def __init__(self, values: Mapping[str, torch.Tensor], results: Results) -> None:
        super().__init__(values)
        self._results = results

    def __setitem__(self, name: str, value: torch.Tensor) -> None:
        self._results.keep_metrics({name: value})  # first: it refuses what it cannot keep
        super().__setitem__(name, value)

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Set several values (as ``dict.update``), each kept."""
        values = dict(*args, **kwargs)
        self._results.keep_metrics(values)
        super().update(values)

    def setdefault(self, name: str, default: Any = None) -> Any:
        """``d[name]``, set to ``default`` (and kept) first if missing."""
        if name not in self:
            self[name] = default
        return self[name]

    def __ior__(self, other: Any) -> CallbackMetrics:  # type: ignore[override,misc]
        self.update(other)
        return self

    def synced(self) -> CallbackMetrics:
        """The metrics afresh, with the step values logged with ``sync_dist=True`` reduced.

        Every process must call this at the same point, as for any collective:
        trainkit's own deciders (``ModelCheckpoint``, a monitoring LR scheduler)
        do, before they rank a value.
        """
        self._results.sync_step_values()
        return self._results.callback_metrics

    def __delitem__(self, name: str) -> None:
        super().__delitem__(name)
        self._results.forget_metric(name)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, torch.Tensor]:
        # A copy is of the values only: a plain dict, as Lightning's callback_metrics is
        # (the run's results it writes through are not copied).
        return copy.deepcopy(dict(self), memo)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (copy.copy, sent to another process) as a plain dict of the values.
        return (dict, (dict(self),))

    def pop(self, name: str, *default: Any) -> Any:
        """Remove ``name`` (and drop it from the kept values); as ``dict.pop``."""
        if name in self:
            self._results.forget_metric(name)
        return super().pop(name, *default)

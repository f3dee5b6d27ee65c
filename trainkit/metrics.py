"""What ``self.log`` records, and the one results store that routes it.

:class:`Results` owns the logging context (which stage logs, which dataloader,
per step or per epoch) and everything ``self.log`` routes: reduction, the
values callbacks read (``callback_metrics``), those sent to loggers
(``logged_metrics``) and those the progress bar shows. The loop and the
evaluation tell it where the run is; ``Module.log`` hands it each value.

Logged tensors are kept on their device: a step value is just a reference to
the (detached) tensor, an epoch value is a running sum kept with in-place device
ops. Nothing here calls ``.item()`` per step; values become Python floats only
when a logger writes or the progress bar draws (see ``to_floats``). That is what
keeps logging every step free of host-device synchronisation.

Epoch means are weighted by batch size and reduced across processes as
``sum(value * batch_size) / sum(batch_size)``, so an uneven last batch or an
uneven split over ranks gives the exact dataset mean.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from trainkit.loggers.base import Logger

Number = torch.Tensor | float | int
# The strategy's all_reduce(tensor, op).
ReduceFn = Callable[..., torch.Tensor]

REDUCE_FXS = ("mean", "sum", "max", "min")
# (on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx), see Module.log.
LogOptions = tuple[bool, bool, bool, bool, bool, str]
# What self.log received, as it arrived: (on_step, on_epoch, prog_bar, logger,
# sync_dist, reduce_fx, batch_size), the first two and the last possibly None.
LogArguments = tuple[bool | None, bool | None, bool, bool, bool, str, int | None]
# Receives each self.log call while Results.capture is active.
LogRecorder = Callable[[str, Number, LogArguments], None]


@dataclass
class _Entry:
    """One logged name within one stage run."""

    options: LogOptions
    on_step: bool
    on_epoch: bool
    prog_bar: bool
    logger: bool
    sync_dist: bool
    reduce_fx: str
    step_value: Number | None = None
    # Running aggregate over the epoch (sum of value * weight for "mean").
    total: Number | None = None
    weight: int = 0


class MetricStore:
    """The values logged during one stage run (a training epoch, a validation run...).

    Args:
        all_reduce: the strategy's ``all_reduce``, used for ``sync_dist`` values.
    """

    def __init__(self, all_reduce: ReduceFn) -> None:
        self._all_reduce = all_reduce
        self.entries: dict[str, _Entry] = {}

    def log(self, name: str, value: Number, options: LogOptions, batch_size: int) -> None:
        """Record ``value`` under ``name``. Cheap: no device synchronisation.

        Called for every ``self.log`` in every step, so it takes its options as one
        tuple, positionally.

        Args:
            name: the metric's name.
            value: a scalar tensor or number.
            options: ``(on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx)``:
                keep the latest value; aggregate over the run with ``reduce_fx``; show
                in the progress bar; send to loggers; reduce across processes when
                read; "mean", "sum", "max" or "min".
            batch_size: weight of the value in the epoch mean.
        """
        entry = self.entries.get(name)
        if entry is None:
            entry = self._new_entry(name, value, options)
        elif entry.options != options:
            raise ValueError(
                f"self.log({name!r}) was called with different options in the same stage "
                f"(before: {_describe(entry.options)}; now: {_describe(options)}). Use the "
                "same options each time, or another name."
            )
        if isinstance(value, torch.Tensor):
            value = value.data  # the value only: no autograd graph kept, no dispatcher call
        if entry.on_step:
            entry.step_value = value
        if entry.on_epoch:
            entry.total = _accumulate(entry.total, value, entry.reduce_fx, batch_size)
            entry.weight += batch_size

    def _new_entry(self, name: str, value: Number, options: LogOptions) -> _Entry:
        on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx = options
        if reduce_fx not in REDUCE_FXS:
            raise ValueError(
                f"self.log({name!r}, reduce_fx={reduce_fx!r}) is not supported; use one of "
                f"{', '.join(REDUCE_FXS)}."
            )
        if isinstance(value, torch.Tensor) and value.numel() != 1:
            raise ValueError(
                f"self.log({name!r}) got a tensor of shape {tuple(value.shape)}; only scalars "
                "can be logged. Reduce it first (e.g. `.mean()`), or log each element by name."
            )
        if not isinstance(value, (torch.Tensor, float, int)):
            raise TypeError(
                f"self.log({name!r}) got a {type(value).__name__}; log a scalar tensor or number."
            )
        if not (on_step or on_epoch):
            raise ValueError(
                f"self.log({name!r}, on_step=False, on_epoch=False) records nothing; set one "
                "of them to True."
            )
        entry = _Entry(options, on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx)
        self.entries[name] = entry
        return entry

    # ---------------------------------------------------------------- reading
    def step_values(self, *, sync: bool) -> dict[str, Number]:
        """The latest per-step values, keyed ``name`` (or ``name_step`` when also per-epoch).

        Args:
            sync: reduce ``sync_dist`` values across processes. Every process must
                pass the same value at the same point, or the job hangs.
        """
        values: dict[str, Number] = {}
        for name, entry in self.entries.items():
            if entry.step_value is None:
                continue
            value = entry.step_value
            if sync and entry.sync_dist:
                value = self._all_reduce(as_tensor(value), entry.reduce_fx)
            values[f"{name}_step" if entry.on_epoch else name] = value
        return values

    def epoch_values(self) -> dict[str, Number]:
        """The aggregates over the run, keyed ``name`` (or ``name_epoch`` when also per-step).

        ``sync_dist`` values are reduced across processes, so every process must
        call this at the same point.
        """
        values: dict[str, Number] = {}
        for name, entry in self.entries.items():
            if entry.total is None:
                continue
            total: Number = entry.total
            weight: Number = entry.weight
            if entry.sync_dist:
                op = "sum" if entry.reduce_fx in ("mean", "sum") else entry.reduce_fx
                total = self._all_reduce(as_tensor(total), op)
                if entry.reduce_fx == "mean":
                    weight = self._all_reduce(as_tensor(float(weight)), "sum")
            value = total / weight if entry.reduce_fx == "mean" else total
            values[f"{name}_epoch" if entry.on_step else name] = value
        return values

    def names(self, *, prog_bar: bool | None = None, logger: bool | None = None) -> set[str]:
        """Logged names filtered by their ``prog_bar`` / ``logger`` flags.

        Args:
            prog_bar: keep only names with this prog_bar flag (None: any).
            logger: keep only names with this logger flag (None: any).
        """
        return {
            name
            for name, entry in self.entries.items()
            if (prog_bar is None or entry.prog_bar == prog_bar)
            and (logger is None or entry.logger == logger)
        }

    def reset(self) -> None:
        """Forget everything (at the start of a new epoch or run)."""
        self.entries.clear()

    def state_dict(self) -> dict[str, Any]:
        """Everything logged so far, so that a resumed epoch's means stay exact."""
        return {
            name: {
                "options": list(entry.options),
                "step_value": entry.step_value,
                "total": entry.total,
                "weight": entry.weight,
            }
            for name, entry in self.entries.items()
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned.

        Args:
            state: the saved entries.
        """
        self.entries.clear()
        for name, saved in state.items():
            options: LogOptions = tuple(saved["options"])
            entry = _Entry(options, *options)
            entry.step_value = saved["step_value"]
            entry.total = saved["total"]
            entry.weight = int(saved["weight"])
            self.entries[name] = entry


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
        if entry.on_step and entry.on_epoch:
            keys.update((f"{name}_step", f"{name}_epoch"))
        else:
            keys.add(name)
    return keys


def to_floats(values: Mapping[str, Number], keys: Iterable[str] | None = None) -> dict[str, float]:
    """Read values into Python floats. This is where device synchronisation happens.

    Args:
        values: metric name to tensor or number.
        keys: keep only these names (None: all).
    """
    wanted = values if keys is None else {k: values[k] for k in keys if k in values}
    return {name: float(value) for name, value in wanted.items()}


def as_tensor(value: Number) -> torch.Tensor:
    """``value`` as a tensor (numbers become 0-dim float tensors).

    Args:
        value: a tensor or number.
    """
    return value if isinstance(value, torch.Tensor) else torch.tensor(float(value))


class Collectives(Protocol):
    """What the results store needs from the strategy."""

    @property
    def is_global_zero(self) -> bool:
        """Whether this process writes to the loggers."""

    def all_reduce(self, tensor: torch.Tensor, op: Any = "mean") -> torch.Tensor:
        """Reduce ``tensor`` over all processes."""


# Logging contexts: where a self.log call lands and which defaults it gets.
_CLOSED, _TRAIN_STEP, _TRAIN_EPOCH, _EVAL = 0, 1, 2, 3


class Results:
    """Everything ``self.log`` routes, and the metrics callbacks, loggers and the progress bar read.

    The loop sets the logging context (:meth:`enter_training_step`,
    :meth:`enter_training_epoch`, :meth:`enter_evaluation`, :meth:`close`);
    :meth:`log` then knows which store a value goes to and which ``on_step`` /
    ``on_epoch`` defaults apply, as Lightning documents them: per step in
    training steps, per epoch in training epoch hooks and in evaluation.

    Args:
        collectives: the strategy (``all_reduce`` for ``sync_dist`` values, and
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
        self.train = MetricStore(collectives.all_reduce)
        #: Values logged in the current (or last) evaluation run.
        self.eval = MetricStore(collectives.all_reduce)
        #: The latest epoch results (training epochs and evaluation runs), by name.
        self.epoch_metrics: dict[str, Number] = {}
        #: The latest value written to the loggers, by name.
        self.logged_metrics: dict[str, float] = {}
        #: The last training loss (undetached; backward has freed its graph).
        self.last_loss: torch.Tensor | None = None
        self._context = _CLOSED
        self._batch: Any = None
        self._suffix = ""
        self._recorder: LogRecorder | None = None

    # -------------------------------------------------------- logging context
    def enter_training_step(self, batch: Any) -> None:
        """``self.log`` now logs per step into the training store (batch: for its size).

        Args:
            batch: the batch being trained on.
        """
        self._context = _TRAIN_STEP
        self._batch = batch

    def enter_training_epoch(self) -> None:
        """``self.log`` now logs per epoch into the training store (epoch hooks)."""
        self._context = _TRAIN_EPOCH
        self._batch = None

    def enter_evaluation(self, dataloader_idx: int | None = None, batch: Any = None) -> None:
        """``self.log`` now logs per epoch into the evaluation store.

        Args:
            dataloader_idx: with several dataloaders, the current one's index:
                names get a ``/dataloader_idx_N`` suffix.
            batch: the batch being evaluated (None in hooks outside a batch).
        """
        self._context = _EVAL
        self._suffix = "" if dataloader_idx is None else f"/dataloader_idx_{dataloader_idx}"
        self._batch = batch

    def close(self) -> None:
        """``self.log`` is now an error (between runs, and in predict)."""
        self._context = _CLOSED
        self._batch = None
        self._suffix = ""

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
        value: Number,
        on_step: bool | None,
        on_epoch: bool | None,
        prog_bar: bool,
        logger: bool,
        sync_dist: bool,
        reduce_fx: str,
        batch_size: int | None,
    ) -> None:
        """Record one ``self.log`` call (see ``Module.log`` for the arguments).

        Called for every logged value of every step: positional arguments and
        no work beyond choosing the store and the defaults.
        """
        recorder = self._recorder
        if recorder is not None:
            arguments = (on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx, batch_size)
            recorder(name, value, arguments)
            return
        context = self._context
        if context == _TRAIN_STEP:
            store = self.train
            on_step = True if on_step is None else on_step
            on_epoch = False if on_epoch is None else on_epoch
        elif context == _CLOSED:
            raise RuntimeError(
                f"self.log({name!r}) was called outside a training or evaluation step or "
                "hook; values can only be logged while fit/validate/test runs (not in predict)."
            )
        else:
            store = self.train if context == _TRAIN_EPOCH else self.eval
            on_step = False if on_step is None else on_step
            on_epoch = True if on_epoch is None else on_epoch
        if batch_size is None:
            batch = self._batch
            batch_size = (
                self._batch_size_of(batch)
                if on_epoch and reduce_fx == "mean" and batch is not None
                else 1
            )
        options = (on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx)
        store.log(name + self._suffix, value, options, batch_size)

    def update_epoch_metrics(self, values: Mapping[str, Number]) -> None:
        """Record epoch results, so callbacks (early stopping, schedulers) can read them.

        Args:
            values: metric name to value.
        """
        self.epoch_metrics.update(values)

    def write(self, values: Mapping[str, Number], keys: set[str], step: int, epoch: int) -> None:
        """Send the ``keys`` among ``values`` to every logger, from global rank 0 only.

        Args:
            values: metric name to value (tensors are read here).
            keys: the names to send (those logged with ``logger=True``).
            step: the global step to record them at.
            epoch: the current epoch (written beside them as "epoch").
        """
        if not self.loggers or not self._collectives.is_global_zero:
            return
        floats = to_floats(dict(values), keys)
        if not floats:
            return
        floats["epoch"] = float(epoch)
        self.logged_metrics.update(floats)
        for logger in self.loggers:
            logger.log_metrics(floats, step)

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
        values = self.train.epoch_values()
        self.update_epoch_metrics(values)
        self.write(values, display_names(self.train, prog_bar=None, logger=True), step, epoch)

    def write_evaluation(self, step: int, epoch: int) -> None:
        """Write the last evaluation run's epoch results to the loggers.

        Args:
            step: the global step to write them at.
            epoch: the current epoch.
        """
        keys = display_names(self.eval, prog_bar=None, logger=True)
        self.write(self.epoch_metrics, keys, step, epoch)

    # ------------------------------------------------------------------ read
    @property
    def callback_metrics(self) -> dict[str, torch.Tensor]:
        """Latest value of every logged metric (epoch results and current step values)."""
        values = dict(self.epoch_metrics)
        values.update(self.train.step_values(sync=False))
        return {name: as_tensor(value) for name, value in values.items()}

    def progress_bar_metrics(self, *, fitting: bool) -> dict[str, float]:
        """The training loss and every ``prog_bar`` metric, as floats.

        Reading this synchronises with the device: the progress bar reads it only
        when it redraws. The training loss is added as "loss" unless the user
        already shows that same value.

        Args:
            fitting: whether fit runs: training values count only then.
        """
        keys = display_names(self.eval, prog_bar=True, logger=None)
        if fitting:
            keys |= display_names(self.train, prog_bar=True, logger=None)
        values = to_floats(self.callback_metrics, keys)
        loss = self.last_loss
        if fitting and loss is not None and "loss" not in values:
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

    def adopt(self, callback_metrics: Mapping[str, Number], logged: Mapping[str, float]) -> None:
        """Take over another process's results (``ddp_spawn``: rank 0's, when it is done).

        Args:
            callback_metrics: its callback metrics.
            logged: its logged metrics.
        """
        self.epoch_metrics.update(callback_metrics)
        self.logged_metrics = dict(logged)


def _accumulate(total: Number | None, value: Number, reduce_fx: str, weight: int) -> Number:
    if reduce_fx == "mean":
        if isinstance(value, torch.Tensor):
            if total is None:
                # A fresh float32 tensor: later in-place adds must not touch the user's tensor.
                return value.float() * weight
            if isinstance(total, torch.Tensor):
                return total.add_(value, alpha=weight)
            return value.float() * weight + total
        return (total if total is not None else 0.0) + float(value) * weight
    if reduce_fx == "sum":
        if total is None:
            return value.float().clone() if isinstance(value, torch.Tensor) else float(value)
        return total + value
    if total is None:
        return value.float().clone() if isinstance(value, torch.Tensor) else float(value)
    pick = torch.maximum if reduce_fx == "max" else torch.minimum
    if isinstance(total, torch.Tensor) or isinstance(value, torch.Tensor):
        return pick(as_tensor(total).to(_device_of(value, total)), as_tensor(value))
    return max(total, value) if reduce_fx == "max" else min(total, value)


def _device_of(*values: Any) -> torch.device:
    for value in values:
        if isinstance(value, torch.Tensor):
            return value.device
    return torch.device("cpu")


def _describe(options: LogOptions) -> str:
    names = ("on_step", "on_epoch", "prog_bar", "logger", "sync_dist", "reduce_fx")
    return ", ".join(f"{n}={v!r}" for n, v in zip(names, options, strict=True))

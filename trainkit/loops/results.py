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

Names follow Lightning: a value logged both per step and per epoch is written
as ``name_step`` and ``name_epoch``, and callbacks also see ``name`` (the step
value while its training epoch runs, the epoch value after). With several
evaluation dataloaders every name ends in ``/dataloader_idx_N``, after any
``_step``/``_epoch``. A torchmetrics ``Metric`` logged as an object contributes
its forward value per step and its ``compute()`` per epoch, then is reset;
torchmetrics is never imported here (see :func:`is_metric`).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch

from trainkit.utilities.rank_zero import rank_zero_warn

if TYPE_CHECKING:
    from trainkit.loggers.base import Logger

Number = torch.Tensor | float | int
# The strategy's reduce_logged(values, point, always=...).
ReduceFn = Callable[..., list[torch.Tensor]]

REDUCE_FXS = ("mean", "sum", "max", "min")
# Every accepted spelling of a reduction: names (any case; "avg" is the mean) and
# the torch and builtin functions that compute them. Looked up once per new name.
_REDUCTIONS: dict[Any, str] = {
    "avg": "mean",
    **{name: name for name in REDUCE_FXS},
    torch.mean: "mean",
    torch.sum: "sum",
    torch.max: "max",
    torch.amax: "max",
    torch.min: "min",
    torch.amin: "min",
    sum: "sum",
    max: "max",
    min: "min",
}
# (on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx), see Module.log.
LogOptions = tuple[bool, bool, bool, bool, bool, Any]
# What self.log received, as it arrived: (on_step, on_epoch, prog_bar, logger,
# sync_dist, reduce_fx, batch_size), the first two and the last possibly None.
LogArguments = tuple[bool | None, bool | None, bool, bool, bool, Any, int | None]
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
    #: The name as logged, and the ``/dataloader_idx_N`` suffix it gets (or "").
    base: str = ""
    suffix: str = ""
    #: The dataloader that logged it (None: outside a dataloader's batches).
    dataloader_idx: int | None = None
    #: A torchmetrics ``Metric`` logged by object: it aggregates itself.
    metric: Any = None
    #: A one-element tensor of another shape, kept as a 0-dim tensor.
    squeeze: bool = False
    #: Whether ``metric`` was reset after its epoch value was computed.
    metric_reset: bool = False
    #: Where it was first logged (a step or an epoch hook: ``MetricStore.context``).
    context: int = 0
    #: Whether the warning about a ``Metric`` with no per-step value was given.
    warned: bool = False

    @property
    def step_key(self) -> str:
        """The key of the per-step value: ``name_step`` when also per-epoch, else ``name``."""
        return f"{self.base}_step{self.suffix}" if self.on_epoch else self.base + self.suffix

    @property
    def epoch_key(self) -> str:
        """The key of the epoch value: ``name_epoch`` when also per-step, else ``name``."""
        return f"{self.base}_epoch{self.suffix}" if self.on_step else self.base + self.suffix

    @property
    def plain_key(self) -> str:
        """The name as logged, with its dataloader suffix (what callbacks monitor)."""
        return self.base + self.suffix


class MetricStore:
    """The values logged during one stage run (a training epoch, a validation run...).

    Args:
        reduce: the strategy's ``reduce_logged``, used for ``sync_dist`` values.
        stage: what the store logs, in words ("training", "evaluation"), for
            the error that names a value logged on some processes only.
    """

    def __init__(self, reduce: ReduceFn, stage: str) -> None:
        self._reduce = reduce
        self._stage = stage
        #: Where values are logged now (the results' context: a step or an epoch hook).
        self.context = 0
        self.entries: dict[str, _Entry] = {}
        #: Whether the epoch values were read (the epoch is over): from then on,
        #: callbacks see a name logged per step and per epoch at its epoch value.
        self.epoch_reduced = False

    def log(
        self,
        name: str,
        value: Any,
        options: LogOptions,
        batch_size: int,
        suffix: str = "",
        dataloader_idx: int | None = None,
    ) -> None:
        """Record ``value`` under ``name``. Cheap: no device synchronisation.

        Called for every ``self.log`` in every step, so it takes its options as one
        tuple, positionally.

        Args:
            name: the metric's name.
            value: a one-element tensor, a number, or a torchmetrics ``Metric``.
            options: ``(on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx)``:
                keep the latest value; aggregate over the run with ``reduce_fx``; show
                in the progress bar; send to loggers; reduce across processes when
                read; "mean", "sum", "max" or "min" (or the matching torch function).
            batch_size: weight of the value in the epoch mean.
            suffix: ``/dataloader_idx_N`` with several evaluation dataloaders, else "".
            dataloader_idx: the dataloader logging it (None outside dataloader batches).
        """
        key = name + suffix if suffix else name
        entry = self.entries.get(key)
        if entry is None:
            entry = self._new_entry(key, value, options, suffix, dataloader_idx)
        elif entry.options != options:
            if entry.context != self.context:
                # Logged again from another hook (a step, then an epoch hook) with
                # other options: the later one wins, as in Lightning.
                entry = self._new_entry(key, value, options, suffix, dataloader_idx)
            else:
                self._check_same_options(entry, key, options)
        if entry.dataloader_idx != dataloader_idx and dataloader_idx is not None:
            self._check_same_dataloader(entry, key, dataloader_idx)
        if entry.metric is not None:
            self._log_metric(entry, value)
            return
        if isinstance(value, torch.Tensor):
            value = value.data  # the value only: no autograd graph kept, no dispatcher call
            if entry.squeeze:
                value = value.reshape(())
        if entry.on_step:
            entry.step_value = value
        if entry.on_epoch:
            entry.total = _accumulate(entry.total, value, entry.reduce_fx, batch_size)
            entry.weight += batch_size

    def _log_metric(self, entry: _Entry, metric: Any) -> None:
        if metric is not entry.metric:
            raise ValueError(
                f"self.log({entry.plain_key!r}) was given a different Metric object than "
                "before in the same stage; log each Metric under its own name."
            )
        if not getattr(metric, "update_called", True):
            name = type(metric).__name__
            raise ValueError(
                f"self.log({entry.plain_key!r}) got a {name} that was never updated since its "
                "last reset (each epoch's end resets it), so it has no value to log. Update it "
                "before logging it: call the metric (`metric(preds, target)`, which also gives "
                "the batch's value) or `metric.update(preds, target)` in the steps."
            )
        if entry.on_step:
            # The value of the metric's last forward call, i.e. of this batch alone.
            cached = getattr(metric, "_forward_cache", None)
            if isinstance(cached, torch.Tensor) and cached.numel() == 1:
                entry.step_value = cached.data.reshape(())
            elif cached is not None:
                raise ValueError(
                    f"self.log({entry.plain_key!r}, <{type(metric).__name__}>): the metric's "
                    f"value is {_shown(cached)}, but a logged value must be a single number. "
                    "Configure the metric to give one (e.g. average='micro' or 'macro' rather "
                    "than None), or log each element under its own name."
                )
            elif not entry.warned:
                # Only forward() gives a batch's value; update() alone leaves none.
                entry.warned = True
                rank_zero_warn(
                    f"self.log({entry.plain_key!r}, <{type(metric).__name__}>, on_step=True) has "
                    "no value for this step: the metric was updated with `.update()`, which "
                    "computes nothing. Call the metric itself (`self.metric(preds, target)`) to "
                    "log each batch's value, or log it with on_step=False to log only the "
                    "epoch's value (which it still does)."
                )

    def _check_same_options(self, entry: _Entry, key: str, options: LogOptions) -> None:
        # Slow path: the options differ as given; they may still mean the same
        # (reduce_fx="max" then torch.max, or a store restored from a checkpoint).
        same = entry.options[:5] == options[:5] and _reduce_name(key, options[5]) == _reduce_name(
            key, entry.options[5]
        )
        if not same:
            hook = _CONTEXT_NAMES.get(entry.context, "the same hook")
            raise ValueError(
                f"self.log({key!r}) was called with different options in the same stage "
                f"(before: {_describe(entry.options)}; now: {_describe(options)}): you called "
                f"`self.log({key}, ...)` twice in `{hook}` with different arguments. Use the "
                "same options each time, or another name."
            )
        entry.options = options

    def _check_same_dataloader(self, entry: _Entry, key: str, dataloader_idx: int) -> None:
        if entry.dataloader_idx is None:
            entry.dataloader_idx = dataloader_idx
            return
        raise ValueError(
            f"self.log({key!r}, add_dataloader_idx=False) was called from dataloader "
            f"{dataloader_idx} after dataloader {entry.dataloader_idx} logged the same name, "
            "so their values would be mixed. Give each dataloader its own name (e.g. "
            f"f'{key}_{{dataloader_idx}}'), or keep add_dataloader_idx=True."
        )

    def _new_entry(
        self,
        name: str,
        value: Any,
        options: LogOptions,
        suffix: str = "",
        dataloader_idx: int | None = None,
    ) -> _Entry:
        on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx = options
        reduce_name = _reduce_name(name, reduce_fx)
        metric = value if is_metric(value) else None
        if metric is not None and reduce_name != "mean":
            raise ValueError(
                f"self.log({name!r}, <{type(metric).__name__}>, reduce_fx={reduce_name!r}): a "
                "torchmetrics Metric is not reduced by self.log; its epoch value is its own "
                "compute() over every update of the epoch. Leave reduce_fx at its default, or "
                "choose the reduction in the Metric itself (e.g. torchmetrics.MaxMetric)."
            )
        squeeze = False
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise ValueError(
                    f"self.log({name!r}) got a tensor of shape {tuple(value.shape)}; only "
                    "scalars can be logged (the tensor must have a single element). Reduce it "
                    "first (e.g. `.mean()`), or log each element by name."
                )
            squeeze = value.dim() != 0
        elif metric is None and not (
            isinstance(value, numbers.Number) and not isinstance(value, complex)
        ):
            several = isinstance(value, Mapping) or hasattr(value, "items")
            hint = " Use self.log_dict for a dict or a MetricCollection." if several else ""
            shown = str(value) if len(str(value)) <= 80 else str(value)[:77] + "..."
            raise ValueError(
                f"`self.log({name}, {shown})` was called, but `{type(value).__name__}` values "
                f"cannot be logged: self.log({name!r}) got a {type(value).__name__}; log a "
                f"one-element tensor, a number or a torchmetrics Metric.{hint}"
            )
        if not (on_step or on_epoch):
            raise ValueError(
                f"self.log({name!r}, on_step=False, on_epoch=False) is not useful: it records "
                "nothing. Set on_step or on_epoch to True."
            )
        base = name[: len(name) - len(suffix)] if suffix else name
        if "/dataloader_idx_" in base:
            raise ValueError(
                f"You called `self.log` with the key `{base}`, but names must not contain "
                "'/dataloader_idx_'; trainkit "
                "appends it itself when there are several evaluation dataloaders. Log under "
                "the plain name."
            )
        entry = _Entry(options, on_step, on_epoch, prog_bar, logger, sync_dist, reduce_name)
        entry.base = base
        entry.suffix = suffix
        entry.dataloader_idx = dataloader_idx
        entry.metric = metric
        entry.squeeze = squeeze
        entry.context = self.context
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
        synced: list[tuple[str, torch.Tensor, str]] = []
        for entry in self.entries.values():
            if entry.step_value is None:
                continue
            values[entry.step_key] = entry.step_value
            if sync and entry.sync_dist and entry.metric is None:
                synced.append((entry.step_key, as_tensor(entry.step_value), entry.reduce_fx))
        reduced = self._reduce(synced, f"a step of {self._stage}") if synced else []
        for (key, _, _), value in zip(synced, reduced, strict=True):
            values[key] = value
        return values

    def epoch_values(self) -> dict[str, Number]:
        """The aggregates over the run, keyed ``name`` (or ``name_epoch`` when also per-step).

        ``sync_dist`` values are reduced across processes, so every process must
        call this at the same point. Logged ``Metric`` objects are computed here
        (they sync themselves), once per run of the store, and reset later by
        :meth:`reset_computed_metrics`, after the epoch-end hooks: a hook that calls
        ``metric.compute()`` gets the epoch's value (torchmetrics caches it), as
        in Lightning.
        """
        self.epoch_reduced = True
        values: dict[str, Number] = {}
        # Sums and weights of sync_dist means, reduced together below.
        synced: list[tuple[str, torch.Tensor, str]] = []
        means: list[tuple[_Entry, int]] = []
        # A Metric logged under several names (or by several dataloaders) is
        # computed once.
        computed: dict[int, Any] = {}
        for entry in self.entries.values():
            if entry.metric is not None and entry.on_epoch and entry.total is None:
                # A Metric syncs its own state across processes in compute().
                key = id(entry.metric)
                if key not in computed:
                    computed[key] = _computed_value(entry)
                entry.total = computed[key]
                entry.weight = 1
            if entry.total is None:
                continue
            total: Number = entry.total
            weight: Number = entry.weight
            if entry.metric is not None:
                values[entry.epoch_key] = total
                continue
            if entry.sync_dist:
                op = "sum" if entry.reduce_fx in ("mean", "sum") else entry.reduce_fx
                means.append((entry, len(synced)))
                synced.append((entry.epoch_key, as_tensor(total), op))
                if entry.reduce_fx == "mean":
                    synced.append((entry.epoch_key, as_tensor(float(weight)), "sum"))
                continue
            values[entry.epoch_key] = total / weight if entry.reduce_fx == "mean" else total
        # Every process reaches an epoch's end: it checks in even with nothing to
        # reduce, so that a value logged on some processes only is named at once.
        reduced = self._reduce(synced, f"the end of an epoch of {self._stage}", always=True)
        for entry, index in means:
            total = reduced[index]
            mean = entry.reduce_fx == "mean"
            values[entry.epoch_key] = total / reduced[index + 1] if mean else total
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

    def reset_computed_metrics(self) -> None:
        """Reset the logged ``Metric`` objects whose epoch value was computed.

        Called once the epoch's end hooks have run (Lightning resets them at the
        same point), so that each starts the next epoch afresh. The values stay
        in the store.
        """
        for entry in self.entries.values():
            if entry.metric is not None and entry.total is not None and not entry.metric_reset:
                entry.metric.reset()
                entry.metric_reset = True

    def reset(self) -> None:
        """Forget everything (at the start of a new epoch or run).

        Logged ``Metric`` objects not reset at their epoch's end are reset here.
        """
        for entry in self.entries.values():
            if entry.metric is not None and not entry.metric_reset:
                entry.metric.reset()
        self.entries.clear()
        self.epoch_reduced = False

    def state_dict(self) -> dict[str, Any]:
        """Everything logged so far, so that a resumed epoch's means stay exact.

        Logged ``Metric`` objects are left out: their state is the Metric's own.
        """
        return {
            name: {
                "options": [*entry.options[:5], entry.reduce_fx],
                "step_value": entry.step_value,
                "total": entry.total,
                "weight": entry.weight,
                "base": entry.base,
                "suffix": entry.suffix,
            }
            for name, entry in self.entries.items()
            if entry.metric is None
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
            entry.base = saved.get("base", name)
            entry.suffix = saved.get("suffix", "")
            self.entries[name] = entry
        self.epoch_reduced = False


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

    def reduce_logged(self, values: Any, point: str, *, always: bool = False) -> list[torch.Tensor]:
        """Reduce ``sync_dist`` values over all processes (see ``Strategy.reduce_logged``)."""


# Logging contexts: where a self.log call lands and which defaults it gets.
_CLOSED, _TRAIN_STEP, _TRAIN_EPOCH, _EVAL, _EVAL_EPOCH, _TRAIN_START = 0, 1, 2, 3, 4, 5
_CONTEXT_NAMES = {
    _TRAIN_STEP: "training_step",
    _TRAIN_EPOCH: "a training epoch hook",
    _EVAL: "the evaluation step",
    _EVAL_EPOCH: "an evaluation epoch hook",
    _TRAIN_START: "on_train_start",
}
_NOT_LOGGING = (
    "values can only be logged while fit/validate/test runs, in a step or an epoch hook "
    "(not in predict)"
)


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
        self._unread: dict[str, Number] = {}
        # Epoch-level prog_bar names of earlier epochs of this run: the bar keeps
        # showing them (as Lightning's progress_bar_metrics do).
        self._bar_names: set[str] = set()
        #: The last training loss (undetached; backward has freed its graph).
        self.last_loss: torch.Tensor | None = None
        self._context = _CLOSED
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
        self._context = _TRAIN_STEP
        self._batch = batch

    def enter_training_epoch(self) -> None:
        """``self.log`` now logs per epoch into the training store (epoch hooks)."""
        self._context = _TRAIN_EPOCH
        self._batch = None

    @property
    def logged_metrics(self) -> dict[str, torch.Tensor]:
        """The latest value of each name logged with ``logger=True``, as 0-dim CPU tensors.

        As Lightning's ``trainer.logged_metrics``: filled whether or not a logger
        writes them, and holding the latest training step's values, also between
        the ``log_every_n_steps`` writes (values are read from the device only when
        asked for).
        """
        if self._context in (_TRAIN_STEP, _TRAIN_EPOCH):
            self._keep_step_values(sync=False)
        if self._unread:
            floats = to_floats(dict(self._unread), set(self._unread))
            self._logged.update({name: torch.tensor(value) for name, value in floats.items()})
            self._unread.clear()
        return self._logged

    def _keep_step_values(self, *, sync: bool) -> None:
        # The training step values meant for the loggers, kept for logged_metrics
        # without writing them. Unsynced (read by one process), a sync_dist value
        # waits for the next write or the epoch's end, where it is reduced.
        train = self.train
        keys = display_names(train, prog_bar=None, logger=True)
        if not sync:
            keys -= {entry.step_key for entry in train.entries.values() if entry.sync_dist}
        values = train.step_values(sync=sync)
        self._unread.update({name: values[name] for name in keys if name in values})

    def enter_training_epoch_end(self) -> None:
        """The training epoch's batches are done: reduce its values, then log per epoch.

        Callbacks and the Module's ``on_train_epoch_end`` then read this epoch's
        values in ``callback_metrics`` (every process calls this: ``sync_dist``
        values are reduced here).
        """
        self.enter_training_epoch()
        self.update_epoch_metrics(self.train.epoch_values())

    def reset_metrics(self) -> None:
        """Forget the metrics of earlier runs (a new validate/test call starts afresh)."""
        self.train.reset()
        self.eval.reset()
        self.epoch_metrics = {}
        self._logged, self._unread = {}, {}
        self._bar_names = set()
        self.last_loss = None

    def enter_training_start(self) -> None:
        """``self.log`` now logs once, for ``on_train_start`` (see :meth:`end_training_start`)."""
        self._context = _TRAIN_START
        self._batch = None
        self._start.reset()

    def end_training_start(self, step: int, epoch: int) -> None:
        """Keep what ``on_train_start`` logged for callbacks and write it to the loggers.

        Args:
            step: the global step to write it at.
            epoch: the current epoch.
        """
        self._context = _CLOSED
        values = self._start.epoch_values()  # every process: it may reduce sync_dist values
        if self._start.entries:
            self.update_epoch_metrics(values)
            self._bar_names |= display_names(self._start, prog_bar=True, logger=None)
            self.write(values, display_names(self._start, prog_bar=None, logger=True), step, epoch)
        self._start.reset_computed_metrics()

    def enter_evaluation(self, dataloader_idx: int | None = None, batch: Any = None) -> None:
        """``self.log`` now logs per epoch into the evaluation store.

        Args:
            dataloader_idx: with several dataloaders, the current one's index:
                names get a ``/dataloader_idx_N`` suffix.
            batch: the batch being evaluated (None in epoch hooks, outside a batch:
                there, ``on_step=True`` is an error, as in training epoch hooks).
        """
        self._context = _EVAL if batch is not None else _EVAL_EPOCH
        self._suffix = "" if dataloader_idx is None else f"/dataloader_idx_{dataloader_idx}"
        self._dataloader_idx = dataloader_idx
        self._batch = batch

    def close(self, hook: str | None = None) -> None:
        """``self.log`` is now an error (between runs, in predict, in ``hook``).

        Args:
            hook: the hook that runs next, where logging is not allowed (named in
                the error), e.g. "on_validation_end".
        """
        self._context = _CLOSED
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
        logger: bool,
        sync_dist: bool,
        reduce_fx: Any,
        batch_size: int | None,
        add_dataloader_idx: bool = True,
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
        elif context == _EVAL:
            store = self.eval
            on_step = False if on_step is None else on_step
            on_epoch = True if on_epoch is None else on_epoch
        elif context == _CLOSED:
            raise RuntimeError(f"self.log({name!r}) was refused: {self._closed_reason}.")
        else:
            store = (
                self.train
                if context == _TRAIN_EPOCH
                else self.eval
                if context == _EVAL_EPOCH
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
                if on_epoch and batch is not None and (reduce_fx == "mean" or _is_mean(reduce_fx))
                else 1
            )
        options = (on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx)
        suffix = self._suffix if add_dataloader_idx else ""
        store.context = context
        store.log(name, value, options, batch_size, suffix, self._dataloader_idx)

    def update_epoch_metrics(self, values: Mapping[str, Number]) -> None:
        """Record epoch results, so callbacks (early stopping, schedulers) can read them.

        A name logged both per step and per epoch is also kept under its plain
        name, at its epoch value, so that callbacks can monitor the name as logged.

        Args:
            values: metric name to value.
        """
        self.epoch_metrics.update(values)
        self.epoch_metrics.update(self._plain_names(values))

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
            step: the global step to record them at.
            epoch: the current epoch (written beside them as "epoch"; None: not written).
        """
        if not self.loggers or not self._collectives.is_global_zero:
            # Kept as they are (no host sync here); logged_metrics converts them when read.
            self._unread.update({name: values[name] for name in keys if name in values})
            return
        floats = to_floats(dict(values), keys)
        if not floats:
            return
        # trainer.logged_metrics holds what was logged; "epoch" goes to the loggers only.
        self._logged.update({name: torch.tensor(value) for name, value in floats.items()})
        for name in floats:
            self._unread.pop(name, None)  # older than what was just written
        if epoch is not None:
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
        """Latest value of every logged metric (epoch results and current step values).

        A name logged both per step and per epoch appears as ``name_step``,
        ``name_epoch`` (once an epoch ended) and ``name``: the step value while
        its training epoch runs, the epoch value once the epoch ends.
        """
        values = dict(self.epoch_metrics)
        values.update(self._sanity_values)
        train = self.train
        values.update(train.step_values(sync=False))
        if not train.epoch_reduced:
            for entry in train.entries.values():
                if entry.on_step and entry.on_epoch and entry.step_value is not None:
                    values[entry.plain_key] = entry.step_value
        return {name: as_tensor(value) for name, value in values.items()}

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


def _is_mean(reduce_fx: Any) -> bool:
    """Whether ``reduce_fx`` (not the string "mean") still means the mean."""
    try:
        return _REDUCTIONS.get(reduce_fx.lower() if isinstance(reduce_fx, str) else reduce_fx) == (
            "mean"
        )
    except TypeError:
        return False


def _reduce_name(name: str, reduce_fx: Any) -> str:
    """``reduce_fx`` as one of :data:`REDUCE_FXS`, or a clear error."""
    try:
        found = _REDUCTIONS.get(reduce_fx.lower() if isinstance(reduce_fx, str) else reduce_fx)
    except TypeError:  # unhashable
        found = None
    if found is None:
        shown = getattr(reduce_fx, "__name__", None) if callable(reduce_fx) else None
        raise ValueError(
            f"self.log({name!r}, reduce_fx={shown or repr(reduce_fx)}) is not supported; use one "
            f"of {', '.join(REDUCE_FXS)} (a name, any case, or torch.mean, torch.sum, torch.max, "
            "torch.min: only `self.log(..., reduce_fx={min,max,mean,sum})` are supported). For "
            "another reduction, log a torchmetrics Metric object, which aggregates itself."
        )
    return found


def is_metric(value: Any) -> bool:
    """Whether ``value`` is a torchmetrics ``Metric`` (a ``MetricCollection`` is not).

    Decided from the class's ancestry, so trainkit never imports torchmetrics.

    Args:
        value: anything passed to ``self.log``.
    """
    if not isinstance(value, torch.nn.Module):
        return False
    return any(
        cls.__name__ == "Metric" and cls.__module__.split(".")[0] == "torchmetrics"
        for cls in type(value).__mro__
    )


def is_metric_collection(value: Any) -> bool:
    """Whether ``value`` is a torchmetrics ``MetricCollection`` (without importing torchmetrics).

    Args:
        value: anything passed to ``self.log_dict``.
    """
    return isinstance(value, torch.nn.Module) and any(
        cls.__name__ == "MetricCollection" and cls.__module__.split(".")[0] == "torchmetrics"
        for cls in type(value).__mro__
    )


def _computed_value(entry: _Entry) -> torch.Tensor:
    """The epoch value of a logged ``Metric``: its ``compute()``, which must be a scalar."""
    value = entry.metric.compute()
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.detach().reshape(())
    raise ValueError(
        f"self.log({entry.plain_key!r}, <{type(entry.metric).__name__}>): its compute() returned "
        f"{_shown(value)}, but a logged value must be a single number. Configure the metric to "
        "give one (e.g. average='micro' or 'macro' rather than None), or compute it yourself "
        "and log each element under its own name."
    )


def _shown(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def _describe(options: LogOptions) -> str:
    names = ("on_step", "on_epoch", "prog_bar", "logger", "sync_dist", "reduce_fx")
    return ", ".join(f"{n}={v!r}" for n, v in zip(names, options, strict=True))

"""What one ``self.log`` call records: the store of one stage run, and how values reduce.

A :class:`MetricStore` holds the values logged during one stage run (a training
epoch, an evaluation run); ``trainkit.loops.results.Results`` chooses the store
and the ``on_step``/``on_epoch`` defaults, and routes what the stores hold to
callbacks, loggers and the progress bar.

Logged tensors are kept on their device: a step value is just a reference to
the (detached) tensor, an epoch value is a running sum kept with in-place device
ops. Nothing here calls ``.item()`` per step; values become Python floats only
when a logger writes or the progress bar draws (``results.to_floats``). That is what
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from trainkit.utilities.rank_zero import rank_zero_warn

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

# Where a value is logged from (``MetricStore.context``, set by the results
# store, which also picks the store and the on_step/on_epoch defaults by it).
CLOSED, TRAIN_STEP, TRAIN_EPOCH, EVAL, EVAL_EPOCH, TRAIN_START = 0, 1, 2, 3, 4, 5
# The hook each context is, for error messages.
CONTEXT_NAMES = {
    TRAIN_STEP: "training_step",
    TRAIN_EPOCH: "a training epoch hook",
    EVAL: "the evaluation step",
    EVAL_EPOCH: "an evaluation epoch hook",
    TRAIN_START: "on_train_start",
}


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
    #: ``step_value`` reduced over the processes (``sync_dist``), once a reader
    #: needed it (:meth:`MetricStore.sync_step_values`); None until then.
    synced: Number | None = None
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
        #: A training step's ``self.log`` calls that set a step value only, by their
        #: arguments as given (``Results.log`` fills and reads it): the same call in
        #: the next step goes straight to its entry.
        self.repeated: dict[tuple[Any, ...], _Entry] = {}
        #: Whether the epoch values were read (the epoch is over): from then on,
        #: callbacks see a name logged per step and per epoch at its epoch value.
        self.epoch_reduced = False
        #: Whether a value is logged per step with ``sync_dist=True`` (reduced
        #: by :meth:`sync_step_values`).
        self.step_syncs = False

    def log(
        self,
        name: str,
        value: Any,
        options: LogOptions,
        batch_size: int,
        suffix: str = "",
        dataloader_idx: int | None = None,
    ) -> _Entry:
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
            return entry
        if isinstance(value, torch.Tensor):
            value = value.data  # the value only: no autograd graph kept, no dispatcher call
            if entry.squeeze:
                value = value.reshape(())
        if entry.on_step:
            entry.step_value, entry.synced = value, None
        if entry.on_epoch:
            entry.total = _accumulate(entry.total, value, entry.reduce_fx, batch_size)
            entry.weight += batch_size
        return entry

    @staticmethod
    def steps_only(entry: _Entry) -> bool:
        """Whether each value logged to ``entry`` only replaces its step value.

        Such an entry needs no check when the same call logs it again: the value
        is a plain tensor (no ``Metric``, no reshape, no reduction across
        processes to forget) and nothing accumulates.

        Args:
            entry: the entry :meth:`log` returned.
        """
        return (
            entry.on_step
            and not entry.on_epoch
            and entry.metric is None
            and not entry.squeeze
            and not entry.sync_dist
        )

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
            hook = CONTEXT_NAMES.get(entry.context, "the same hook")
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
        self.step_syncs = self.step_syncs or (on_step and sync_dist and metric is None)
        entry.base = base
        entry.suffix = suffix
        entry.dataloader_idx = dataloader_idx
        entry.metric = metric
        entry.squeeze = squeeze
        entry.context = self.context
        self.entries[name] = entry
        self.repeated.clear()  # a call may now resolve to another entry
        return entry

    # ---------------------------------------------------------------- reading
    def step_values(self, *, sync: bool) -> dict[str, Number]:
        """The latest per-step values, keyed ``name`` (or ``name_step`` when also per-epoch).

        Args:
            sync: reduce ``sync_dist`` values across processes. Every process must
                pass the same value at the same point, or the job hangs.
        """
        if sync:
            self.sync_step_values()
        values: dict[str, Number] = {}
        for entry in self.entries.values():
            if entry.step_value is not None:
                values[entry.step_key] = entry.step_value if entry.synced is None else entry.synced
        return values

    def sync_step_values(self) -> None:
        """Reduce the ``sync_dist`` step values not reduced yet over the processes, once.

        Every process calls this at the same point: where the loggers are
        written, at an epoch's end, and before a decision every process takes
        alike (a checkpoint's rank, a scheduler's step). From then on every
        reader (``callback_metrics``, the progress bar, the loggers) sees the
        reduced value until the name is logged again, and none reduces it again.
        """
        if not self.step_syncs:
            return  # no such value: nothing to read, no collective
        pending: list[tuple[_Entry, tuple[str, torch.Tensor, str]]] = []
        for entry in self.entries.values():
            value = entry.step_value  # None unless on_step
            if value is None or not entry.sync_dist or entry.metric is not None:
                continue
            if entry.synced is None:  # not reduced yet
                pending.append((entry, (entry.step_key, as_tensor(value), entry.reduce_fx)))
        if not pending:
            return
        reduced = self._reduce([values for _, values in pending], f"a step of {self._stage}")
        for (entry, _), synced in zip(pending, reduced, strict=True):
            entry.synced = synced

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
        self.repeated.clear()
        self.epoch_reduced = False
        self.step_syncs = False

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
        self.repeated.clear()
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
        self.step_syncs = any(e.on_step and e.sync_dist for e in self.entries.values())


def as_tensor(value: Number) -> torch.Tensor:
    """``value`` as a tensor (numbers become 0-dim float tensors).

    Args:
        value: a tensor or number.
    """
    return value if isinstance(value, torch.Tensor) else torch.tensor(float(value))


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


def is_mean(reduce_fx: Any) -> bool:
    """Whether ``reduce_fx`` (not the string "mean") still means the mean.

    Args:
        reduce_fx: ``self.log``'s ``reduce_fx``.

    Example:
        >>> is_mean("AVG"), is_mean(torch.mean), is_mean("sum")
        (True, True, False)
    """
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

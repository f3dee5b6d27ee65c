"""Aggregation of values logged with ``Module.log``.

Logged tensors are kept on their device: a step value is just a reference to
the (detached) tensor, an epoch value is a running sum kept with in-place device
ops. Nothing here calls ``.item()``; values become Python floats only when a
logger writes or the progress bar draws (see ``to_floats``). That is what keeps
logging every step free of host-device synchronisation.

Epoch means are weighted by batch size and reduced across processes as
``sum(value * batch_size) / sum(batch_size)``, so an uneven last batch or an
uneven split over ranks gives the exact dataset mean.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

Number = torch.Tensor | float | int
# The strategy's all_reduce(tensor, op).
ReduceFn = Callable[..., torch.Tensor]

REDUCE_FXS = ("mean", "sum", "max", "min")
# (on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx), see Module.log.
LogOptions = tuple[bool, bool, bool, bool, bool, str]


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
            value = value.detach()
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

"""LearningRateMonitor: log each optimizer's learning rate (and momentum, weight decay).

Names follow Lightning's: ``lr-<OptimizerClass>``, the scheduler's ``name`` when
the user gave one, a ``/<group name>`` suffix for a parameter group with a
``name`` key, and ``-momentum`` / ``-weight_decay`` after the learning rate's
name. Several unnamed parameter groups are ``/pg1``, ``/pg2``... (counting from
1); a second optimizer of the same class is ``-1``, a third ``-2`` (the first has
no number). Names are worked out when training starts and again only when an
optimizer's number of parameter groups changes (a finetuning callback adding
one: the first group's history then continues under ``/pg1``); a logging step
only reads ``param_groups``.
"""

from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

_INTERVALS = (None, "step", "epoch")


class MomentumMissingWarning(RuntimeWarning, UserWarning):
    """``log_momentum=True`` with an optimizer that has no momentum.

    A ``RuntimeWarning`` as Lightning's is, and a ``UserWarning`` as trainkit's
    other warnings are, so a filter for either catches it.
    """


@dataclass
class _Tracked:
    """One optimizer to log: its base metric name, when to log, and its group names.

    The per-group names are worked out again only when the number of parameter
    groups changes (a finetuning callback adds one mid-training), so a logging
    step only reads ``param_groups``.
    """

    optimizer: torch.optim.Optimizer
    base: str
    interval: str  # "step", "epoch", or "any" (no scheduler: both)
    group_count: int = -1
    lr_names: list[str] = field(default_factory=list)


def _momentum(group: dict[str, Any]) -> float | None:
    """The group's momentum (SGD, RMSprop) or first Adam beta; None when it has neither."""
    if "betas" in group:
        return float(group["betas"][0])
    if "momentum" in group:
        return float(group["momentum"])
    return None


def _group_names(base: str, groups: list[dict[str, Any]]) -> list[str]:
    """Metric names of an optimizer's parameter groups, as Lightning names them.

    One group: ``base``, or ``base/<name>`` when the group has a ``name`` key.
    Several: ``base/<name>``, or ``base/pg1``, ``base/pg2``... (counting from 1)
    for groups without one.
    """
    if len(groups) == 1:
        return [f"{base}/{groups[0]['name']}" if "name" in groups[0] else base]
    names = [f"{base}/{group.get('name', f'pg{i}')}" for i, group in enumerate(groups, start=1)]
    duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
    if duplicates:
        raise ValueError(
            f"LearningRateMonitor: a single optimizer cannot have multiple parameter groups "
            f"with identical `name` values; {base} has {duplicates} more than once. Give "
            "each parameter group its own 'name'."
        )
    return names


class LearningRateMonitor(Callback):
    """Log learning rates (and optionally momentum) to every logger; rank 0 only.

    Args:
        logging_interval: "step" logs every ``trainer.log_every_n_steps`` steps
            (at the steps the training metrics are written at), "epoch" at the start
            of each epoch; None follows each scheduler's own interval and logs
            optimizers without a scheduler at both (a learning rate the Module sets
            itself, a warm-up in ``optimizer_step``, is seen as it changes).
        log_momentum: also log ``momentum`` (or Adam's ``betas[0]``) as
            ``<name>-momentum``.
        log_weight_decay: also log each group's ``weight_decay`` as
            ``<name>-weight_decay``.

    Attributes:
        lrs: every learning rate logged so far, by metric name.
        momentums: every momentum logged so far, by metric name.
        last_momentum_values: the latest momentum logged, by metric name.
        last_weight_decay_values: the latest weight decay logged, by metric name.

    Raises:
        RuntimeError: when training starts without a logger to write to.

    Example:
        >>> monitor = LearningRateMonitor(logging_interval="step")
    """

    def __init__(
        self,
        logging_interval: str | None = None,
        log_momentum: bool = False,
        log_weight_decay: bool = False,
    ) -> None:
        if logging_interval not in _INTERVALS:
            raise ValueError(
                f"LearningRateMonitor(logging_interval={logging_interval!r}) is not "
                "supported; use 'step', 'epoch', or None (follow each scheduler's interval)."
            )
        self.logging_interval = logging_interval
        self.log_momentum = log_momentum
        self.log_weight_decay = log_weight_decay
        self.lrs: dict[str, list[float]] = {}
        self.momentums: dict[str, list[float]] = {}
        self.last_momentum_values: dict[str, float] = {}
        self.last_weight_decay_values: dict[str, float] = {}
        self._step_entries: list[_Tracked] = []
        self._epoch_entries: list[_Tracked] = []
        self._seen_step = 0
        self._stepped_batches = 0
        self._last_logged = -1

    # ---------------------------------------------------------------- hooks
    def on_fit_start(self, trainer: Trainer, module: Module) -> None:
        """Warn when there is no logger to write to (training then stops when it starts)."""
        if trainer.is_global_zero and not trainer.loggers:
            warnings.warn(
                "LearningRateMonitor has no logger to write to; training stops with an "
                "error when it starts. Pass a logger, e.g. Trainer(logger=...), or remove "
                "the callback.",
                stacklevel=2,
            )

    def on_train_start(self, trainer: Trainer, *_: Any) -> None:
        """Find what to log, now that optimizers and schedulers exist."""
        if not trainer.loggers:
            raise RuntimeError(
                "Cannot use `LearningRateMonitor` callback with `Trainer` that has no logger. "
                "Pass a logger, e.g. Trainer(logger=True), or remove the callback."
            )
        self._step_entries = []
        self._epoch_entries = []
        self._seen_step = self._stepped_batches = trainer.global_step
        self._last_logged = -1
        # Other ranks keep empty lists, so their per-step hook returns at once.
        if not trainer.is_global_zero:
            return
        entries = self._find_entries(trainer)
        if self.log_momentum:
            self._warn_without_momentum(entries)
        for entry in entries:
            interval = self.logging_interval or entry.interval
            if interval in ("step", "any"):
                self._step_entries.append(entry)
            if interval in ("epoch", "any"):
                self._epoch_entries.append(entry)
        # Work the names out now: a clash is an error before the first step, not in it.
        self._check_distinct(entries)

    def on_train_batch_start(self, trainer: Trainer, *_: Any) -> None:
        """Log step-interval learning rates every ``log_every_n_steps`` steps: before the
        batch whose step's metrics the loggers get (steps n-1, 2n-1, ...), as Lightning."""
        if not self._step_entries:
            return
        # Count batches that stepped: with gradient accumulation several batches
        # share a global step (log once), and in manual optimization with several
        # optimizers one batch takes several steps (log every n batches, not steps).
        step = trainer.global_step
        if step != self._seen_step:
            self._seen_step = step
            self._stepped_batches += 1
        count = self._stepped_batches
        if (count + 1) % trainer.log_every_n_steps != 0 or count == self._last_logged:
            return
        self._last_logged = count
        self._log(trainer, self._step_entries)

    def on_train_epoch_start(self, trainer: Trainer, *_: Any) -> None:
        """Log epoch-interval learning rates."""
        if self._epoch_entries:
            self._log(trainer, self._epoch_entries)

    # -------------------------------------------------------------- helpers
    def _names(self, entry: _Tracked) -> list[str]:
        """The entry's per-group names, worked out again when its group count changed."""
        groups = entry.optimizer.param_groups
        if len(groups) == entry.group_count:
            return entry.lr_names
        names = _group_names(entry.base, groups)
        if entry.group_count == 1 and f"{entry.base}/pg1" in names:
            # A group was added (finetuning): the first group's history moves from
            # "lr-SGD" to "lr-SGD/pg1", its name from now on.
            first = f"{entry.base}/pg1"
            for history, suffix in ((self.lrs, ""), (self.momentums, "-momentum")):
                if entry.base + suffix in history and first + suffix not in history:
                    history[first + suffix] = history.pop(entry.base + suffix)
        entry.group_count, entry.lr_names = len(groups), names
        for name in names:
            self.lrs.setdefault(name, [])
            if self.log_momentum:
                self.momentums.setdefault(f"{name}-momentum", [])
        return names

    def _log(self, trainer: Trainer, entries: list[_Tracked]) -> None:
        metrics: dict[str, float] = {}
        for entry in entries:
            names = self._names(entry)
            for name, group in zip(names, entry.optimizer.param_groups, strict=True):
                lr = float(group["lr"])
                metrics[name] = lr
                self.lrs[name].append(lr)
                if self.log_momentum:
                    # 0 for an optimizer without momentum, as Lightning logs it (warned once).
                    momentum = _momentum(group) or 0.0
                    key = f"{name}-momentum"
                    metrics[key] = momentum
                    self.momentums.setdefault(key, []).append(momentum)
                    self.last_momentum_values[key] = momentum
                if self.log_weight_decay:
                    decay = float(group.get("weight_decay", 0.0))
                    metrics[f"{name}-weight_decay"] = decay
                    self.last_weight_decay_values[f"{name}-weight_decay"] = decay
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=trainer.global_step)
        # As Lightning's: the values are also the latest callback metrics, for a
        # callback that monitors the learning rate.
        trainer.callback_metrics.update({name: torch.tensor(v) for name, v in metrics.items()})

    def _find_entries(self, trainer: Trainer) -> list[_Tracked]:
        """One entry per optimizer: scheduled ones first, in scheduler order, then the rest.

        An optimizer's default name is ``lr-<Class>``; the second of one class is
        ``lr-<Class>-1``, the third ``lr-<Class>-2``, counted in that order. A
        scheduler's ``name`` replaces the default and is not counted.
        """
        optimizers = trainer.optimizers
        seen: Counter[str] = Counter()

        def default_name(index: int) -> str:
            class_name = type(optimizers[index]).__name__
            seen[class_name] += 1
            count = seen[class_name]
            return f"lr-{class_name}" + (f"-{count - 1}" if count > 1 else "")

        entries: list[_Tracked] = []
        scheduled: set[int] = set()
        for config in trainer.lr_scheduler_configs:
            index = config.optimizer_index
            scheduled.add(index)
            base = config.name if config.name is not None else default_name(index)
            entries.append(_Tracked(optimizers[index], base, config.interval))
        for index in range(len(optimizers)):
            if index not in scheduled:
                entries.append(_Tracked(optimizers[index], default_name(index), "any"))
        return entries

    def _check_distinct(self, entries: list[_Tracked]) -> None:
        names = [name for entry in entries for name in self._names(entry)]
        duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
        if duplicates:
            raise ValueError(
                f"LearningRateMonitor found the metric names {duplicates} more than once. "
                "Give each scheduler a distinct 'name' in configure_optimizers."
            )

    def _warn_without_momentum(self, entries: list[_Tracked]) -> None:
        without = [
            entry
            for entry in entries
            if _momentum_of(entry.optimizer, entry.optimizer.param_groups) is None
        ]
        if not without:
            return
        details = "; ".join(
            f"{type(entry.optimizer).__name__} has no 'momentum' or 'betas', so "
            f"{entry.base}-momentum is logged as 0"
            for entry in without
        )
        warnings.warn(
            "LearningRateMonitor(log_momentum=True): some optimizers do not have momentum. "
            f"{details}. This will log a value 0 for the momentum.",
            MomentumMissingWarning,
            stacklevel=3,
        )


def _momentum_of(optimizer: torch.optim.Optimizer, groups: list[dict[str, Any]]) -> float | None:
    """The first group's momentum, or None when some group has none."""
    values = [_momentum(group) for group in groups]
    return None if any(value is None for value in values) else values[0]

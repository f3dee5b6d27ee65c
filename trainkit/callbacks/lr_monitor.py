"""LearningRateMonitor: log each optimizer's learning rate (and momentum, weight decay).

Names follow Lightning's: ``lr-<OptimizerClass>``, the scheduler's ``name`` when
the user gave one, a ``/<group name>`` suffix for a parameter group with a
``name`` key, and ``-momentum`` / ``-weight_decay`` after the learning rate's
name. Two differences from Lightning, kept for dashboards written by earlier
trainkit releases: unnamed parameter groups are ``/pg0``, ``/pg1``... (Lightning
counts from 1), and optimizers of the same class are ``-0``, ``-1``... (Lightning
leaves the first unnumbered). Names are worked out once, when training starts; a
logging step only reads ``param_groups``.
"""

from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback

if TYPE_CHECKING:
    from trainkit.module import Module
    from trainkit.trainer import Trainer

_INTERVALS = (None, "step", "epoch")


@dataclass
class _Tracked:
    """One optimizer to log: its metric names per parameter group and when to log."""

    optimizer: torch.optim.Optimizer
    lr_names: list[str]
    momentum_names: list[str]
    weight_decay_names: list[str]
    interval: str  # "step" or "epoch"


def _momentum(group: dict[str, Any]) -> float | None:
    """The group's momentum (SGD, RMSprop) or first Adam beta; None when it has neither."""
    if "betas" in group:
        return float(group["betas"][0])
    if "momentum" in group:
        return float(group["momentum"])
    return None


class LearningRateMonitor(Callback):
    """Log learning rates (and optionally momentum) to every logger; rank 0 only.

    Args:
        logging_interval: "step" logs every ``trainer.log_every_n_steps`` steps,
            "epoch" at the start of each epoch; None follows each scheduler's own
            interval and logs optimizers without a scheduler at epoch start.
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
        self._last_logged_step = -1

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

    def on_train_start(self, trainer: Trainer, module: Module) -> None:
        """Work out the metric names once, now that optimizers and schedulers exist."""
        if not trainer.loggers:
            raise RuntimeError(
                "Cannot use `LearningRateMonitor` callback with `Trainer` that has no logger. "
                "Pass a logger, e.g. Trainer(logger=True), or remove the callback."
            )
        self._step_entries = []
        self._epoch_entries = []
        self._last_logged_step = -1
        # Other ranks keep empty lists, so their per-step hook returns at once.
        if not trainer.is_global_zero:
            return
        for entry in self._find_entries(trainer):
            interval = self.logging_interval or entry.interval
            (self._step_entries if interval == "step" else self._epoch_entries).append(entry)
            for name in entry.lr_names:
                self.lrs.setdefault(name, [])
            for name in entry.momentum_names:
                self.momentums.setdefault(name, [])

    def on_train_batch_start(
        self, trainer: Trainer, module: Module, batch: Any, batch_idx: int
    ) -> None:
        """Log step-interval learning rates every ``log_every_n_steps`` steps."""
        if not self._step_entries:
            return
        step = trainer.global_step
        # With gradient accumulation several batches share a global step: log once.
        if step % trainer.log_every_n_steps != 0 or step == self._last_logged_step:
            return
        self._last_logged_step = step
        self._log(trainer, self._step_entries)

    def on_train_epoch_start(self, trainer: Trainer, module: Module) -> None:
        """Log epoch-interval learning rates."""
        if self._epoch_entries:
            self._log(trainer, self._epoch_entries)

    # -------------------------------------------------------------- helpers
    def _log(self, trainer: Trainer, entries: list[_Tracked]) -> None:
        metrics: dict[str, float] = {}
        for entry in entries:
            for i, group in enumerate(entry.optimizer.param_groups):
                lr = float(group["lr"])
                metrics[entry.lr_names[i]] = lr
                self.lrs[entry.lr_names[i]].append(lr)
                if entry.momentum_names:
                    momentum = _momentum(group)
                    if momentum is not None:
                        metrics[entry.momentum_names[i]] = momentum
                        self.momentums[entry.momentum_names[i]].append(momentum)
                        self.last_momentum_values[entry.momentum_names[i]] = momentum
                if entry.weight_decay_names:
                    decay = float(group.get("weight_decay", 0.0))
                    metrics[entry.weight_decay_names[i]] = decay
                    self.last_weight_decay_values[entry.weight_decay_names[i]] = decay
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=trainer.global_step)

    def _find_entries(self, trainer: Trainer) -> list[_Tracked]:
        optimizers = trainer.optimizers
        class_counts = Counter(type(opt).__name__ for opt in optimizers)

        def default_name(index: int) -> str:
            class_name = type(optimizers[index]).__name__
            suffix = f"-{index}" if class_counts[class_name] > 1 else ""
            return f"lr-{class_name}{suffix}"

        bases: list[tuple[int, str, str]] = []  # (optimizer index, base name, interval)
        scheduled: set[int] = set()
        for config in trainer.lr_scheduler_configs:
            index = config.optimizer_index
            scheduled.add(index)
            bases.append((index, config.name or default_name(index), config.interval))
        for index in range(len(optimizers)):
            if index not in scheduled:
                bases.append((index, default_name(index), "epoch"))

        entries = [
            self._entry(optimizers[index], base, interval) for index, base, interval in bases
        ]
        names = [name for entry in entries for name in entry.lr_names]
        duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
        if duplicates:
            raise ValueError(
                f"LearningRateMonitor found the metric names {duplicates} more than once. "
                "Give each scheduler a distinct 'name' in configure_optimizers."
            )
        return entries

    def _entry(self, optimizer: torch.optim.Optimizer, base: str, interval: str) -> _Tracked:
        groups = optimizer.param_groups
        # A group's own "name" key, if the user set one, reads better than pg<i>.
        suffixes = [f"/{groups[0]['name']}" if "name" in groups[0] else ""]
        if len(groups) > 1:
            suffixes = [f"/{group.get('name', f'pg{i}')}" for i, group in enumerate(groups)]
        lr_names = [base + suffix for suffix in suffixes]
        momentum_names: list[str] = []
        if self.log_momentum:
            if any(_momentum(group) is None for group in groups):
                warnings.warn(
                    f"LearningRateMonitor(log_momentum=True): {type(optimizer).__name__} has "
                    f"no 'momentum' or 'betas', so {base}-momentum is not logged.",
                    stacklevel=3,
                )
            momentum_names = [f"{name}-momentum" for name in lr_names]
        decay_names = [f"{name}-weight_decay" for name in lr_names] if self.log_weight_decay else []
        return _Tracked(optimizer, lr_names, momentum_names, decay_names, interval)

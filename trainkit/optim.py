"""Reading what ``Module.configure_optimizers`` returned into optimizers and schedulers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

_FORMS = (
    "an optimizer; a list of optimizers; ([optimizers], [schedulers]); "
    '{"optimizer": opt, "lr_scheduler": scheduler or {"scheduler": s, "interval": '
    '"step"|"epoch", "frequency": n, "monitor": "val/loss"}}; or a list of such dicts'
)
_SCHEDULER_KEYS = {"scheduler", "interval", "frequency", "monitor", "strict", "name"}


@dataclass
class LRSchedulerConfig:
    """A scheduler and when to step it.

    Attributes:
        scheduler: the LR scheduler.
        interval: "step" (after every optimizer step) or "epoch" (after every epoch).
        frequency: step it every ``frequency`` intervals.
        monitor: metric passed to ``scheduler.step`` (ReduceLROnPlateau needs one).
        strict: fail when ``monitor`` is missing (else warn and skip that step).
        name: the name LearningRateMonitor logs it under.
        optimizer_index: index of the optimizer it drives.
    """

    scheduler: Any
    interval: str = "epoch"
    frequency: int = 1
    monitor: str | None = None
    strict: bool = True
    name: str | None = None
    optimizer_index: int = 0


def parse_optimizers(
    returned: Any,
) -> tuple[list[torch.optim.Optimizer], list[LRSchedulerConfig]]:
    """Turn ``configure_optimizers``'s return value into optimizers and scheduler configs.

    Args:
        returned: the value ``configure_optimizers`` returned.

    Example:
        >>> import torch
        >>> layer = torch.nn.Linear(2, 1)
        >>> opt = torch.optim.SGD(layer.parameters(), lr=0.1)
        >>> sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1)
        >>> optimizers, configs = parse_optimizers({"optimizer": opt, "lr_scheduler": sched})
        >>> len(optimizers), configs[0].interval
        (1, 'epoch')
    """
    if isinstance(returned, torch.optim.Optimizer):
        return [returned], []
    if isinstance(returned, Mapping):
        return _parse_dicts([returned])
    if (
        isinstance(returned, (list, tuple))
        and len(returned) == 2
        and all(isinstance(part, (list, tuple)) for part in returned)
    ):
        optimizers = _check_optimizers(returned[0])
        configs = [_scheduler_config(item, optimizers) for item in returned[1]]
        return optimizers, configs
    if isinstance(returned, (list, tuple)) and returned:
        if all(isinstance(item, Mapping) for item in returned):
            return _parse_dicts(returned)
        return _check_optimizers(returned), []
    raise TypeError(
        f"configure_optimizers returned {_short(returned)}, which trainkit cannot use. "
        f"Return {_FORMS}."
    )


def configured_optimizers(
    module: Any,
) -> tuple[list[torch.optim.Optimizer], list[LRSchedulerConfig]]:
    """The optimizers and schedulers ``module.configure_optimizers()`` returns, checked.

    Args:
        module: the user's Module.
    """
    optimizers, configs = parse_optimizers(module.configure_optimizers())
    if module.automatic_optimization and len(optimizers) > 1:
        raise ValueError(
            f"configure_optimizers returned {len(optimizers)} optimizers. Automatic "
            "optimization steps one; for several, set `self.automatic_optimization = "
            "False` and step them in training_step (see self.optimizers())."
        )
    return optimizers, configs


def _parse_dicts(
    items: Sequence[Mapping[str, Any]],
) -> tuple[list[torch.optim.Optimizer], list[LRSchedulerConfig]]:
    optimizers: list[torch.optim.Optimizer] = []
    configs: list[LRSchedulerConfig] = []
    for item in items:
        unknown = set(item) - {"optimizer", "lr_scheduler", "monitor"}
        if unknown or "optimizer" not in item:
            raise TypeError(
                "configure_optimizers returned a dict with keys "
                f"{sorted(item)}; it needs 'optimizer' and may have 'lr_scheduler' and "
                "'monitor'."
            )
        optimizers.extend(_check_optimizers([item["optimizer"]]))
        if item.get("lr_scheduler") is not None:
            scheduler = item["lr_scheduler"]
            if not isinstance(scheduler, Mapping) and "monitor" in item:
                scheduler = {"scheduler": scheduler, "monitor": item["monitor"]}
            configs.append(_scheduler_config(scheduler, optimizers, len(optimizers) - 1))
    return optimizers, configs


def _check_optimizers(items: Sequence[Any]) -> list[torch.optim.Optimizer]:
    for item in items:
        if not isinstance(item, torch.optim.Optimizer):
            raise TypeError(
                f"configure_optimizers returned {_short(item)} where an optimizer was "
                f"expected. Return {_FORMS}."
            )
    if not items:
        raise TypeError(f"configure_optimizers returned no optimizer. Return {_FORMS}.")
    return list(items)


def _scheduler_config(
    item: Any, optimizers: list[torch.optim.Optimizer], default_index: int | None = None
) -> LRSchedulerConfig:
    fields: dict[str, Any] = dict(item) if isinstance(item, Mapping) else {"scheduler": item}
    unknown = set(fields) - _SCHEDULER_KEYS
    if unknown:
        raise TypeError(
            f"lr_scheduler dict has unknown keys {sorted(unknown)}; allowed keys are "
            f"{sorted(_SCHEDULER_KEYS)}."
        )
    scheduler = fields.get("scheduler")
    optimizer = getattr(scheduler, "optimizer", None)
    if scheduler is None or not hasattr(scheduler, "step") or optimizer is None:
        raise TypeError(
            f"lr_scheduler must be a torch LR scheduler (or a dict with one under "
            f"'scheduler'), got {_short(scheduler)}."
        )
    config = LRSchedulerConfig(**fields)
    if config.interval not in ("step", "epoch"):
        raise ValueError(
            f'lr_scheduler interval must be "step" or "epoch", got {config.interval!r}.'
        )
    if (
        isinstance(config.frequency, bool)
        or not isinstance(config.frequency, int)
        or (config.frequency < 1)
    ):
        raise ValueError(
            f"lr_scheduler frequency must be a positive integer, got {config.frequency!r}."
        )
    plateau = isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)
    if plateau and config.monitor is None:
        raise ValueError(
            "ReduceLROnPlateau needs a metric: return {'optimizer': opt, 'lr_scheduler': "
            "{'scheduler': sched, 'monitor': 'val/loss'}} naming a logged metric."
        )
    matches = [i for i, opt in enumerate(optimizers) if opt is optimizer]
    if not matches:
        raise ValueError(
            "an lr_scheduler drives an optimizer that configure_optimizers did not return; "
            "return that optimizer too."
        )
    config.optimizer_index = default_index if default_index is not None else matches[0]
    return config


def _short(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:80]}" if value is not None else "None"


def step_scheduler(
    config: LRSchedulerConfig,
    metrics: Mapping[str, Any],
    warn: Callable[[str], None],
    stepper: Callable[[Any, Any], None] | None = None,
) -> None:
    """Step one LR scheduler, passing it its monitored metric if it has one.

    Args:
        config: the scheduler and its settings.
        metrics: the callback metrics (where a monitored value is read).
        warn: prints a warning (rank 0), for a missing metric with ``strict=False``.
        stepper: the Module's ``lr_scheduler_step(scheduler, metric)`` when it
            overrides it (for schedulers without torch's ``step`` signature).
    """
    if config.monitor is None:
        if stepper is not None:
            stepper(config.scheduler, None)
        else:
            config.scheduler.step()
        return
    if config.monitor not in metrics:
        message = (
            f"LR scheduler {type(config.scheduler).__name__} monitors {config.monitor!r}, "
            f"which was not logged; logged metrics are {sorted(metrics)}. Log it with "
            "self.log, or fix the name in configure_optimizers."
        )
        if config.strict:
            raise RuntimeError(message)
        warn(message + " (strict=False: skipping this scheduler step.)")
        return
    value = float(metrics[config.monitor])
    if stepper is not None:
        stepper(config.scheduler, value)
    else:
        config.scheduler.step(value)


class ManagedOptimizer:
    """An optimizer for manual optimization whose ``step()`` runs the Trainer's step.

    ``Module.optimizers()`` returns these, so that ``opt.step()`` in a manual
    ``training_step`` unscales float16 gradients, runs ``on_before_optimizer_step``,
    clips, and lets the gradient scaler take the step, exactly as automatic
    optimization does (see ``trainkit.step``).

    Args:
        optimizer: the optimizer returned by ``configure_optimizers``.
        step: the run's ``step_optimizer(optimizer, closure)``.
        zero_grad: the run's ``zero_grad(optimizer, set_to_none)``.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        step: Callable[[torch.optim.Optimizer, Callable[[], Any] | None], None],
        zero_grad: Callable[[torch.optim.Optimizer, bool], None],
    ) -> None:
        self.optimizer = optimizer
        self._step = step
        self._zero_grad = zero_grad

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """The wrapped optimizer's parameter groups."""
        return self.optimizer.param_groups

    @property
    def state(self) -> Any:
        """The wrapped optimizer's per-parameter state."""
        return self.optimizer.state

    def step(self, closure: Callable[[], Any] | None = None) -> None:
        """Step through the Trainer's step (unscale, hooks, clipping, scaler).

        Args:
            closure: for optimizers that need one (not with a float16 scaler).
        """
        self._step(self.optimizer, closure)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Run ``on_before_zero_grad`` hooks, then clear the gradients.

        Args:
            set_to_none: free the gradient tensors instead of zeroing them.
        """
        self._zero_grad(self.optimizer, set_to_none)

    def state_dict(self) -> dict[str, Any]:
        """The wrapped optimizer's state dict."""
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load into the wrapped optimizer.

        Args:
            state_dict: an optimizer state dict.
        """
        self.optimizer.load_state_dict(state_dict)

"""Reading what ``Module.configure_optimizers`` returned into optimizers and schedulers."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, cast

import torch

from trainkit.core.steps import defined_step

_FORMS = (
    "an optimizer; a list of optimizers; ([optimizers], [schedulers] or one scheduler); "
    '{"optimizer": opt, "lr_scheduler": scheduler or {"scheduler": s, "interval": '
    '"step"|"epoch", "frequency": n, "monitor": "val/loss"}}; or a list of such dicts'
)
_SCHEDULER_KEYS = {
    "scheduler",
    "name",
    "interval",
    "frequency",
    "reduce_on_plateau",
    "monitor",
    "strict",
}


@dataclass
class LRSchedulerConfig:
    """A scheduler and when to step it (Lightning's ``LRSchedulerConfig`` fields, in its order).

    Attributes:
        scheduler: the LR scheduler.
        name: the name LearningRateMonitor logs it under.
        interval: "step" (after every optimizer step) or "epoch" (after every epoch).
        frequency: step it every ``frequency`` intervals.
        reduce_on_plateau: step it with the ``monitor`` metric's value
            (``scheduler.step(value)``); true for ``ReduceLROnPlateau`` unless
            the lr_scheduler dict says otherwise.
        monitor: the logged metric a ``reduce_on_plateau`` scheduler steps on.
        strict: fail when ``monitor`` is missing (else warn and skip that step).
        optimizer_index: index of the optimizer it drives (trainkit's; Lightning
            2.x has no such field).
    """

    scheduler: Any
    name: str | None = None
    interval: str = "epoch"
    frequency: int = 1
    reduce_on_plateau: bool = False
    monitor: str | None = None
    strict: bool = True
    optimizer_index: int = 0


class NoOptimizer(torch.optim.Optimizer):
    """The optimizer of a fit whose ``configure_optimizers`` returned None: it changes nothing.

    Like Lightning's, it has no parameter groups (a learning-rate monitor finds
    nothing to log); ``step`` runs the closure, if any, and returns its loss.
    """

    def __init__(self) -> None:
        super().__init__([torch.zeros(1)], {})  # torch needs a parameter to start from

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Keep no group: there is nothing to optimize."""

    def step(self, closure: Any = None) -> Any:
        """Run ``closure`` (if given) and return its result; no parameter changes."""
        return closure() if closure is not None else None


def parse_optimizers(
    returned: Any, automatic: bool = True
) -> tuple[list[torch.optim.Optimizer], list[LRSchedulerConfig]]:
    """Turn ``configure_optimizers``'s return value into optimizers and scheduler configs.

    Args:
        returned: the value ``configure_optimizers`` returned.
        automatic: automatic optimization, where the Trainer steps the schedulers, so
            each must step as torch's do and a plateau one needs a ``monitor``; with
            manual optimization the user steps them (as in Lightning, not checked).

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
        return _parse_dicts([returned], automatic)
    if (
        isinstance(returned, (list, tuple))
        and len(returned) == 2
        and isinstance(returned[0], (list, tuple))
        and (isinstance(returned[1], (list, tuple, Mapping)) or hasattr(returned[1], "step"))
    ):
        # ([optimizers], [schedulers]); as in Lightning, one scheduler (or its dict) may
        # stand alone in the second place.
        optimizers = _check_optimizers(returned[0])
        schedulers = returned[1] if isinstance(returned[1], (list, tuple)) else [returned[1]]
        configs = [_scheduler_config(item, optimizers, automatic) for item in schedulers]
        return optimizers, configs
    if isinstance(returned, (list, tuple)) and returned:
        if all(isinstance(item, Mapping) for item in returned):
            return _parse_dicts(returned, automatic)
        return _check_optimizers(returned), []
    if returned is None:
        # Lightning's documented meaning: the fit runs, and nothing updates the weights.
        warnings.warn(
            "`LightningModule.configure_optimizers` returned `None`, this fit will run with no "
            "optimizer: the steps run forward and backward and leave the weights as they are. "
            f"Return {_FORMS} to train.",
            UserWarning,
            stacklevel=2,
        )
        return [NoOptimizer()], []
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
    automatic = module.automatic_optimization
    configure = defined_step(module, "configure_optimizers", "fit")  # not set to None
    optimizers, configs = parse_optimizers(configure(), automatic)
    if automatic and len(optimizers) > 1:
        raise SeveralOptimizersError(  # Lightning's words first
            "Training with multiple optimizers is only supported with manual optimization. "
            "Set `self.automatic_optimization = False`, then access your optimizers in "
            f"`training_step` with `opt1, opt2, ... = self.optimizers()` (configure_optimizers "
            f"returned {len(optimizers)} optimizers; automatic optimization steps one)."
        )
    return optimizers, configs


class SeveralOptimizersError(ValueError, RuntimeError):
    """Several optimizers under automatic optimization (a ``RuntimeError`` as Lightning's)."""


def _parse_dicts(
    items: Sequence[Mapping[str, Any]], automatic: bool
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
            index = len(optimizers) - 1
            configs.append(_scheduler_config(scheduler, optimizers, automatic, index))
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
    item: Any,
    optimizers: list[torch.optim.Optimizer],
    automatic: bool,
    default_index: int | None = None,
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
    if scheduler is None or (automatic and (not hasattr(scheduler, "step") or optimizer is None)):
        raise TypeError(
            f"lr_scheduler must be a torch LR scheduler (or a dict with one under "
            f"'scheduler'), got {_short(scheduler)}."
        )
    fields.setdefault(
        "reduce_on_plateau", isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)
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
    if automatic and config.reduce_on_plateau and config.monitor is None:
        # Lightning's wording first (it names the dict when the scheduler came in one).
        where = "The lr scheduler dict" if isinstance(item, Mapping) else "`configure_optimizers`"
        raise ValueError(
            f"{where} must include a monitor when a `ReduceLROnPlateau` scheduler is used "
            f"({type(scheduler).__name__} steps on a metric): return {{'optimizer': opt, "
            "'lr_scheduler': {'scheduler': sched, 'monitor': 'val/loss'}} naming a logged "
            "metric."
        )
    matches = [i for i, opt in enumerate(optimizers) if opt is optimizer]
    if not matches and not automatic:
        matches = [0]  # the user steps it: which optimizer it drives is theirs to know
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
    agree: Callable[[str, float | None], float | None] | None = None,
) -> None:
    """Step one LR scheduler; a ``reduce_on_plateau`` one gets its monitored metric.

    A ``monitor`` on any other scheduler is not read (as in Lightning): it is
    stepped with ``scheduler.step()``.

    Args:
        config: the scheduler and its settings.
        metrics: the callback metrics (where a monitored value is read).
        warn: prints a warning (rank 0), for a missing metric with ``strict=False``.
        stepper: the Module's ``lr_scheduler_step(scheduler, metric)`` when it
            overrides it (for schedulers without torch's ``step`` signature).
        agree: ``(name, this process's value) -> the value to use`` in a
            multi-process run (rank 0's: every process's learning rate stays equal).
    """
    if not config.reduce_on_plateau or config.monitor is None:
        if stepper is not None:
            stepper(config.scheduler, None)
        else:
            config.scheduler.step()
        return
    found = metrics.get(config.monitor)
    value = None if found is None else float(found)
    if agree is not None:
        value = agree(config.monitor, value)
    if value is None:
        message = (
            f"LR scheduler {type(config.scheduler).__name__} monitors {config.monitor!r}, "
            f"which was not logged; logged metrics are {sorted(metrics)}. Log it with "
            "self.log, or fix the name in configure_optimizers."
        )
        if config.strict:
            raise RuntimeError(message)
        warn(message + " (strict=False: skipping this scheduler step.)")
        return
    if stepper is not None:
        stepper(config.scheduler, value)
    else:
        config.scheduler.step(value)


class ManagedOptimizer(torch.optim.Optimizer):
    """The optimizer ``Module.optimizers()`` returns: ``step()`` runs the Trainer's step.

    In a manual ``training_step``, ``opt.step()`` unscales float16 gradients, runs
    ``on_before_optimizer_step``, clips, and lets the gradient scaler take the
    step, exactly as automatic optimization does (see ``trainkit.loops.step``); each
    call inside ``training_step`` counts one step of ``trainer.global_step``.
    Around every step it calls ``_on_before_step()`` and ``_on_after_step()``
    (Lightning's names): the Trainer sets the latter to count the step while a
    manual ``training_step`` runs; code that swaps them for no-ops while it
    steps an optimizer of its own keeps that step out of ``global_step``.

    Constructing one returns an instance of a subclass of both this class and
    the wrapped optimizer's class (made once per optimizer class), so
    ``isinstance(opt, torch.optim.SGD)`` holds for a wrapped SGD, as it does for
    Lightning's ``LightningOptimizer`` (trainkit.lightning exports this class
    under that name). ``param_groups``, ``state``, ``defaults``, ``state_dict()``
    and the hook registrations reach the wrapped optimizer; ``opt.optimizer``
    is the wrapped optimizer itself.

    Args:
        optimizer: the optimizer returned by ``configure_optimizers``.
        step: the run's ``step_optimizer(optimizer, closure, **kwargs)``; without
            one (outside a Trainer), ``step()`` steps the optimizer directly.
        zero_grad: the run's ``zero_grad(optimizer, set_to_none)``; without one,
            the optimizer's own ``zero_grad``.
        toggle: the run's ``toggle_model(optimizer, sync_grad)`` context, for
            :meth:`toggle_model`.

    Example:
        >>> import torch
        >>> sgd = torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1)
        >>> opt = ManagedOptimizer(sgd)
        >>> isinstance(opt, torch.optim.SGD), opt.optimizer is sgd
        (True, True)
        >>> opt.param_groups is sgd.param_groups
        True
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> ManagedOptimizer:
        """An instance of the subclass of this class and the wrapped optimizer's class."""
        if cls is ManagedOptimizer and args:
            cls = _managed_class(type(_unwrapped(args[0])))
        return object.__new__(cls)

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        step: Callable[..., Any] | None = None,
        zero_grad: Callable[[torch.optim.Optimizer, bool], None] | None = None,
        toggle: Callable[[torch.optim.Optimizer, bool], AbstractContextManager[None]] | None = None,
    ) -> None:
        # The wrapped optimizer's own __init__ is not run: this object holds no
        # state of its own, it reaches the wrapped optimizer's.
        self._optimizer = _unwrapped(optimizer)
        self._run_step = step
        self._run_zero_grad = zero_grad
        self._toggle = toggle
        self._on_before_step: Callable[[], None] = do_nothing
        self._on_after_step: Callable[[], None] = do_nothing

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The wrapped torch optimizer."""
        return self._optimizer

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """The wrapped optimizer's parameter groups."""
        return self._optimizer.param_groups

    @param_groups.setter
    def param_groups(self, value: list[dict[str, Any]]) -> None:
        self._optimizer.param_groups = value

    @property
    def state(self) -> Any:
        """The wrapped optimizer's per-parameter state."""
        return self._optimizer.state

    @state.setter
    def state(self, value: Any) -> None:
        self._optimizer.state = value

    @property
    def defaults(self) -> dict[str, Any]:
        """The wrapped optimizer's default hyperparameters."""
        return self._optimizer.defaults

    @defaults.setter
    def defaults(self, value: dict[str, Any]) -> None:
        self._optimizer.defaults = value

    def step(self, closure: Callable[[], Any] | None = None, **kwargs: Any) -> Any:
        """Step through the Trainer's step (unscale, hooks, clipping, scaler).

        Args:
            closure: for optimizers that need one (not with a float16 scaler).
            **kwargs: passed to the wrapped optimizer's ``step``.

        Returns:
            What the wrapped optimizer's ``step`` returned (the closure's
            result, for optimizers that take one); None for a skipped step.
        """
        self._on_before_step()
        if self._run_step is None:
            if closure is None:
                result = self._optimizer.step(**kwargs)
            else:
                result = self._optimizer.step(closure, **kwargs)
        else:
            result = self._run_step(self._optimizer, closure, **kwargs)
        self._on_after_step()
        return result

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Run ``on_before_zero_grad`` hooks, then clear the gradients.

        Args:
            set_to_none: free the gradient tensors instead of zeroing them.
        """
        if self._run_zero_grad is None:
            self._optimizer.zero_grad(set_to_none=set_to_none)
        else:
            self._run_zero_grad(self._optimizer, set_to_none)

    @contextmanager
    def toggle_model(self, sync_grad: bool = True) -> Iterator[None]:
        """Train only this optimizer's parameters inside the ``with`` block.

        Parameters that only other optimizers update get ``requires_grad=False``
        (``Module.toggle_optimizer``) until the block ends; with
        ``sync_grad=False`` the backward passes inside skip the gradient
        synchronisation between processes (for micro-batches you accumulate).

        Args:
            sync_grad: synchronise gradients between processes in the block.

        Raises:
            RuntimeError: outside a running ``Trainer.fit``.
        """
        if self._toggle is None:
            raise RuntimeError(
                "toggle_model() works on the optimizers self.optimizers() returns while "
                "Trainer.fit runs; outside fit, use module.toggle_optimizer(opt) and "
                "module.untoggle_optimizer(opt)."
            )
        with self._toggle(self._optimizer, sync_grad):
            yield

    def state_dict(self) -> dict[str, Any]:
        """The wrapped optimizer's state dict."""
        return self._optimizer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load into the wrapped optimizer.

        Args:
            state_dict: an optimizer state dict.
        """
        self._optimizer.load_state_dict(state_dict)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a parameter group to the wrapped optimizer.

        Args:
            param_group: the group's parameters ("params") and options.
        """
        self._optimizer.add_param_group(param_group)

    # Hooks go on the wrapped optimizer: they run when it steps or saves.
    def register_step_pre_hook(self, hook: Any) -> Any:
        """Register ``hook`` on the wrapped optimizer (see torch's Optimizer).

        Args:
            hook: called before each step of the wrapped optimizer.
        """
        return self._optimizer.register_step_pre_hook(hook)

    def register_step_post_hook(self, hook: Any) -> Any:
        """Register ``hook`` on the wrapped optimizer (see torch's Optimizer).

        Args:
            hook: called after each step of the wrapped optimizer.
        """
        return self._optimizer.register_step_post_hook(hook)

    def register_state_dict_pre_hook(self, hook: Any, prepend: bool = False) -> Any:
        """Register ``hook`` on the wrapped optimizer (see torch's Optimizer).

        Args:
            hook: called before the wrapped optimizer's ``state_dict``.
            prepend: run it before the hooks already registered.
        """
        return self._optimizer.register_state_dict_pre_hook(hook, prepend)

    def register_state_dict_post_hook(self, hook: Any, prepend: bool = False) -> Any:
        """Register ``hook`` on the wrapped optimizer (see torch's Optimizer).

        Args:
            hook: called after the wrapped optimizer's ``state_dict``.
            prepend: run it before the hooks already registered.
        """
        return self._optimizer.register_state_dict_post_hook(hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Any, prepend: bool = False) -> Any:
        """Register ``hook`` on the wrapped optimizer (see torch's Optimizer).

        Args:
            hook: called before the wrapped optimizer's ``load_state_dict``.
            prepend: run it before the hooks already registered.
        """
        return self._optimizer.register_load_state_dict_pre_hook(hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Any, prepend: bool = False) -> Any:
        """Register ``hook`` on the wrapped optimizer (see torch's Optimizer).

        Args:
            hook: called after the wrapped optimizer's ``load_state_dict``.
            prepend: run it before the hooks already registered.
        """
        return self._optimizer.register_load_state_dict_post_hook(hook, prepend)

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuilt through the constructor (the per-class subclass is made, not looked up)."""
        return (
            ManagedOptimizer,
            (self._optimizer, self._run_step, self._run_zero_grad, self._toggle),
        )

    def __repr__(self) -> str:
        """The wrapped optimizer's repr, under this class's name."""
        return f"{type(self).__name__}({self._optimizer!r})"


def do_nothing() -> None:
    """What a :class:`ManagedOptimizer` calls around its step when nothing is to be counted."""


def clip_value(configured: float | None, given: float | None) -> float | None:
    """The clipping threshold ``clip_gradients`` uses: the one given, else the Trainer's.

    Args:
        configured: the Trainer's ``gradient_clip_val``.
        given: the one passed to ``clip_gradients`` (None: the Trainer's).

    Raises:
        ValueError: both are set and differ (as Lightning refuses it: which one
            should hold is unclear).
    """
    if given is None:
        return configured
    if configured is not None and configured != given:
        raise ValueError(
            f"You have set `Trainer(gradient_clip_val={configured!r})` and have passed "
            f"`clip_gradients(gradient_clip_val={given!r})`: use only one of them (in "
            "configure_gradient_clipping, pass on the gradient_clip_val it receives, or "
            "leave the Trainer's unset)."
        )
    return given


def clip_optimizer_gradients(optimizer: Any, clip_val: float, algorithm: str) -> None:
    """Clip the gradients of ``optimizer``'s parameters to ``clip_val``.

    Args:
        optimizer: a torch optimizer, or a wrapper of one (its ``optimizer``).
        clip_val: the largest total norm ("norm") or absolute value ("value").
        algorithm: "norm" or "value".

    Raises:
        ValueError: another algorithm.
    """
    inner = getattr(optimizer, "optimizer", optimizer)
    params = [p for group in inner.param_groups for p in group["params"]]
    if algorithm == "norm":
        torch.nn.utils.clip_grad_norm_(params, clip_val)
    elif algorithm == "value":
        torch.nn.utils.clip_grad_value_(params, clip_val)
    else:
        raise ValueError(f"gradient_clip_algorithm={algorithm!r} must be 'norm' or 'value'.")


def _unwrapped(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    # Wrapping a wrapper wraps the optimizer inside it.
    return optimizer.optimizer if isinstance(optimizer, ManagedOptimizer) else optimizer


_MANAGED_CLASSES: dict[type, type[ManagedOptimizer]] = {}


def _managed_class(optimizer_class: type) -> type[ManagedOptimizer]:
    # One subclass per optimizer class. ManagedOptimizer comes first, so that its
    # step/zero_grad/properties win over the optimizer class's.
    made = _MANAGED_CLASSES.get(optimizer_class)
    if made is None:
        name = f"Managed{optimizer_class.__name__}"
        made = cast(
            "type[ManagedOptimizer]",
            type(name, (ManagedOptimizer, optimizer_class), {"__module__": __name__}),
        )
        _MANAGED_CLASSES[optimizer_class] = made
    return made


def needs_closure(optimizer: Any) -> bool:
    """Whether ``optimizer.step()`` needs a closure (LBFGS's evaluates the loss again).

    Args:
        optimizer: a torch optimizer, or a wrapper of one (``.optimizer``).

    Example:
        >>> params = [torch.nn.Parameter(torch.zeros(1))]
        >>> needs_closure(torch.optim.LBFGS(params)), needs_closure(torch.optim.SGD(params, lr=1))
        (True, False)
    """
    if not hasattr(optimizer, "param_groups"):
        optimizer = getattr(optimizer, "optimizer", optimizer)
    kind = type(optimizer)
    needed = _NEEDS_CLOSURE.get(kind)
    if needed is None:  # read once per class (a Module's optimizer_step asks every step)
        try:
            closure = inspect.signature(kind.step).parameters.get("closure")
        except (TypeError, ValueError):  # a step without a readable signature
            closure = None
        needed = closure is not None and closure.default is inspect.Parameter.empty
        _NEEDS_CLOSURE[kind] = needed
    return needed


_NEEDS_CLOSURE: dict[type, bool] = {}

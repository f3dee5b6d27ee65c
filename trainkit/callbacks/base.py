"""The Callback base class: do-nothing hooks a user overrides.

Hooks take ``(trainer, module, ...)`` in the same order as Lightning's, so porting
a Lightning callback is changing its base class; trainkit's hooks also take the
Module by Lightning's keyword, ``pl_module=``. The loop calls the Module's own hook
first, then each callback's, in the order of ``Trainer(callbacks=[...])``.

Mixed precision, gradient clipping, gradient accumulation and the non-finite
loss check also shape the training step. They do it through the step's typed
slots (``trainkit.callbacks.slots``), filled once in :meth:`Callback.configure_step`;
the step then runs them in its fixed order (see ``trainkit/loops/step.py``).

The loop looks up which callbacks override which per-batch hook once, before the
first batch, so an unused hook costs nothing per step.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import torch

if TYPE_CHECKING:
    from trainkit.callbacks.slots import StepSlots
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer


class Callback:
    """Base class for callbacks. Every hook does nothing by default.

    Example:
        >>> import trainkit
        >>> class PrintEpochs(trainkit.Callback):
        ...     def on_train_epoch_end(self, trainer, module):
        ...         print("finished epoch", trainer.current_epoch)
        >>> callback = PrintEpochs()
    """

    #: True for a callback that acts on what the Module logs at an epoch's end
    #: (checkpointing, early stopping): its ``on_*_epoch_end`` hooks then run after
    #: the Module's, as Lightning runs ModelCheckpoint's and EarlyStopping's.
    monitors_epoch_end: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__module__.startswith("trainkit."):  # the user's own hooks keep their names
            _take_pl_module(cls)

    @property
    def state_key(self) -> str:
        """Key under which this callback's ``state_dict`` is stored in a checkpoint.

        Two callbacks of the same class need distinct keys; subclasses that can
        appear twice (say, two checkpoint callbacks) include their arguments.
        """
        return type(self).__qualname__

    def _generate_state_key(self, **kwargs: Any) -> str:
        """A ``state_key`` from the class name and the arguments that tell instances apart.

        Args:
            kwargs: the distinguishing arguments, e.g. ``monitor="val/loss"``.

        Returns:
            For example ``"MyCallback{'monitor': 'val/loss'}"``.

        Example:
            >>> class Counter(Callback):
            ...     def __init__(self, what: str) -> None:
            ...         self.what = what
            ...     @property
            ...     def state_key(self) -> str:
            ...         return self._generate_state_key(what=self.what)
            >>> Counter("batches").state_key
            "Counter{'what': 'batches'}"
        """
        return f"{type(self).__qualname__}{kwargs!r}"

    def uses_hook(self, name: str) -> bool:
        """Whether this instance needs hook ``name`` called (True by default).

        The loop calls a hook only for callbacks whose class overrides it; a
        callback whose instances need a hook only in some configurations returns
        False here for the others, and costs nothing per step for it.

        Args:
            name: the hook's name, e.g. "on_train_batch_end".
        """
        return True

    def configure_step(self, slots: StepSlots) -> None:
        """Declare what this callback contributes to the training step. Nothing by default.

        Called once, when the Trainer is built. A callback that shapes the step
        fills one slot (``slots.set_precision(self)``, ...); see
        ``trainkit.callbacks.slots`` for the slots and what each must provide.

        Args:
            slots: the step's slots.
        """

    def state_dict(self) -> dict[str, Any]:
        """State to save in checkpoints (counters, best scores). Empty by default."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the state returned by :meth:`state_dict`.

        Args:
            state_dict: what :meth:`state_dict` returned when the checkpoint was saved.
        """

    # --------------------------------------------------------------- logging
    #: The Module that :meth:`log` forwards to: the one of the current run.
    _logging_module: Module | None = None

    def log(self, name: str, value: Any, *args: Any, **kwargs: Any) -> None:
        """Log a value from inside a hook, exactly as the Module's ``self.log`` would.

        Forwards to the running Module's ``log`` (as Lightning's callbacks do), so
        the value reaches ``trainer.callback_metrics``, the loggers and the
        progress bar with that hook's defaults for ``on_step``/``on_epoch``.

        Args:
            name: the metric's name.
            value: the value (a number, a one-element tensor, a torchmetrics ``Metric``).
            *args: the rest of ``Module.log``'s arguments, in its order.
            **kwargs: ``Module.log``'s keyword arguments (``prog_bar``, ``on_step``, ...).

        Raises:
            RuntimeError: when no run is active (outside a hook).
        """
        self._running_module("log").log(name, value, *args, **kwargs)

    def log_dict(self, dictionary: Any, *args: Any, **kwargs: Any) -> None:
        """Log several values from inside a hook, as the Module's ``self.log_dict`` would.

        Args:
            dictionary: metric name to value (or a torchmetrics ``MetricCollection``).
            *args: the rest of ``Module.log_dict``'s arguments, in its order.
            **kwargs: ``Module.log_dict``'s keyword arguments.

        Raises:
            RuntimeError: when no run is active (outside a hook).
        """
        self._running_module("log_dict").log_dict(dictionary, *args, **kwargs)

    def _running_module(self, method: str) -> Module:
        module = self._logging_module
        if module is None:
            raise RuntimeError(
                f"{type(self).__name__}.{method}() was called outside a run: a callback "
                "logs through the Module of the run it is part of. Call it from a hook "
                "(on_train_epoch_end, on_validation_end, ...) while fit, validate, test "
                "or predict runs."
            )
        return module

    # ----------------------------------------------------------------- setup
    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Called when fit/validate/test/predict begins, before the module is wrapped.

        Args:
            trainer: the running Trainer.
            module: the user's Module.
            stage: one of "fit", "validate", "test", "predict".
        """
        # :meth:`log` forwards to this run's Module (see also ``attach_module``).
        self._logging_module = module

    def teardown(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Called when fit/validate/test/predict ends, also after an error.

        Args:
            trainer: the running Trainer.
            module: the user's Module.
            stage: one of "fit", "validate", "test", "predict".
        """

    def on_exception(self, trainer: Trainer, module: Module, exception: BaseException) -> None:
        """Called when the run raises, before the exception propagates.

        Args:
            trainer: the running Trainer.
            module: the user's Module.
            exception: the exception raised.
        """

    # ------------------------------------------------------------------- fit
    def on_fit_start(self, trainer: Trainer, module: Module) -> None:
        """Called once at the beginning of ``fit``, after optimizers are set up."""

    def on_fit_end(self, trainer: Trainer, module: Module) -> None:
        """Called once at the end of ``fit``."""

    def on_sanity_check_start(self, trainer: Trainer, module: Module) -> None:
        """Called before the sanity-check validation batches."""

    def on_sanity_check_end(self, trainer: Trainer, module: Module) -> None:
        """Called after the sanity-check validation batches."""

    def on_train_start(self, trainer: Trainer, module: Module) -> None:
        """Called when the training loop begins."""

    def on_train_end(self, trainer: Trainer, module: Module) -> None:
        """Called when the training loop ends."""

    def on_train_epoch_start(self, trainer: Trainer, module: Module) -> None:
        """Called at the beginning of each training epoch."""

    def on_train_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Called at the end of each training epoch, after that epoch's validation."""

    def on_train_batch_start(
        self, trainer: Trainer, module: Module, batch: Any, batch_idx: int
    ) -> None:
        """Called before ``training_step``.

        Args:
            trainer: the running Trainer.
            module: the user's Module.
            batch: the batch, already on the module's device.
            batch_idx: index of the batch within the epoch.
        """

    def on_train_batch_end(
        self, trainer: Trainer, module: Module, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Called after the optimizer step (or the skipped step) of a batch.

        Args:
            trainer: the running Trainer.
            module: the user's Module.
            outputs: what ``training_step`` returned, as a dict (``{}`` for a skipped
                batch): its "loss" detached, divided by the accumulation window as
                backward took it, as in Lightning.
            batch: the batch.
            batch_idx: index of the batch within the epoch.
        """

    def on_before_backward(self, trainer: Trainer, module: Module, loss: torch.Tensor) -> None:
        """Called before ``loss.backward()`` with the loss as returned by the step."""

    def on_after_backward(self, trainer: Trainer, module: Module) -> None:
        """Called after ``backward``, before any optimizer step."""

    def on_before_optimizer_step(
        self, trainer: Trainer, module: Module, optimizer: torch.optim.Optimizer
    ) -> None:
        """Called before ``optimizer.step()``, with gradients unscaled.

        Args:
            trainer: the running Trainer.
            module: the user's Module.
            optimizer: the optimizer about to step.
        """

    def on_before_zero_grad(
        self, trainer: Trainer, module: Module, optimizer: torch.optim.Optimizer
    ) -> None:
        """Called after the optimizer step, before gradients are cleared."""

    # ---------------------------------------------------------- evaluation
    def on_validation_start(self, trainer: Trainer, module: Module) -> None:
        """Called when a validation run begins (in fit, validate, or the sanity check)."""

    def on_validation_end(self, trainer: Trainer, module: Module) -> None:
        """Called when a validation run ends; epoch metrics are in ``callback_metrics``."""

    def on_validation_epoch_start(self, trainer: Trainer, module: Module) -> None:
        """Called before the first validation batch."""

    def on_validation_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Called after the last validation batch, before metrics are reduced."""

    def on_validation_batch_start(
        self, trainer: Trainer, module: Module, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        """Called before ``validation_step``."""

    def on_validation_batch_end(
        self,
        trainer: Trainer,
        module: Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        """Called after ``validation_step``."""

    def on_test_start(self, trainer: Trainer, module: Module) -> None:
        """Called when a test run begins."""

    def on_test_end(self, trainer: Trainer, module: Module) -> None:
        """Called when a test run ends."""

    def on_test_epoch_start(self, trainer: Trainer, module: Module) -> None:
        """Called before the first test batch."""

    def on_test_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Called after the last test batch, before metrics are reduced."""

    def on_test_batch_start(
        self, trainer: Trainer, module: Module, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        """Called before ``test_step``."""

    def on_test_batch_end(
        self,
        trainer: Trainer,
        module: Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        """Called after ``test_step``."""

    def on_predict_start(self, trainer: Trainer, module: Module) -> None:
        """Called when a predict run begins."""

    def on_predict_end(self, trainer: Trainer, module: Module) -> None:
        """Called when a predict run ends."""

    def on_predict_epoch_start(self, trainer: Trainer, module: Module) -> None:
        """Called before the first predict batch."""

    def on_predict_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Called after the last predict batch."""

    def on_predict_batch_start(
        self, trainer: Trainer, module: Module, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        """Called before ``predict_step``."""

    def on_predict_batch_end(
        self,
        trainer: Trainer,
        module: Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        """Called after ``predict_step``."""

    # ---------------------------------------------------------- checkpoints
    def on_resume_point(self, trainer: Trainer, module: Module) -> None:
        """Called wherever training can be resumed exactly; save checkpoints here.

        A resume point follows each training batch that does not end its epoch
        (after that batch's validation, if one was due) and each epoch's end
        (after its hooks, metrics and epoch-interval LR schedulers). A checkpoint
        saved here continues, when resumed, exactly as the run would have.
        """

    def on_save_checkpoint(
        self, trainer: Trainer, module: Module, checkpoint: dict[str, Any]
    ) -> None:
        """Called when a checkpoint is assembled; may add entries to ``checkpoint``."""

    def on_load_checkpoint(
        self, trainer: Trainer, module: Module, checkpoint: dict[str, Any]
    ) -> None:
        """Called when a checkpoint is restored, with the full checkpoint dict."""


def _hook_taking_pl_module(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def hook(self: Any, *args: Any, **kwargs: Any) -> Any:
        if "pl_module" in kwargs:
            kwargs["module"] = kwargs.pop("pl_module")
        return function(self, *args, **kwargs)

    hook.__trainkit_hook__ = function  # type: ignore[attr-defined]
    return hook


def _take_pl_module(cls: type) -> None:
    """Let the hooks ``cls`` defines be called with Lightning's keyword ``pl_module=``.

    trainkit names the Module parameter ``module``; Lightning code calls hooks by
    keyword too (``super().on_validation_end(trainer=trainer, pl_module=pl_module)``,
    a callback forwarding to an inner ``ModelCheckpoint``). The loop calls the hook's
    own function (:func:`hook_method`), so the keyword mapping costs it nothing.
    """
    for name, value in list(vars(cls).items()):
        code = getattr(value, "__code__", None)
        if (
            name in _MODULE_HOOKS
            and code is not None
            and code.co_varnames[1 : min(3, code.co_argcount)] == ("trainer", "module")
        ):
            setattr(cls, name, _hook_taking_pl_module(value))


def hook_method(callback: object, name: str) -> Callable[..., Any]:
    """``callback``'s hook ``name``, bound, as the loop calls it (positionally).

    Args:
        callback: a callback.
        name: the hook's name.
    """
    method = getattr(callback, name)
    direct = getattr(getattr(method, "__func__", None), "__trainkit_hook__", None)
    return method if direct is None else types.MethodType(direct, callback)


#: The hooks taking ``(trainer, module, ...)``.
_MODULE_HOOKS = frozenset(
    name
    for name, value in vars(Callback).items()
    if getattr(value, "__code__", None) is not None
    and value.__code__.co_varnames[1:3] == ("trainer", "module")
)
_take_pl_module(Callback)


class Checkpoint(Callback):
    """The base class of checkpointing callbacks (Lightning's ``Checkpoint``).

    :class:`~trainkit.callbacks.ModelCheckpoint` and
    :class:`~trainkit.callbacks.OnExceptionCheckpoint` derive from it, so
    ``isinstance(callback, Checkpoint)`` finds every checkpointing callback.
    Subclass it for a checkpointing callback of your own: like those, its
    ``on_*_epoch_end`` hooks then run after the Module's (it sees what the
    Module logged there), and a callback returned by
    ``Module.configure_callbacks()`` is placed after the others. It adds no
    hook of its own; save from :meth:`Callback.on_resume_point`, where a
    checkpoint resumes exactly.

    Example:
        >>> class SaveAtEnd(Checkpoint):
        ...     def on_train_end(self, trainer, module):
        ...         trainer.save_checkpoint("final.ckpt")
        >>> isinstance(SaveAtEnd(), Checkpoint), SaveAtEnd.monitors_epoch_end
        (True, True)
    """

    monitors_epoch_end = True


def attach_module(callbacks: list[Callback], module: Module | None) -> None:
    """Point each callback's :meth:`Callback.log` at the Module of the run starting now.

    The Trainer calls this when a run begins, before any hook (and with None
    when it ends), so ``self.log`` inside a callback's hooks logs through that
    Module, as Lightning's callbacks do.

    Args:
        callbacks: the run's callbacks.
        module: the run's Module, or None to detach them.

    Example:
        >>> import trainkit
        >>> callback = Callback()
        >>> attach_module([callback], trainkit.Module())
        >>> attach_module([callback], None)
    """
    for callback in callbacks:
        if isinstance(callback, Callback):  # another object keeps its attributes as they are
            callback._logging_module = module


# Any object may be a callback, as in Lightning, which calls the hooks it has (a
# ported class without trainkit's base, a test's Mock). trainkit's own methods
# are then Callback's defaults: it is never asked for what only trainkit defines.


def base_method(callback: object, name: str) -> Any:
    """trainkit's method ``name`` (``uses_hook``, ``configure_step``) for ``callback``.

    The one its class defines, or :class:`Callback`'s default for an object whose
    class does not (called as ``method(callback, ...)``). Looked up on the class,
    so that instance attributes wrapping hooks (a recorder) do not see the call.

    Args:
        callback: one of the run's callbacks.
        name: the method's name.

    Example:
        >>> class Plain:
        ...     def on_train_start(self, trainer, module): ...
        >>> base_method(Plain(), "uses_hook")(Plain(), "on_train_start")
        True
    """
    method = getattr(type(callback), name, None) if isinstance(callback, Callback) else None
    return method if callable(method) else getattr(Callback, name)


# trainkit's hooks that Lightning's callbacks do not have: an object that is not a
# trainkit Callback (a ported class, a Mock) is not called with them.
_TRAINKIT_ONLY_HOOKS = frozenset({"on_resume_point"})


def calls_hook(callback: object, name: str) -> bool:
    """Whether the loop calls ``callback``'s hook ``name`` (given that it has one).

    A trainkit Callback decides through :meth:`Callback.uses_hook`; another
    object gets Lightning's hooks only.

    Args:
        callback: one of the run's callbacks.
        name: the hook's name.
    """
    if not isinstance(callback, Callback):
        return name not in _TRAINKIT_ONLY_HOOKS
    return bool(base_method(callback, "uses_hook")(callback, name))


def validates_once_per_epoch(trainer: Trainer) -> bool:
    """Whether validation, when it runs, runs once per epoch, at its end.

    That is the Trainer's defaults, ``val_check_interval=1.0`` (a float: an integer
    counts batches) and ``check_val_every_n_epoch=1``. Then a callback that acts on
    what validation logged (EarlyStopping, ModelCheckpoint) may act at the training
    epoch's end, where the epoch's training metrics are also ready; otherwise it
    acts after each validation run, on the model that was validated. This is the
    choice Lightning makes for their ``None`` settings.

    Args:
        trainer: the Trainer the callback runs in.
    """
    interval = getattr(trainer, "val_check_interval", 1.0)
    every = getattr(trainer, "check_val_every_n_epoch", 1)
    return isinstance(interval, float) and interval == 1.0 and every == 1

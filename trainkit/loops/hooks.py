"""Calling hooks: each hook name resolved once per run to a single caller.

:class:`Hooks` resolves, once per run, which of the Module's and the callbacks'
hooks are overridden, so that the loop pays one call per hook per batch and
nothing for hooks nobody uses; :func:`batch_transfer` does the same for the
batch-transfer hooks.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from typing import Any, TypeVar

import torch

from trainkit.callbacks.base import Callback, attach_module, calls_hook, hook_method
from trainkit.callbacks.defaults import is_monitoring
from trainkit.callbacks.slots import PrecisionPart
from trainkit.core.data import DataModule
from trainkit.core.module import Module, overrides
from trainkit.profilers import Profiler, is_active
from trainkit.strategies.base import Strategy

__all__ = ["NO_CONTEXT", "Hooks", "batch_transfer", "overrides"]

# Null contexts carry no state, so one instance serves every step.
NO_CONTEXT = nullcontext()


def _noop(*args: Any) -> None:
    return None


# Hooks whose Module result the loop reads (-1 from on_train_batch_start ends the
# epoch): a callback's return value must not stand in for it.
_RESULT_HOOKS = frozenset({"on_train_batch_start"})

T = TypeVar("T")


class Hooks:
    """The hooks of one run, resolved once: each name maps to a single caller.

    A caller invokes each callback's hook that overrides it (and needs it:
    ``Callback.uses_hook``), then the Module's (if it overrides it), in
    Lightning's order; the epoch-end hooks use :meth:`call_epoch_end`. A hook
    nobody overrides is a shared no-op; one that only the Module, or only one
    callback, overrides is called directly, with no frame in between. The loop
    and the step resolve their per-batch hooks once, before the first batch.

    Args:
        trainer: what callback hooks receive as ``trainer`` (the running Trainer).
        module: the user's Module.
        callbacks: the run's callbacks, in order.
        profiler: the run's profiler (hooks are timed when it is active).
    """

    def __init__(
        self, trainer: Any, module: Module, callbacks: list[Callback], profiler: Profiler
    ) -> None:
        self.trainer = trainer
        self.module = module
        self.callbacks = callbacks
        self._callers: dict[str, Callable[..., Any]] = {}
        self._profiler = profiler if is_active(profiler) else None
        attach_module(callbacks, module)  # self.log inside a callback logs through the Module

    def profiled(self, action: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function``, timed as ``action`` by the Trainer's profiler (as it is without one).

        Args:
            action: the name the profiler reports it under.
            function: what to time.
        """
        profiler = self._profiler
        if profiler is None:
            return function

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            profiler.start(action)
            try:
                return function(*args, **kwargs)
            finally:
                profiler.stop(action)

        return timed

    def profiled_iterable(self, action: str, iterable: Iterable[T]) -> Iterable[T]:
        """``iterable``, each ``next`` timed as ``action`` (as it is without a profiler).

        Args:
            action: the name the profiler reports it under.
            iterable: what to time the items of.
        """
        profiler = self._profiler
        return iterable if profiler is None else _timed_items(profiler, action, iterable)

    def _callback_methods(self, name: str) -> list[Callable[..., Any]]:
        return [
            self.profiled(f"[Callback]{type(cb).__name__}.{name}", hook_method(cb, name))
            for cb in self.callbacks
            if overrides(cb, name, Callback) and calls_hook(cb, name)
        ]

    def _module_method(self, name: str) -> Callable[..., Any] | None:
        if not overrides(self.module, name):
            return None
        action = f"[Module]{type(self.module).__name__}.{name}"
        return self.profiled(action, getattr(self.module, name))

    def caller(self, name: str) -> Callable[..., Any]:
        """The function that runs hook ``name`` everywhere it is overridden.

        Args:
            name: the hook's name, e.g. "on_train_epoch_start".

        Returns:
            A function taking the hook's arguments (after ``trainer, module`` for
            callbacks) and returning the Module's result.
        """
        found = self._callers.get(name)
        if found is not None:
            return found
        module_hook = self._module_method(name)
        callback_hooks = self._callback_methods(name)
        trainer, module = self.trainer, self.module
        if not callback_hooks:
            found = module_hook or _noop
        elif module_hook is None and len(callback_hooks) == 1 and name not in _RESULT_HOOKS:
            found = functools.partial(callback_hooks[0], trainer, module)
        else:

            def found(*args: Any) -> Any:
                for hook in callback_hooks:
                    hook(trainer, module, *args)
                return module_hook(*args) if module_hook is not None else None

        self._callers[name] = found
        return found

    def optional(self, name: str) -> Callable[..., Any] | None:
        """Hook ``name``'s caller, or None when nobody overrides it (so a hot path can skip it).

        Args:
            name: the hook's name.
        """
        found = self.caller(name)
        return None if found is _noop else found

    def call(self, name: str, *args: Any) -> Any:
        """Run hook ``name`` on the callbacks, then the Module; return the Module's result.

        Args:
            name: the hook's name.
            *args: the hook's arguments after ``(trainer, module)``.
        """
        return self.caller(name)(*args)

    def call_module(self, name: str, *args: Any) -> Any:
        """Run only the Module's hook ``name``; return its result.

        Args:
            name: the hook's name.
            *args: the hook's arguments.
        """
        module_hook = self._module_method(name)
        return module_hook(*args) if module_hook is not None else None

    def call_callbacks(
        self, name: str, *args: Any, monitoring: bool | None = None, **kwargs: Any
    ) -> None:
        """Run only the callbacks' hook ``name``.

        Args:
            name: the hook's name.
            *args: the hook's arguments after ``(trainer, module)``.
            monitoring: only the callbacks that act on monitored values (True),
                only the others (False), or all (None).
            **kwargs: keyword arguments of the hook (``stage=`` of setup and teardown,
                passed by name as Lightning passes it).
        """
        for callback in self.callbacks:
            if monitoring is not None and is_monitoring(callback) != monitoring:
                continue
            if overrides(callback, name, Callback) and calls_hook(callback, name):
                hook = hook_method(callback, name)
                action = f"[Callback]{type(callback).__name__}.{name}"
                self.profiled(action, hook)(self.trainer, self.module, *args, **kwargs)

    def call_epoch_end(self, name: str, between: Callable[[], Any]) -> None:
        """An epoch-end hook in Lightning's order, with ``between`` run after the Module's.

        The callbacks first, then the Module, then ``between`` (the loop reduces
        the epoch's values there), then the checkpointing and early-stopping
        callbacks, so that they see what the Module logged.

        Args:
            name: "on_train_epoch_end", "on_validation_epoch_end" or "on_test_epoch_end".
            between: called after the Module's hook.
        """
        self.call_callbacks(name, monitoring=False)
        self.call_module(name)
        between()
        self.call_callbacks(name, monitoring=True)


def _timed_items(profiler: Profiler, action: str, iterable: Iterable[T]) -> Iterator[T]:
    iterator = iter(iterable)
    while True:
        profiler.start(action)
        try:
            item = next(iterator)
        except StopIteration:
            return
        finally:
            profiler.stop(action)
        yield item


_TRANSFER_HOOKS = (
    "on_before_batch_transfer",
    "transfer_batch_to_device",
    "on_after_batch_transfer",
)


def _accelerator_available() -> bool:
    # Any device other than the CPU that tensors could live on in this process.
    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6
    if accelerator is not None:
        return bool(accelerator.is_available())
    return bool(torch.cuda.is_available() or torch.backends.mps.is_available())


def _on_cpu_already(move: Callable[[Any, int], Any], batch: Any, dataloader_idx: int) -> Any:
    # Training on the CPU of a machine without an accelerator: a list or tuple of
    # plain tensors is on the CPU already (there is no other device for them to be
    # on), so it is returned without asking each tensor (between the step's
    # kernels those reads cost ~3 us a batch: docs/performance.md). Anything else,
    # e.g. an object with its own `to`, still goes through the strategy's move.
    # Decided here, once per fit, and not in core/batches.py's move_data_to_device:
    # there it would cost a read of the target's `device.type` and two more calls
    # per batch, ~3 us in the loop (benchmarks/overhead_calls.py), all it saves.
    if type(batch) is list or type(batch) is tuple:
        for item in batch:
            if type(item) is not torch.Tensor:
                return move(batch, dataloader_idx)
        return batch
    return move(batch, dataloader_idx)


def batch_transfer(
    strategy: Strategy,
    module: Module,
    datamodule: DataModule | None,
    precision: PrecisionPart | None = None,
) -> Callable[[Any, int], Any]:
    """The function that moves a batch from dataloader ``dataloader_idx`` to the device.

    It runs ``on_before_batch_transfer``, ``transfer_batch_to_device`` and
    ``on_after_batch_transfer``, each the DataModule's if it overrides it, else the
    Module's (Lightning's rule). When nobody overrides any of them, it is the
    strategy's own move, with nothing in between; training on the CPU of a
    machine without an accelerator, a list or tuple of tensors skips even that
    (no tensor can be elsewhere). A precision that converts batches
    (``"64-true"``) converts each first, as Lightning's precision plugins do.

    Args:
        strategy: the run's strategy (its device and its own way of moving batches).
        module: the user's Module.
        datamodule: the run's DataModule, if any.
        precision: the step's precision part, if any.
    """
    move = _transfer(strategy, module, datamodule)
    if precision is None or not getattr(precision, "converts_input", False):
        return move
    convert = precision.convert_input
    return lambda batch, dataloader_idx: move(convert(batch), dataloader_idx)


def _transfer(
    strategy: Strategy, module: Module, datamodule: DataModule | None
) -> Callable[[Any, int], Any]:
    from_datamodule = {
        name: datamodule is not None
        and overrides(datamodule, name, DataModule, follow_wrapped=True)
        for name in _TRANSFER_HOOKS
    }
    owners = {name: datamodule if from_datamodule[name] else module for name in _TRANSFER_HOOKS}
    if not any(from_datamodule.values()) and not any(
        overrides(module, name) for name in _TRANSFER_HOOKS
    ):
        move = strategy.batch_to_device
        if type(strategy).batch_to_device is Strategy.batch_to_device:
            if strategy.root_device.type == "cpu" and not _accelerator_available():
                return functools.partial(_on_cpu_already, move)
            return move  # takes (batch, dataloader_idx): one call less per batch
        return lambda batch, dataloader_idx: move(batch)  # a subclass's may take the batch only
    before, transfer, after = (getattr(owners[name], name) for name in _TRANSFER_HOOKS)
    device = strategy.root_device

    def moved(batch: Any, dataloader_idx: int) -> Any:
        batch = before(batch, dataloader_idx)
        batch = transfer(batch, device, dataloader_idx)
        return after(batch, dataloader_idx)

    return moved


def prepare_data(
    strategy: Strategy, node_rank: int, module: Module, datamodule: DataModule | None
) -> None:
    """Run the DataModule's ``prepare_data``, then the Module's (as Lightning), where due.

    Each runs in one process per node (per job with ``prepare_data_per_node=False``)
    while the others wait, so downloads happen once and ``setup`` finds the files.
    A hook that is not overridden is not called, and then nothing waits.

    Args:
        strategy: the run's strategy (ranks and the barrier).
        node_rank: this machine's index among the job's machines.
        module: the user's Module.
        datamodule: the run's DataModule, if any.
    """
    for owner, base in ((datamodule, DataModule), (module, Module)):
        if owner is None or not overrides(owner, "prepare_data", base, follow_wrapped=True):
            continue
        per_node = bool(getattr(owner, "prepare_data_per_node", True))
        if strategy.local_rank == 0 and (per_node or node_rank == 0):
            owner.prepare_data()
        strategy.barrier("prepare_data")


def layer_builder(module: Module) -> Callable[[], None] | None:
    """The hook that builds ``module``'s late layers: its ``configure_model``, or the
    older ``configure_sharded_model`` (with a warning); None when it overrides neither.

    Args:
        module: the user's Module.

    Raises:
        RuntimeError: it overrides both.
    """
    # A hook wrapped on the instance (instrumentation does) counts as the method it wraps.
    legacy = overrides(module, "configure_sharded_model", follow_wrapped=True)
    if not legacy:
        return module.configure_model if overrides(module, "configure_model") else None
    name = type(module).__name__
    if overrides(module, "configure_model"):
        raise RuntimeError(
            f"{name} overrides both configure_model and configure_sharded_model, the older "
            "name of the same hook; move the second's code into configure_model."
        )
    warnings.warn(
        f"{name}.configure_sharded_model is the older name of configure_model; trainkit calls "
        "it where it calls configure_model (on the run's device and dtype). Rename it.",
        stacklevel=3,
    )
    return module.configure_model  # whose default calls configure_sharded_model

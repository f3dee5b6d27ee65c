"""What both searches share: short trial runs inside a fit, and undoing every trace of them.

A search runs once a fit is set up (dataloaders, optimizers, the optimization
step): from a tuning callback's ``on_fit_start``, or from :class:`~trainkit.tuner.Tuner`,
whose ``fit`` runs the search (:func:`searching`) where training would start.
Before it, :class:`Snapshot` copies what a checkpoint holds (weights, optimizers,
schedulers, callbacks, counters, random states, logged values) to host memory,
as ``trainkit.checkpoint.restore.collect_state`` reads them, and puts it back
afterwards: nothing is written to disk, and the fit that follows starts
exactly where it would have without the search.

A trial (:func:`train_trial`) is the fit loop itself (``trainkit.loops.fit.run_fit``)
over a copy of the run's context with other hooks: the Module's and the
search's own callback, none of the Trainer's callbacks. Its ``self.log`` calls
are dropped, so loggers and ``callback_metrics`` never see them. The loop
itself is unchanged: a fit without a tuner pays nothing for this module.
"""

from __future__ import annotations

import copy
import gc
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback
from trainkit.checkpoint.preemption import Preemption
from trainkit.loops.evaluate import run_evaluation
from trainkit.loops.fit import Fit, run_fit
from trainkit.loops.hooks import Hooks
from trainkit.loops.state import RunState
from trainkit.loops.step import Optimization
from trainkit.utilities.seed import capture_rng_states, isolated_rng, restore_rng_states

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.core.optim import LRSchedulerConfig
    from trainkit.trainer.trainer import Trainer

#: A search: runs on the set-up fit of a Trainer and its Module.
Search = Callable[["Trainer", "Module"], None]

# The search Tuner asked the next fit to run instead of training (None: train).
_SEARCH: ContextVar[Search | None] = ContextVar("trainkit_tuner_search", default=None)


@contextmanager
def searching(search: Search) -> Iterator[None]:
    """While active, ``Trainer.fit`` sets the run up, runs ``search`` and ends, without training.

    Args:
        search: called with the Trainer and the Module once the fit is set up.
    """
    token = _SEARCH.set(search)
    try:
        yield
    finally:
        _SEARCH.reset(token)


def running_search() -> Search | None:
    """The search the current ``fit`` runs instead of training (see :func:`searching`)."""
    return _SEARCH.get()


def should_skip(trainer: Trainer, what: str) -> bool:
    """Whether to skip a search (fast_dev_run, as Lightning); refuse several processes.

    Args:
        trainer: the Trainer.
        what: the search's name, for the messages.
    """
    if trainer.world_size > 1:
        raise ValueError(
            f"The {what} runs in one process only: under {trainer.world_size} processes the "
            "trials would differ between them. Tune with devices=1, then train with the value."
        )
    if trainer.fast_dev_run:
        trainer.warn(f"Skipping {what} since `fast_dev_run` is enabled.")
        return True
    return False


def _host_copy(value: Any) -> Any:
    # Tensors copied to the CPU (a copy on the accelerator would take memory the
    # trials need); containers keep their type (a state_dict's _metadata too).
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, Mapping):
        copied = copy.copy(value)
        for key, item in value.items():
            copied[key] = _host_copy(item)  # type: ignore[index]
        return copied
    if isinstance(value, list):
        return [_host_copy(item) for item in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_host_copy(item) for item in value)
    return copy.deepcopy(value)


class Snapshot:
    """What the run's checkpoint would hold, and the rest of ``RunState``, in host memory.

    The weights, the optimizers, the LR schedulers, the callbacks', the
    results' and the DataModule's states, the random states and every field of
    ``RunState``: what ``Trainer.save_checkpoint`` saves, read the same way,
    without the checkpoint hooks (a user's ``on_save_checkpoint`` may write files)
    and without the loggers (asking a logger its version claims its folder).

    Args:
        trainer: the Trainer, its fit set up.
    """

    def __init__(self, trainer: Trainer) -> None:
        module, datamodule = trainer.module, trainer.datamodule
        self._weights = _host_copy(module.state_dict())
        self._optimizers = [_host_copy(o.state_dict()) for o in trainer.optimizers]
        self._schedulers = [
            _host_copy(c.scheduler.state_dict()) for c in trainer.lr_scheduler_configs
        ]
        self._callbacks = [_host_copy(cb.state_dict()) for cb in trainer.callbacks]
        self._results = _host_copy(trainer.results.state_dict())
        self._datamodule = _host_copy(datamodule.state_dict()) if datamodule else None
        self._rng = capture_rng_states()
        self._state = copy.deepcopy(trainer.state)
        self._last_loss = trainer.results.last_loss
        self._modes = [m.training for m in module.modules()]

    def restore(self, trainer: Trainer) -> None:
        """Put the run back as it was when the snapshot was taken.

        Args:
            trainer: the same Trainer.
        """
        module, results = trainer.module, trainer.results
        module.load_state_dict(self._weights)
        for optimizer, saved in zip(trainer.optimizers, self._optimizers, strict=True):
            optimizer.load_state_dict(saved)
        for config, saved in zip(trainer.lr_scheduler_configs, self._schedulers, strict=True):
            config.scheduler.load_state_dict(saved)
        for callback, saved in zip(trainer.callbacks, self._callbacks, strict=True):
            # Only a step slot's state moves in a trial (the float16 loss scale); loading
            # an unchanged state is not always a no-op (ModelCheckpoint defers its paths).
            if not _same(callback.state_dict(), saved):
                callback.load_state_dict(saved)
        results.load_state_dict(self._results)
        if trainer.datamodule is not None and self._datamodule is not None:
            trainer.datamodule.load_state_dict(self._datamodule)
        restore_rng_states(self._rng)
        state = trainer.state
        for field in fields(RunState):  # the status fields too (batch counts, stage)
            setattr(state, field.name, getattr(self._state, field.name))
        results.last_loss = self._last_loss
        results.close()
        module.zero_grad(set_to_none=True)  # a trial may end inside an accumulation window
        for submodule, training in zip(module.modules(), self._modes, strict=True):
            submodule.training = training


def _same(now: Any, saved: Any) -> bool:
    # Whether a state equals its host copy (tensors by value).
    if isinstance(now, torch.Tensor) or isinstance(saved, torch.Tensor):
        return (
            isinstance(now, torch.Tensor)
            and isinstance(saved, torch.Tensor)
            and torch.equal(now.detach().cpu(), saved)
        )
    if isinstance(now, Mapping) and isinstance(saved, Mapping):
        return now.keys() == saved.keys() and all(_same(now[k], saved[k]) for k in now)
    if isinstance(now, (list, tuple)) and isinstance(saved, (list, tuple)):
        return len(now) == len(saved) and all(map(_same, now, saved))
    return bool(now == saved)


def _discard(name: str, value: Any, arguments: Any) -> None:
    return None  # a trial's self.log values are not kept


def train_trial(
    trainer: Trainer,
    module: Module,
    steps: int,
    train_loader: Iterable[Any],
    callbacks: list[Callback],
    val_loaders: list[Iterable[Any]] | None = None,
    lr_scheduler_configs: list[LRSchedulerConfig] | None = None,
) -> None:
    """Train ``steps`` optimizer steps from where the run is, then validate once if asked.

    The fit loop runs with the Module's hooks and ``callbacks`` only, no LR
    scheduler, no logging, no sanity check and no time or epoch limit; the
    caller restores the run afterwards (:class:`Snapshot`).

    Args:
        trainer: the Trainer, its fit set up.
        module: the Module.
        steps: optimizer steps to take (fewer if a callback sets ``should_stop``).
        train_loader: the prepared training dataloader.
        callbacks: the only callbacks whose hooks run.
        val_loaders: prepared validation dataloaders to run ``steps`` batches of
            each after training (None or empty: no validation).
        lr_scheduler_configs: what ``Module.lr_schedulers()`` returns during the trial
            (None: the run's; the trial steps none of them itself).
    """
    real = trainer.optimization.run
    run = replace(real, hooks=Hooks(trainer, module, callbacks, trainer.profiler))
    state = trainer.state
    options = replace(
        trainer.options,
        max_steps=state.global_step + steps,
        max_epochs=state.epoch + steps,  # each epoch steps at least once
        min_epochs=None,
        min_steps=None,
        max_time=None,
        num_sanity_val_steps=0,
        reload_dataloaders_every_n_epochs=0,
    )
    optimization = Optimization(run, trainer.step_slots, trainer.optimizers, [], 0, trainer.warn)
    fit = Fit(
        options=options,
        train_loader=train_loader,
        val_loaders=[],
        validates=False,
        optimization=optimization,
        preemption=Preemption(),  # not installed: a real signal waits for the real loop
        vote=None,
        save_last=_nothing,
        warn=trainer.warn,
    )
    with trainer.results.capture(_discard), trainer._in_trial(optimization, lr_scheduler_configs):
        run_fit(run, fit)
        if val_loaders and state.num_training_batches:
            totals = [min(float(steps), total) for total in state.num_val_batches]
            with isolated_rng():
                run_evaluation(run, val_loaders, totals, "validation")


def free_memory() -> None:
    """Collect garbage and return cached accelerator memory (after an out-of-memory error)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _nothing() -> None:
    return None

"""Averaged weights (EMA, SWA) kept beside the model: Lightning 2.5's ``WeightAveraging``.

An averaged copy of the model lives in torch's
:class:`~torch.optim.swa_utils.AveragedModel`, updated after optimizer steps or
epochs (:meth:`WeightAveraging.should_update` decides). Validation runs with the
averaged weights (swapped in for it, the training weights swapped back after),
checkpoints hold the averaged weights as their ``state_dict``, and at the end
of ``fit`` the model holds the averaged weights.

The plumbing shared with :class:`~trainkit.callbacks.swa.StochasticWeightAveraging`
is here: :func:`averaged_model` (the copy), :func:`check_unsharded` and
:func:`copy_weights`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from trainkit.callbacks.base import Callback
from trainkit.core.module import overrides

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

#: ``avg_fn(averaged, current, n_averaged) -> new averaged``, as torch's AveragedModel takes.
AverageFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def check_unsharded(trainer: Trainer, callback: str) -> None:
    """Refuse a strategy under which a process does not hold the whole model.

    An averaged copy made in one process would then average only that
    process's shards (FSDP), or only its pipeline stage.

    Args:
        trainer: the Trainer about to fit.
        callback: the callback's name, for the message.

    Raises:
        ValueError: under a strategy that shards the parameters (FSDP, model parallel),
            or a hybrid strategy with ``pipeline_size > 1``.
    """
    strategy = trainer.strategy
    if strategy.shards_parameters or getattr(strategy, "pipeline_size", 1) > 1:
        raise ValueError(
            f"{callback} keeps a full averaged copy of the model, but strategy "
            f"{strategy.name!r} shards the parameters over the processes (as Lightning, "
            "trainkit does not average sharded models). Use strategy='ddp' (or one device), "
            f"or drop {callback}."
        )


def averaged_model(
    module: Module, device: torch.device | int | None, use_buffers: bool, **kwargs: Any
) -> AveragedModel:
    """torch's ``AveragedModel`` over a copy of ``module``, made without copying its Trainer.

    Args:
        module: the user's Module (its weights are the average's start).
        device: where the averaged copy lives (None: where ``module`` is).
        use_buffers: average the buffers too (else they follow the model's).
        **kwargs: ``avg_fn`` or ``multi_avg_fn``, passed to ``AveragedModel``.

    Example:
        >>> import trainkit
        >>> class Net(trainkit.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.layer = torch.nn.Linear(2, 1)
        >>> averaged = averaged_model(Net(), None, use_buffers=True)
        >>> int(averaged.n_averaged)
        0
    """
    # The copy is deep: a Module attached to a Trainer would copy the Trainer
    # (its data, loggers, callbacks) too. Detached while copied, then reattached.
    trainer = module._trainer
    module.trainer = None
    try:
        return AveragedModel(module, device=device, use_buffers=use_buffers, **kwargs)
    finally:
        module.trainer = trainer


def copy_weights(source: torch.nn.Module, target: torch.nn.Module, buffers: bool) -> None:
    """Copy ``source``'s parameters (and buffers, if asked) into ``target``'s, in place.

    Args:
        source: the module to read (same architecture as ``target``).
        target: the module to write.
        buffers: copy the buffers too (BatchNorm statistics).
    """
    with torch.no_grad():
        for read, written in zip(_tensors(source, buffers), _tensors(target, buffers), strict=True):
            written.copy_(read.to(written.device))


def _tensors(module: torch.nn.Module, buffers: bool) -> Any:
    parameters = module.parameters()
    return itertools.chain(parameters, module.buffers()) if buffers else parameters


class WeightAveraging(Callback):
    """Keep an averaged copy of the weights (SWA by default, EMA with an ``avg_fn``), as Lightning.

    The arguments besides ``device`` and ``use_buffers`` go to torch's
    :class:`~torch.optim.swa_utils.AveragedModel`: ``avg_fn`` or
    ``multi_avg_fn`` (e.g. ``get_ema_multi_avg_fn(0.999)`` for an exponential
    moving average); without one, the average is the equally weighted mean of
    the updates (SWA). Unlike ``AveragedModel``'s default, buffers (BatchNorm
    statistics) are averaged too unless ``use_buffers=False``.

    :meth:`should_update` decides when the average is updated: after every
    optimizer step by default. Validation runs on the averaged weights; a
    checkpoint's ``state_dict`` holds them (the training weights go under
    ``current_model_state``, the average's counter under ``averaging_state``,
    so that resuming continues both exactly); at the end of ``fit`` the model
    holds the averaged weights.

    Args:
        device: where the averaged copy lives (default: the model's device;
            ``"cpu"`` saves accelerator memory).
        use_buffers: average the buffers as well as the parameters.
        **kwargs: passed to ``AveragedModel`` (``avg_fn``, ``multi_avg_fn``).

    Example:
        >>> from torch.optim.swa_utils import get_ema_multi_avg_fn
        >>> class EMA(WeightAveraging):
        ...     def __init__(self):
        ...         super().__init__(multi_avg_fn=get_ema_multi_avg_fn(0.999))
        ...     def should_update(self, step_idx=None, epoch_idx=None):
        ...         return step_idx is not None and step_idx >= 100  # from step 100 on
        >>> callback = EMA()
    """

    def __init__(
        self,
        device: torch.device | str | int | None = None,
        use_buffers: bool = True,
        **kwargs: Any,
    ) -> None:
        self._device = torch.device(device) if isinstance(device, str) else device
        self._use_buffers = use_buffers
        self._kwargs = kwargs
        self._average_model: AveragedModel | None = None
        self._average_device: torch.device | int | None = None
        # global_step when the average was last updated: 0, so that the first
        # update comes after the first optimizer step (after N batches with
        # accumulate_grad_batches=N).
        self._latest_update_step = 0
        self._latest_update_epoch = -1
        self._fitting = False
        self._swapped = False  # the averaged weights are in the model (validation)

    def should_update(self, step_idx: int | None = None, epoch_idx: int | None = None) -> bool:
        """Whether to update the average now: after every optimizer step by default.

        Called after each optimizer step with ``step_idx`` (counted from 0) and
        after each training epoch with ``epoch_idx`` (counted from 0); override it
        to choose (start late, update every n steps, once per epoch).

        Args:
            step_idx: the optimizer step just taken, or None at an epoch's end.
            epoch_idx: the epoch just ended, or None after a step.

        Returns:
            True to update the average now.
        """
        return step_idx is not None

    # ------------------------------------------------------------------ fit
    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Check the strategy; a fit starts a new average, made here as in Lightning.

        A Module that builds its layers in ``configure_model`` has them only after
        every ``setup``: its average is made when the fit starts.
        """
        super().setup(trainer, module, stage)
        if stage == "fit":
            if trainer is not None:  # None where a test calls the hook by itself
                check_unsharded(trainer, type(self).__name__)
            self._average_model = None
            self._fitting = True
            if not overrides(module, "configure_model"):
                self._averaged(module)

    def on_fit_start(self, trainer: Trainer, module: Module) -> None:
        """Make the averaged copy (unless made already), on the model's device, where
        the strategy has now moved the model (unless ``device`` was given)."""
        averaged = self._averaged(module)
        if self._device is None and (device := module.device) != self._average_device:
            averaged.to(device)
            self._average_device = device

    def on_train_batch_end(
        self, trainer: Trainer, module: Module, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Update the average after an optimizer step, if :meth:`should_update` says so."""
        step = trainer.global_step
        if step > self._latest_update_step and self.should_update(step_idx=step - 1):
            self._averaged(module).update_parameters(module)
            self._latest_update_step = step

    def on_train_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Update the average after an epoch, if :meth:`should_update` says so."""
        epoch = trainer.current_epoch
        if epoch > self._latest_update_epoch and self.should_update(epoch_idx=epoch):
            self._averaged(module).update_parameters(module)
            self._latest_update_epoch = epoch

    def on_validation_epoch_start(self, trainer: Trainer, module: Module) -> None:
        """Validate with the averaged weights: swap them into the model."""
        if self._fitting and self._average_model is not None:
            self._swap_models(module)

    def on_validation_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Swap the training weights back."""
        if self._swapped:
            self._swap_models(module)

    def on_train_end(self, trainer: Trainer, module: Module) -> None:
        """Leave the averaged weights in the model."""
        if self._average_model is not None:
            self._copy_average_to_current(module)

    def on_exception(self, trainer: Trainer, module: Module, exception: BaseException) -> None:
        """A failed validation leaves the training weights in the model, not the average."""
        if self._swapped:
            self._swap_models(module)

    def teardown(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Validation outside fit (``trainer.validate``) uses the model's own weights."""
        if stage == "fit":
            self._fitting = False

    # ---------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """When the average was last updated (its weights go in the checkpoint's ``state_dict``)."""
        return {
            "latest_update_step": self._latest_update_step,
            "latest_update_epoch": self._latest_update_epoch,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (a Lightning file has no ``latest_update_epoch``)."""
        self._latest_update_step = state_dict["latest_update_step"]
        self._latest_update_epoch = state_dict.get("latest_update_epoch", -1)

    def on_save_checkpoint(
        self, trainer: Trainer, module: Module, checkpoint: dict[str, Any]
    ) -> None:
        """Save the averaged weights as ``state_dict``, the trained as ``current_model_state``.

        So ``Module.load_from_checkpoint`` and ``trainer.test(ckpt_path=...)`` load
        the average, and resuming ``fit`` restores both (Lightning's layout).
        """
        averaged = self._average_model
        if averaged is None:
            return  # not fitting: the model's own weights are the ones to save
        checkpoint["current_model_state"] = checkpoint["state_dict"]
        checkpoint["state_dict"] = averaged.module.state_dict()
        checkpoint["averaging_state"] = {"n_averaged": averaged.n_averaged}

    def on_load_checkpoint(
        self, trainer: Trainer, module: Module, checkpoint: dict[str, Any]
    ) -> None:
        """Restore the average, and have the Trainer load the training weights into the model."""
        averaged = self._averaged(module)
        if "current_model_state" in checkpoint and "averaging_state" in checkpoint:
            averaged.module.load_state_dict(checkpoint["state_dict"])
            averaged.n_averaged.copy_(checkpoint["averaging_state"]["n_averaged"])
            # The Trainer loads checkpoint["state_dict"] into the model after this hook:
            # the training weights are the ones to continue from.
            checkpoint["state_dict"] = checkpoint["current_model_state"]
        else:
            trainer.warn(
                f"The checkpoint was not saved with {type(self).__name__}: the average starts "
                "from its weights, as the model does."
            )
            averaged.module.load_state_dict(checkpoint["state_dict"], strict=False)

    # ---------------------------------------------------------------- helpers
    def _averaged(self, module: Module) -> AveragedModel:
        # Made once the model is on its device (the strategy moves it after setup).
        if self._average_model is None:
            device = self._device if self._device is not None else module.device
            self._average_model = averaged_model(module, device, self._use_buffers, **self._kwargs)
            self._average_device = device
        return self._average_model

    def _copy_average_to_current(self, module: Module) -> None:
        # The averaged weights (and buffers) into the model, for good.
        assert self._average_model is not None
        copy_weights(self._average_model.module, module, buffers=True)

    def _swap_models(self, module: Module) -> None:
        # Exchange the model's and the average's values, parameters and buffers.
        # Lightning's private names for this and _copy_average_to_current: subclasses
        # written for Lightning override them (to count or log the swaps).
        assert self._average_model is not None
        average = self._average_model.module
        with torch.no_grad():
            for mine, theirs in zip(_tensors(average, True), _tensors(module, True), strict=True):
                kept = theirs.detach().clone()
                theirs.copy_(mine.to(theirs.device))
                mine.copy_(kept.to(mine.device))
        self._swapped = not self._swapped


class EMAWeightAveraging(WeightAveraging):
    """An exponential moving average of the weights (Lightning 2.6's EMA callback).

    A :class:`WeightAveraging` whose average is ``decay * average + (1 - decay) *
    weights`` (torch's ``get_ema_multi_avg_fn``), updated after every
    ``update_every_n_steps``-th optimizer step from ``update_starting_at_step``
    on, and, when ``update_starting_at_epoch`` is given, also at the end of each
    epoch from that one on. Validation and checkpoints use the average, as for
    every ``WeightAveraging``.

    Args:
        device: where the average is kept (None: the model's device).
        use_buffers: average the buffers too (else they are copied).
        decay: the weight the old average keeps at each update.
        update_every_n_steps: update after every n-th step (step 0 included).
        update_starting_at_step: the first step that updates (None: step 0).
        update_starting_at_epoch: the first epoch whose end updates (None: no
            epoch-end updates).
        **kwargs: passed to torch's ``AveragedModel``.

    Example:
        >>> ema = EMAWeightAveraging(decay=0.99, update_every_n_steps=2, update_starting_at_step=3)
        >>> [step for step in range(9) if ema.should_update(step_idx=step)]
        [4, 6, 8]
    """

    def __init__(
        self,
        device: torch.device | str | int | None = None,
        use_buffers: bool = True,
        decay: float = 0.999,
        update_every_n_steps: int = 1,
        update_starting_at_step: int | None = None,
        update_starting_at_epoch: int | None = None,
        **kwargs: Any,
    ) -> None:
        if not 0.0 <= decay <= 1.0:
            raise ValueError(f"EMAWeightAveraging(decay={decay}): the decay must lie in [0, 1].")
        if update_every_n_steps < 1:
            raise ValueError(
                f"EMAWeightAveraging(update_every_n_steps={update_every_n_steps}): pass 1 or more."
            )
        kwargs.setdefault("multi_avg_fn", get_ema_multi_avg_fn(decay))  # type: ignore[no-untyped-call]
        super().__init__(device=device, use_buffers=use_buffers, **kwargs)
        self.decay = decay
        self.update_every_n_steps = update_every_n_steps
        self.update_starting_at_step = update_starting_at_step
        self.update_starting_at_epoch = update_starting_at_epoch

    def should_update(self, step_idx: int | None = None, epoch_idx: int | None = None) -> bool:
        """Every n-th step from the starting step; each epoch from the starting epoch.

        Args:
            step_idx: the optimizer step just taken, or None at an epoch's end.
            epoch_idx: the epoch just ended, or None after a step.
        """
        by_step = (
            step_idx is not None
            and step_idx % self.update_every_n_steps == 0
            and (self.update_starting_at_step is None or step_idx >= self.update_starting_at_step)
        )
        by_epoch = (
            epoch_idx is not None
            and self.update_starting_at_epoch is not None
            and epoch_idx >= self.update_starting_at_epoch
        )
        return by_step or by_epoch

"""Assigning accumulate_grad_batches, gradient_clip_val and gradient_clip_algorithm on a Trainer."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import GradientAccumulation, GradientClipping, LambdaCallback
from trainkit.callbacks.base import Checkpoint


def _fit(trainer: trainkit.Trainer, epochs_of: int = 128) -> Classifier:
    torch.manual_seed(0)
    model = Classifier()
    trainer.fit(model, loader(blobs(epochs_of), 32))
    return model


def _weights(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def test_options_set_before_fit_train_as_if_given_to_the_trainer() -> None:
    changed = trainkit.Trainer(
        max_epochs=2, gradient_clip_val=0.01, accumulate_grad_batches=2, **QUIET
    )
    changed.gradient_clip_val = None
    changed.accumulate_grad_batches = 1
    plain = trainkit.Trainer(max_epochs=2, **QUIET)
    for first, second in zip(_weights(_fit(changed)), _weights(_fit(plain)), strict=True):
        assert torch.equal(first, second)
    assert changed.global_step == plain.global_step == 8
    step_callbacks = (GradientClipping, GradientAccumulation)
    assert not any(isinstance(c, step_callbacks) for c in changed.callbacks)

    clipped = trainkit.Trainer(max_epochs=2, **QUIET)
    clipped.gradient_clip_algorithm = "value"
    clipped.gradient_clip_val = 0.01
    clipped.accumulate_grad_batches = 2
    given = trainkit.Trainer(
        max_epochs=2,
        gradient_clip_val=0.01,
        gradient_clip_algorithm="value",
        accumulate_grad_batches=2,
        **QUIET,
    )
    for first, second in zip(_weights(_fit(clipped)), _weights(_fit(given)), strict=True):
        assert torch.equal(first, second)
    assert clipped.global_step == 4
    assert (clipped.gradient_clip_val, clipped.gradient_clip_algorithm) == (0.01, "value")


class SchedulesTheStep(trainkit.Callback):
    """Sets the step options at each epoch's start; records the steps each epoch took."""

    def __init__(self, when: str = "on_train_epoch_start") -> None:
        self.when = when
        self.steps: list[int] = []
        self.clipping: list[float | None] = []

    def _set(self, trainer: Any) -> None:
        trainer.accumulate_grad_batches = 1 if trainer.current_epoch == 0 else 2
        trainer.gradient_clip_val = None if trainer.current_epoch == 0 else 0.5

    def on_train_epoch_start(self, trainer: Any, module: Any) -> None:
        self.steps.append(trainer.global_step)
        if self.when == "on_train_epoch_start":
            self._set(trainer)

    def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
        if self.when == "on_train_batch_end" and args[-1] == 0:
            self._set(trainer)

    def on_before_optimizer_step(self, trainer: Any, module: Any, optimizer: Any) -> None:
        self.clipping.append(trainer.gradient_clip_val)


def test_a_callback_setting_them_at_an_epochs_start_shapes_that_epoch() -> None:
    callback = SchedulesTheStep()
    trainer = trainkit.Trainer(max_epochs=3, callbacks=[callback], **QUIET)
    _fit(trainer)
    # 4 batches an epoch: 4 steps, then 2 and 2 (two batches a step).
    assert callback.steps == [0, 4, 6]
    assert trainer.global_step == 8
    assert trainer.accumulate_grad_batches == 2
    assert callback.clipping == [None] * 4 + [0.5] * 4


def test_a_change_in_the_middle_of_an_epoch_holds_from_the_next() -> None:
    callback = SchedulesTheStep("on_train_batch_end")
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[callback], **QUIET)
    _fit(trainer)
    assert callback.steps == [0, 4]  # epoch 0 kept one batch a step
    assert trainer.global_step == 4 + 4  # epoch 1 too: the value set in it waits


def test_the_accumulation_read_back_is_the_current_epochs() -> None:
    callback = SchedulesTheStep("never")
    seen: list[int] = []
    reader = LambdaCallback(
        on_train_epoch_start=lambda trainer, module: seen.append(trainer.accumulate_grad_batches)
    )
    trainer = trainkit.Trainer(
        max_epochs=3, accumulate_grad_batches={0: 2, 2: 4}, callbacks=[callback, reader], **QUIET
    )
    assert trainer.accumulate_grad_batches == 2
    _fit(trainer)
    assert seen == [2, 2, 4]
    assert callback.steps == [0, 2, 4]


def test_a_slot_filled_by_the_users_callback_is_changed_on_that_callback() -> None:
    trainer = trainkit.Trainer(callbacks=[GradientClipping(max_norm=1.0)], **QUIET)
    trainer.gradient_clip_val = 1.0  # what it does already: accepted
    with pytest.raises(ValueError, match="comes from your GradientClipping callback"):
        trainer.gradient_clip_val = None
    with pytest.raises(ValueError, match="change that callback's settings"):
        trainer.gradient_clip_algorithm = "value"
    assert (trainer.gradient_clip_val, trainer.gradient_clip_algorithm) == (1.0, "norm")
    assert trainer.step_options.gradient_clip_val is None


def test_a_refused_value_changes_nothing() -> None:
    trainer = trainkit.Trainer(gradient_clip_val=0.5, **QUIET)
    callbacks = list(trainer.callbacks)
    with pytest.raises(ValueError, match="must be a positive number"):
        trainer.gradient_clip_val = -1.0
    with pytest.raises(ValueError, match="accumulate_grad_batches must be a positive int"):
        trainer.accumulate_grad_batches = 0
    assert trainer.callbacks == callbacks and trainer.gradient_clip_val == 0.5


def test_a_new_option_callback_goes_before_the_checkpointing_callbacks(tmp_path: Any) -> None:
    trainer = trainkit.Trainer(default_root_dir=tmp_path, logger=False)
    trainer.accumulate_grad_batches = 2
    kinds = [type(c) for c in trainer.callbacks]
    at = kinds.index(GradientAccumulation)
    assert all(not issubclass(kind, Checkpoint) for kind in kinds[: at + 1])
    assert issubclass(kinds[-1], Checkpoint)


class ManualSteps(Classifier):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> None:
        optimizer = self.optimizers()
        optimizer.zero_grad()
        self.manual_backward(super().training_step(batch, batch_idx))
        optimizer.step()
        if batch_idx == 0:
            with pytest.raises(ValueError, match="automatic optimization only"):
                self.trainer.accumulate_grad_batches = 2
            self.trainer.gradient_clip_val = 0.5  # clipping works in manual steps


def test_accumulation_is_refused_during_a_manual_fit_when_assigned() -> None:
    manual = trainkit.Trainer(max_epochs=1, **QUIET)
    manual.fit(ManualSteps(), loader(blobs(128), 32))
    assert manual.global_step == 4 and manual.accumulate_grad_batches == 1
    assert manual.gradient_clip_val == 0.5

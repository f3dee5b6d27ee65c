"""GradientAccumulation: k micro-batches of B/k give the same training as batches of B."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import GradientAccumulation, GradientAccumulationScheduler, ModelCheckpoint
from trainkit.strategies import SingleDeviceStrategy

# 120 samples: batches of 32 are 32, 32, 32, 24; micro-batches of 8 form windows
# of 4, 4, 4 and a final partial window of 3.
DATA = blobs(120, seed=7)


class Adam(Classifier):
    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.AdamW(self.parameters(), lr=0.01, weight_decay=0.1)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }


def _train(model_cls: type[Classifier], batch_size: int, **kwargs: Any) -> tuple[Any, Any]:
    torch.manual_seed(0)
    model = model_cls()
    trainer = trainkit.Trainer(max_epochs=2, **QUIET, **kwargs)
    trainer.fit(model, loader(DATA, batch_size))
    return model, trainer


@pytest.mark.parametrize("model_cls", [Classifier, Adam], ids=["sgd", "adamw+scheduler"])
def test_k4_at_quarter_batch_equals_k1_at_full_batch(model_cls: type[Classifier]) -> None:
    full, full_trainer = _train(model_cls, 32)
    accumulated, trainer = _train(model_cls, 8, accumulate_grad_batches=4)
    for (name, a), b in zip(full.named_parameters(), accumulated.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7, msg=name)
    # global_step counts optimizer steps: 4 windows an epoch, as 4 full batches.
    assert trainer.global_step == full_trainer.global_step == 8
    lr = trainer.optimizers[0].param_groups[0]["lr"]
    assert lr == full_trainer.optimizers[0].param_groups[0]["lr"]


def test_the_argument_and_the_callback_are_the_same_mechanism() -> None:
    by_argument, _ = _train(Classifier, 8, accumulate_grad_batches=4)
    by_callback, _ = _train(Classifier, 8, callbacks=[GradientAccumulation(4)])
    assert all(
        torch.equal(a, b)
        for a, b in zip(by_argument.parameters(), by_callback.parameters(), strict=True)
    )
    with pytest.raises(ValueError, match="GradientAccumulation is given twice"):
        trainkit.Trainer(accumulate_grad_batches=2, callbacks=[GradientAccumulation(2)])


def test_schedule_by_epoch_and_estimated_steps() -> None:
    steps: list[int] = []

    class Record(trainkit.Callback):
        def on_train_epoch_end(self, trainer: trainkit.Trainer, module: Any) -> None:
            steps.append(trainer.global_step)

    _, trainer = _train(Classifier, 8, callbacks=[GradientAccumulation({0: 5, 1: 2}), Record()])
    # Epoch 0: 15 micro-batches in windows of 5 -> 3 steps; epoch 1: windows of 2 -> 8 steps.
    assert steps == [3, 11]
    assert trainer.estimated_stepping_batches == 11


def test_gradients_are_synchronised_only_on_the_micro_batch_that_steps() -> None:
    entered: list[int] = []

    class Recording(SingleDeviceStrategy):
        def no_backward_sync(self, module: torch.nn.Module) -> AbstractContextManager[Any]:
            entered.append(1)
            return super().no_backward_sync(module)

    _train(Classifier, 8, accumulate_grad_batches=4, strategy=Recording("cpu"))
    # Per epoch: 15 micro-batches, 4 of which step -> 11 skip synchronisation.
    assert len(entered) == 22


def test_resume_inside_accumulation_is_exact(tmp_path: Path) -> None:
    def run(max_steps: int, ckpt: str | None) -> Classifier:
        torch.manual_seed(0)
        model = Classifier()
        trainer = trainkit.Trainer(
            max_steps=max_steps,
            accumulate_grad_batches=4,
            seed=0,
            default_root_dir=tmp_path,
            callbacks=[ModelCheckpoint(every_n_train_steps=1)],
            **QUIET,
        )
        trainer.fit(model, loader(DATA, 8, shuffle=True), ckpt_path=ckpt)
        return model

    full = run(10, None)
    for file in (tmp_path / "checkpoints").iterdir():
        file.unlink()
    run(6, None)  # checkpoints are only ever taken at window boundaries
    resumed = run(10, "last")
    assert all(
        torch.equal(a, b) for a, b in zip(full.parameters(), resumed.parameters(), strict=True)
    )


def test_bad_schedules() -> None:
    with pytest.raises(ValueError, match="must say what to do from epoch 0"):
        GradientAccumulation({2: 4})
    with pytest.raises(ValueError, match="positive int"):
        GradientAccumulation(0)


def test_the_scheduler_is_the_same_mechanism_with_one_batch_before_its_first_epoch() -> None:
    scheduled, _ = _train(Classifier, 8, callbacks=[GradientAccumulationScheduler({1: 2})])
    by_argument, _ = _train(Classifier, 8, accumulate_grad_batches={0: 1, 1: 2})
    assert all(
        torch.equal(a, b)
        for a, b in zip(scheduled.parameters(), by_argument.parameters(), strict=True)
    )
    with pytest.raises(ValueError, match="accumulation slot is filled twice"):
        trainkit.Trainer(
            accumulate_grad_batches=2, callbacks=[GradientAccumulationScheduler({1: 2})]
        )
    for wrong in ({}, {1: 0}, {-1: 2}):
        with pytest.raises((TypeError, ValueError)):
            GradientAccumulationScheduler(wrong)


def test_resume_with_a_schedule_is_exact(tmp_path: Path) -> None:
    # 15 micro-batches an epoch: epoch 0 steps 15 times, epoch 1 (k=4) 4 times.
    def run(max_steps: int, ckpt: str | None) -> Classifier:
        torch.manual_seed(0)
        model = Adam()
        trainer = trainkit.Trainer(
            max_steps=max_steps,
            seed=0,
            default_root_dir=tmp_path,
            callbacks=[
                GradientAccumulationScheduler({1: 4}),
                ModelCheckpoint(every_n_train_steps=1),
            ],
            **QUIET,
        )
        trainer.fit(model, loader(DATA, 8, shuffle=True), ckpt_path=ckpt)
        return model

    full = run(18, None)
    for file in (tmp_path / "checkpoints").iterdir():
        file.unlink()
    run(16, None)  # stopped inside epoch 1, after its first window
    resumed = run(18, "last")
    assert all(
        torch.equal(a, b) for a, b in zip(full.parameters(), resumed.parameters(), strict=True)
    )

"""StochasticWeightAveraging: the weights torch's AveragedModel + SWALR give by hand, and resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.optim.swa_utils import SWALR, AveragedModel, update_bn

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import ModelCheckpoint
from trainkit.callbacks.swa import StochasticWeightAveraging

DATA = blobs(96)
EPOCHS = 5


class Net(Classifier):
    """Classifier with optional BatchNorm, two parameter groups and a StepLR scheduler."""

    def __init__(self, batch_norm: bool = False, scheduler: bool = True) -> None:
        super().__init__()
        torch.manual_seed(0)
        norm = [torch.nn.BatchNorm1d(32)] if batch_norm else []
        self.net = torch.nn.Sequential(
            torch.nn.Linear(8, 32), *norm, torch.nn.ReLU(), torch.nn.Linear(32, 3)
        )
        self.scheduler = scheduler

    def configure_optimizers(self) -> Any:
        first, *rest = self.net
        optimizer = torch.optim.SGD(
            [
                {"params": first.parameters(), "lr": 0.1},
                {"params": [p for layer in rest for p in layer.parameters()], "lr": 0.05},
            ],
            momentum=0.9,
        )
        if not self.scheduler:
            return optimizer
        return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)]


def by_hand(
    swa_start: int,
    swa_lrs: float | list[float],
    batch_norm: bool = False,
    annealing_epochs: int = 10,
    annealing_strategy: str = "cos",
    avg_fn: Any = None,
) -> tuple[Net, list[list[float]]]:
    """The same run as a plain loop over torch's AveragedModel and SWALR.

    Lightning's schedule: SWALR replaces the scheduler at the start of epoch
    ``swa_start``; the weights join the average at the start of each epoch from
    ``swa_start`` to the last; at the end the model gets the average, then update_bn.
    """
    model = Net(batch_norm)
    optimizer, scheduler = (x[0] for x in model.configure_optimizers())
    averaged = AveragedModel(model, use_buffers=False, avg_fn=avg_fn)
    lrs = []
    for epoch in range(EPOCHS):
        if epoch == swa_start:
            scheduler = SWALR(
                optimizer,
                swa_lrs,
                annealing_epochs,
                annealing_strategy,  # type: ignore[arg-type]
            )
        if epoch >= swa_start:
            averaged.update_parameters(model)
        lrs.append([group["lr"] for group in optimizer.param_groups])
        for x, y in loader(DATA, 16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        scheduler.step()
    with torch.no_grad():
        for mine, average in zip(model.parameters(), averaged.module.parameters(), strict=True):
            mine.copy_(average)
    update_bn(loader(DATA, 16), model)
    return model, lrs


class RecordLR(trainkit.Callback):
    def __init__(self) -> None:
        self.lrs: list[list[float]] = []

    def on_train_epoch_start(self, trainer: Any, module: Any) -> None:
        self.lrs.append([group["lr"] for group in trainer.optimizers[0].param_groups])


def fit(swa: StochasticWeightAveraging, batch_norm: bool = False, **options: Any) -> Net:
    model = Net(batch_norm)
    callbacks = [swa, *options.pop("callbacks", [])]
    trainer = trainkit.Trainer(callbacks=callbacks, **{**QUIET, "max_epochs": EPOCHS, **options})
    trainer.fit(model, loader(DATA, 16))
    return model


def assert_close(model: torch.nn.Module, expected: torch.nn.Module) -> None:
    for (name, mine), theirs in zip(
        model.state_dict().items(), expected.state_dict().values(), strict=True
    ):
        assert torch.allclose(mine.float(), theirs.float(), atol=1e-6, rtol=0), name


@pytest.mark.parametrize("swa_epoch_start", [3, 0.6])  # both: the 3rd epoch (index 2)
def test_int_and_fractional_start_give_the_hand_loops_weights_and_lrs(
    swa_epoch_start: float,
) -> None:
    swa = StochasticWeightAveraging(swa_lrs=0.02, swa_epoch_start=swa_epoch_start)
    lr = RecordLR()
    model = fit(swa, callbacks=[lr])
    expected, lrs = by_hand(2, 0.02)
    assert swa.swa_start == 2 and swa.n_averaged == EPOCHS - 2
    assert lr.lrs == [pytest.approx(row, abs=1e-12) for row in lrs]
    assert_close(model, expected)


def test_per_group_lrs_and_linear_annealing() -> None:
    swa = StochasticWeightAveraging(
        swa_lrs=[0.03, 0.01], swa_epoch_start=2, annealing_epochs=2, annealing_strategy="linear"
    )
    lr = RecordLR()
    model = fit(swa, callbacks=[lr])
    expected, lrs = by_hand(1, [0.03, 0.01], annealing_epochs=2, annealing_strategy="linear")
    assert lr.lrs == [pytest.approx(row, abs=1e-12) for row in lrs]
    assert lr.lrs[-1] == pytest.approx([0.03, 0.01])  # annealed to swa_lrs after 2 epochs
    assert_close(model, expected)


def test_avg_fn_is_used() -> None:
    def ema(averaged: torch.Tensor, current: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        return 0.5 * averaged + 0.5 * current

    model = fit(StochasticWeightAveraging(swa_lrs=0.02, swa_epoch_start=2, avg_fn=ema))
    assert_close(model, by_hand(1, 0.02, avg_fn=ema)[0])


def test_batch_norm_statistics_are_recomputed_for_the_averaged_weights() -> None:
    model = fit(StochasticWeightAveraging(swa_lrs=0.02, swa_epoch_start=3), batch_norm=True)
    expected, _ = by_hand(2, 0.02, batch_norm=True)
    norm = model.net[1]
    assert norm.momentum == 0.1 and model.training  # restored after the pass
    assert int(norm.num_batches_tracked) == 6  # one pass: 96 samples in batches of 16
    assert_close(model, expected)


def test_stopping_before_swa_starts_leaves_the_trained_weights() -> None:
    swa = StochasticWeightAveraging(swa_lrs=0.02, swa_epoch_start=4)
    model = fit(swa, max_epochs=2)
    plain = Net()
    trainkit.Trainer(max_epochs=2, **QUIET).fit(plain, loader(DATA, 16))
    assert swa.n_averaged == 0
    assert_close(model, plain)


class Stop(trainkit.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError("stopped")


@pytest.mark.parametrize("batch_norm", [False, True])
def test_a_run_killed_during_swa_resumes_bitwise_equal(tmp_path: Path, batch_norm: bool) -> None:
    def run(stop: int | None, ckpt: str | None) -> tuple[Net, StochasticWeightAveraging]:
        torch.manual_seed(0)
        model = Net(batch_norm, scheduler=False)  # SWALR is appended to no scheduler
        swa = StochasticWeightAveraging(swa_lrs=0.02, swa_epoch_start=2, annealing_epochs=2)
        trainer = trainkit.Trainer(
            max_epochs=EPOCHS,
            seed=0,
            default_root_dir=tmp_path,
            callbacks=[
                swa,
                ModelCheckpoint(every_n_train_steps=1),
                *([Stop(stop)] if stop else []),
            ],
            **{**QUIET, "enable_checkpointing": True},
        )
        trainer.fit(model, loader(DATA, 16, shuffle=True), ckpt_path=ckpt)
        return model, swa

    full, _ = run(None, None)
    for file in (tmp_path / "checkpoints").iterdir():
        file.unlink()
    with pytest.raises(RuntimeError, match="stopped"):
        run(6 * 3 + 2, None)  # in epoch 3: SWALR in place since epoch 1, 3 weights averaged
    saved = torch.load(next((tmp_path / "checkpoints").iterdir()), weights_only=True)
    state = saved["callbacks"]["StochasticWeightAveraging"]
    assert state["n_averaged"] == 3 and state["scheduler_state"] is not None
    resumed, swa = run(None, "last")
    assert swa.n_averaged == EPOCHS - 1
    for (name, a), b in zip(full.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_settings_it_cannot_work_with() -> None:
    class Two(Net):
        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            steps = [torch.optim.lr_scheduler.StepLR(optimizer, 1) for _ in range(2)]
            return [optimizer], steps

    with pytest.raises(ValueError, match="at most one"):
        trainkit.Trainer(max_epochs=1, callbacks=[StochasticWeightAveraging(0.1)], **QUIET).fit(
            Two(), loader(DATA, 16)
        )
    with pytest.raises(ValueError, match="one learning rate per group"):
        fit(StochasticWeightAveraging([0.1, 0.1, 0.1]))
    with pytest.raises(ValueError, match="fraction of max_epochs"):
        trainkit.Trainer(max_steps=3, callbacks=[StochasticWeightAveraging(0.1, 0.5)], **QUIET).fit(
            Net(), loader(DATA, 16)
        )
    with pytest.raises(ValueError, match="swa_epoch_start"):
        StochasticWeightAveraging(0.1, swa_epoch_start=0)
    with pytest.raises(ValueError, match="swa_lrs"):
        StochasticWeightAveraging(-1.0)


def test_an_overridden_avg_fn_is_used() -> None:
    def ema(averaged: torch.Tensor, current: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        return 0.5 * averaged + 0.5 * current

    class EMA(StochasticWeightAveraging):
        avg_fn = staticmethod(ema)

    model = fit(EMA(swa_lrs=0.02, swa_epoch_start=2))
    assert_close(model, by_hand(1, 0.02, avg_fn=ema)[0])


class Steps(StochasticWeightAveraging):
    """Records each of Lightning's documented steps as the callback takes it."""

    def __init__(self) -> None:
        super().__init__(swa_lrs=0.02, swa_epoch_start=3)
        self.steps: list[str] = []

    def update_parameters(self, *args: Any) -> None:  # type: ignore[override]
        self.steps.append(f"update {int(args[2])}")
        StochasticWeightAveraging.update_parameters(*args)

    def transfer_weights(self, *args: Any) -> None:  # type: ignore[override]
        self.steps.append("transfer")
        StochasticWeightAveraging.transfer_weights(*args)

    def reset_batch_norm_and_save_state(self, pl_module: torch.nn.Module) -> None:
        self.steps.append("reset")
        super().reset_batch_norm_and_save_state(pl_module)

    def reset_momenta(self) -> None:
        self.steps.append(f"momenta {sorted(self.momenta.values())}")
        super().reset_momenta()


@pytest.mark.parametrize("batch_norm", [False, True])
def test_the_documented_steps_can_be_overridden(batch_norm: bool) -> None:
    swa = Steps()
    model = fit(swa, batch_norm=batch_norm)
    averaged = [f"update {n}" for n in range(EPOCHS - 2)]
    pass_steps = ["reset", "momenta [0.1]"] if batch_norm else []
    assert swa.steps == [*averaged, "transfer", *pass_steps]
    assert swa.pl_module_contains_batch_norm(model) is batch_norm
    # Through the overridden steps the weights are still those of the hand loop.
    assert_close(model, by_hand(2, 0.02, batch_norm=batch_norm)[0])

"""LR schedulers step on their interval and frequency, with monitors."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader


class Scheduled(Classifier):
    def __init__(self, scheduler_config: dict[str, Any]) -> None:
        super().__init__(lr=1.0)
        self.scheduler_config = scheduler_config
        self.lrs: list[float] = []

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
        config = dict(self.scheduler_config)
        config["scheduler"] = config["scheduler"](optimizer)
        return {"optimizer": optimizer, "lr_scheduler": config}

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.lrs.append(self.trainer.optimizers[0].param_groups[0]["lr"])
        return super().training_step(batch, batch_idx)


def halve(optimizer: torch.optim.Optimizer) -> Any:
    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)


def test_step_interval_scheduler_steps_after_every_optimizer_step() -> None:
    model = Scheduled({"scheduler": halve, "interval": "step"})
    trainkit.Trainer(max_epochs=2, **QUIET).fit(model, loader(blobs(96), 32))
    assert model.lrs == [0.5**i for i in range(6)]


def test_step_interval_with_frequency() -> None:
    model = Scheduled({"scheduler": halve, "interval": "step", "frequency": 2})
    trainkit.Trainer(max_epochs=2, **QUIET).fit(model, loader(blobs(96), 32))
    assert model.lrs == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]


def test_epoch_interval_scheduler_steps_after_every_epoch() -> None:
    model = Scheduled({"scheduler": halve})  # "epoch" is the default interval
    trainkit.Trainer(max_epochs=3, **QUIET).fit(model, loader(blobs(64), 32))
    assert model.lrs == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]


def test_an_epoch_cut_short_does_not_step_the_epoch_schedulers() -> None:
    # As in Lightning: max_steps ends the fit inside epoch 1, which did not end.
    model = Scheduled({"scheduler": halve})
    trainkit.Trainer(max_epochs=3, max_steps=3, **QUIET).fit(model, loader(blobs(64), 32))
    assert model.lrs == [1.0, 1.0, 0.5]
    assert model.trainer.optimizers[0].param_groups[0]["lr"] == 0.5  # once, after epoch 0


def test_plateau_scheduler_reads_the_monitored_validation_metric() -> None:
    def plateau(optimizer: torch.optim.Optimizer) -> Any:
        return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="max", patience=0)

    class NeverImproves(Scheduled):
        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("val/score", 1.0)

    model = NeverImproves({"scheduler": plateau, "monitor": "val/score"})
    trainkit.Trainer(max_epochs=3, **QUIET).fit(model, loader(blobs(32), 32), loader(blobs(32), 32))
    # Epoch 0 sets the best; every later epoch without improvement cuts the LR by 10.
    assert model.lrs == pytest.approx([1.0, 1.0, 0.1])


def test_missing_monitor_metric_is_a_clear_error() -> None:
    def plateau(optimizer: torch.optim.Optimizer) -> Any:
        return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)

    model = Scheduled({"scheduler": plateau, "monitor": "val/typo"})
    with pytest.raises(RuntimeError, match="monitors 'val/typo', which was not logged"):
        trainkit.Trainer(max_epochs=1, **QUIET).fit(model, loader(blobs(32), 32))


def test_two_list_form_and_list_of_optimizers() -> None:
    class TwoLists(Classifier):
        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=1.0)
            return [optimizer], [halve(optimizer)]

    model = TwoLists()
    trainer = trainkit.Trainer(max_epochs=2, **QUIET)
    trainer.fit(model, loader(blobs(32), 32))
    assert trainer.optimizers[0].param_groups[0]["lr"] == 0.25


@pytest.mark.parametrize("as_dict", [False, True])
def test_a_list_of_optimizers_with_one_scheduler_beside_it(as_dict: bool) -> None:
    # Lightning's form ([optimizer], scheduler) and ([optimizer], {"scheduler": ...}).
    class OneScheduler(Classifier):
        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=1.0)
            scheduler = halve(optimizer)
            return [optimizer], {"scheduler": scheduler} if as_dict else scheduler

    trainer = trainkit.Trainer(max_epochs=2, **QUIET)
    trainer.fit(OneScheduler(), loader(blobs(32), 32))
    assert trainer.optimizers[0].param_groups[0]["lr"] == 0.25


class _UserDriven:
    """A scheduler of the user's own, without torch's step(): their training_step drives it."""

    def __init__(self) -> None:
        self.calls = 0

    def advance(self) -> None:
        self.calls += 1

    def state_dict(self) -> dict[str, Any]:
        return {"calls": self.calls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.calls = state["calls"]


@pytest.mark.parametrize("kind", ["plateau-without-monitor", "without-step"])
def test_manual_optimization_takes_schedulers_the_user_steps(kind: str) -> None:
    # As in Lightning: the Trainer steps no scheduler then, so it checks none for stepping.
    class Manual(Classifier):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch: Any, batch_idx: int) -> None:
            optimizer = self.optimizers()
            loss = torch.nn.functional.cross_entropy(self(batch[0]), batch[1])
            optimizer.zero_grad()
            self.manual_backward(loss)
            optimizer.step()
            scheduler = self.lr_schedulers()
            if isinstance(scheduler, _UserDriven):
                scheduler.advance()
            else:
                scheduler.step(loss.detach())

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            if kind == "without-step":
                return [optimizer], [_UserDriven()]
            return [optimizer], [torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)]

    model = Manual()
    trainkit.Trainer(max_steps=3, **QUIET).fit(model, loader(blobs(96), 16))
    scheduler = model.lr_schedulers()
    calls = scheduler.calls if kind == "without-step" else scheduler.last_epoch
    assert calls == 3
    # Automatic optimization steps them itself, so it still refuses both.
    automatic = Classifier()
    automatic.configure_optimizers = Manual.configure_optimizers.__get__(automatic)  # type: ignore[method-assign]
    error = TypeError if kind == "without-step" else ValueError
    with pytest.raises(error, match=r"must be a torch LR scheduler|must include a monitor"):
        trainkit.Trainer(max_steps=3, **QUIET).fit(automatic, loader(blobs(96), 16))

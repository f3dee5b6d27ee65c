"""Lightning's documented optimizer API under trainkit: the optimizer wrapper, how
manual optimization counts steps, LR scheduler configs, configure_optimizers' errors."""

from __future__ import annotations

import dataclasses
from typing import Any
from unittest import mock

import pytest
import torch

import trainkit
from trainkit.core.optim import LRSchedulerConfig, ManagedOptimizer

from ..helpers import QUIET, Classifier, blobs, loader


def fit(model: trainkit.Module, epochs: int = 1, n: int = 64, **kwargs: Any) -> trainkit.Trainer:
    trainer = trainkit.Trainer(max_epochs=epochs, **{**QUIET, **kwargs})
    trainer.fit(model, loader(blobs(n), 32))
    return trainer


class Manual(Classifier):
    """Manual optimization with one SGD; ``record`` runs in every training_step."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.seen: dict[str, Any] = {}

    def loss(self, batch: Any) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.cross_entropy(self(x), y)

    def training_step(self, batch: Any, batch_idx: int) -> None:
        opt = self.optimizers()
        self.record(opt)
        opt.zero_grad()
        self.manual_backward(self.loss(batch))
        opt.step()

    def record(self, opt: Any) -> None:
        pass


class TwoNets(Manual):
    """Two networks, two SGDs, each stepped once per batch."""

    def __init__(self) -> None:
        super().__init__()
        self.other = torch.nn.Linear(8, 3)

    def training_step(self, batch: Any, batch_idx: int) -> None:
        for opt in self.optimizers():
            opt.zero_grad()
            self.manual_backward(self.loss(batch) + self.other(batch[0]).sum())
            opt.step()

    def configure_optimizers(self) -> Any:
        return [
            torch.optim.SGD(self.net.parameters(), lr=0.1),
            torch.optim.SGD(self.other.parameters(), lr=0.1),
        ]


# ------------------------------------------------------------ the wrapper
def test_optimizers_are_instances_of_the_wrapped_optimizer_class() -> None:
    class Records(Manual):
        def record(self, opt: Any) -> None:
            self.seen.update(
                sgd=isinstance(opt, torch.optim.SGD),
                optimizer=isinstance(opt, torch.optim.Optimizer),
                wrapper=isinstance(opt, ManagedOptimizer),
                inner=opt.optimizer,
                groups=opt.param_groups,
                state=opt.state,
                defaults=opt.defaults,
            )

    model = Records()
    trainer = fit(model)
    inner = trainer.optimizers[0]
    assert model.seen["sgd"] and model.seen["optimizer"] and model.seen["wrapper"]
    assert model.seen["inner"] is inner and type(inner) is torch.optim.SGD
    assert model.seen["groups"] is inner.param_groups
    assert model.seen["state"] is inner.state
    assert model.seen["defaults"] is inner.defaults


def test_use_pl_optimizer_false_gives_the_torch_optimizers() -> None:
    class Raw(TwoNets):
        def training_step(self, batch: Any, batch_idx: int) -> None:
            self.seen["raw"] = self.optimizers(use_pl_optimizer=False)
            super().training_step(batch, batch_idx)

    model = Raw()
    trainer = fit(model)
    assert model.seen["raw"] == trainer.optimizers
    assert [type(opt) for opt in model.seen["raw"]] == [torch.optim.SGD, torch.optim.SGD]


def test_the_wrapper_reaches_the_wrapped_optimizers_state_dict() -> None:
    layer = torch.nn.Linear(2, 1)
    adam = torch.optim.Adam(layer.parameters(), lr=0.01)
    opt = ManagedOptimizer(adam)
    layer(torch.ones(1, 2)).sum().backward()
    opt.step()
    assert isinstance(opt, torch.optim.Adam) and type(opt).__name__ == "ManagedAdam"
    assert opt.state_dict()["state"][0]["step"] == adam.state_dict()["state"][0]["step"] == 1
    opt.param_groups[0]["lr"] = 0.5  # the same list as the wrapped optimizer's
    assert adam.param_groups[0]["lr"] == 0.5
    opt.load_state_dict(
        {
            **adam.state_dict(),
            "param_groups": [{**adam.param_groups[0], "lr": 0.2, "params": [0, 1]}],
        }
    )
    assert adam.param_groups[0]["lr"] == 0.2 and opt.param_groups[0]["lr"] == 0.2
    assert ManagedOptimizer(opt).optimizer is adam  # wrapping a wrapper wraps the optimizer


def test_standalone_wrapper_steps_and_returns_the_closures_result() -> None:
    layer = torch.nn.Linear(2, 1)
    opt = ManagedOptimizer(torch.optim.SGD(layer.parameters(), lr=1.0))
    before = layer.weight.detach().clone()

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = layer(torch.ones(1, 2)).sum()
        loss.backward()
        return loss

    assert isinstance(opt.step(closure), torch.Tensor)
    assert not torch.equal(before, layer.weight)
    opt.zero_grad()
    assert layer.weight.grad is None


def test_lightning_optimizer_has_lightnings_import_path() -> None:
    from trainkit.lightning.core import LightningDataModule, LightningModule
    from trainkit.lightning.core.optimizer import LightningOptimizer

    assert LightningOptimizer is ManagedOptimizer
    assert LightningModule is trainkit.Module and LightningDataModule is trainkit.DataModule
    with pytest.raises(AttributeError, match="trainkit does not provide Lightning's Nope"):
        from trainkit.lightning.core import optimizer

        _ = optimizer.Nope


def test_optimizer_step_override_receives_the_wrapper_and_step_returns_the_loss() -> None:
    seen: list[Any] = []

    class Override(Classifier):
        def optimizer_step(
            self, epoch: int, batch_idx: int, optimizer: Any, optimizer_closure: Any = None
        ) -> None:
            seen.append((isinstance(optimizer, torch.optim.SGD), optimizer.step(optimizer_closure)))

    trainer = fit(Override())
    assert len(seen) == 2 and trainer.global_step == 2
    assert all(is_sgd and isinstance(loss, torch.Tensor) for is_sgd, loss in seen)


def test_optimizer_zero_grad_override_gets_the_torch_optimizer_after_on_before_zero_grad() -> None:
    calls: list[str] = []

    class Override(Classifier):
        def on_before_zero_grad(self, optimizer: Any) -> None:
            calls.append("on_before_zero_grad")

        def optimizer_zero_grad(self, epoch: int, batch_idx: int, optimizer: Any) -> None:
            calls.append(type(optimizer).__name__)  # clears nothing: the hook ran anyway

    fit(Override(), n=32)
    assert calls == ["on_before_zero_grad", "SGD"]


# ------------------------------------------------ manual optimization steps
def test_global_step_counts_every_wrapper_step_even_with_step_mocked() -> None:
    model = TwoNets()
    with mock.patch.object(torch.optim.SGD, "step") as sgd_step:
        trainer = fit(model)  # 2 batches x 2 optimizers
    assert trainer.global_step == 4
    assert sgd_step.call_count == 4


def test_manual_step_with_a_closure_returns_its_loss_and_hooks_see_its_gradients() -> None:
    class Closure(Manual):
        def training_step(self, batch: Any, batch_idx: int) -> None:
            opt = self.optimizers()

            def closure() -> torch.Tensor:
                self.seen["global_step_in_closure"] = self.trainer.global_step
                opt.zero_grad()
                loss = self.loss(batch)
                self.manual_backward(loss)
                return loss

            self.seen["returned"] = opt.step(closure=closure)

        def on_before_optimizer_step(self, optimizer: Any) -> None:
            self.seen["grad_before_step"] = self.net[0].weight.grad is not None

    model = Closure()
    trainer = fit(model, n=32)
    assert isinstance(model.seen["returned"], torch.Tensor)
    assert model.seen["grad_before_step"]  # the hook ran after the closure's backward
    assert model.seen["global_step_in_closure"] == 0 and trainer.global_step == 1


def test_toggle_model_freezes_the_other_optimizers_parameters_inside_the_block() -> None:
    class Toggles(TwoNets):
        def training_step(self, batch: Any, batch_idx: int) -> None:
            first, _ = self.optimizers()
            with first.toggle_model():
                self.seen["inside"] = [p.requires_grad for p in self.other.parameters()]
                self.seen["own"] = [p.requires_grad for p in self.net.parameters()]
            self.seen["after"] = [p.requires_grad for p in self.other.parameters()]

    model = Toggles()
    fit(model, n=32)
    assert model.seen == {"inside": [False, False], "own": [True] * 4, "after": [True, True]}


def test_toggling_leaves_parameters_no_optimizer_holds_alone() -> None:
    # As in Lightning: a layer outside every optimizer (a frozen encoder the loss still
    # passes through, or one trained by hand) keeps requires_grad, so backward works.
    class WithSpare(TwoNets):
        def __init__(self) -> None:
            super().__init__()
            self.spare = torch.nn.Linear(8, 8)

        def training_step(self, batch: Any, batch_idx: int) -> None:
            first, _ = self.optimizers()
            self.toggle_optimizer(first)
            self.seen["spare"] = [p.requires_grad for p in self.spare.parameters()]
            self.seen["other"] = [p.requires_grad for p in self.other.parameters()]
            first.zero_grad()
            self.manual_backward(self.spare(batch[0]).sum() + self.loss(batch))
            first.step()
            self.untoggle_optimizer(first)
            self.seen["after"] = [p.requires_grad for p in self.other.parameters()]

    model = WithSpare()
    fit(model, n=32)
    assert model.seen == {"spare": [True, True], "other": [False, False], "after": [True, True]}


def test_toggle_model_outside_fit_says_what_to_use() -> None:
    opt = ManagedOptimizer(torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1))
    with pytest.raises(RuntimeError, match="toggle_optimizer"), opt.toggle_model():
        pass


# ---------------------------------------------------------- LR schedulers
def test_lr_scheduler_config_has_lightnings_fields_in_order() -> None:
    names = [field.name for field in dataclasses.fields(LRSchedulerConfig)]
    assert names[:7] == [
        "scheduler",
        "name",
        "interval",
        "frequency",
        "reduce_on_plateau",
        "monitor",
        "strict",
    ]


class Plateau(Classifier):
    def __init__(self, lr_scheduler: Any, monitor: str | None = "train/loss") -> None:
        super().__init__(lr=1.0)
        self.lr_scheduler = lr_scheduler
        self.monitor = monitor
        self.metrics: list[Any] = []

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=1.0)
        returned = {"optimizer": optimizer, "lr_scheduler": self.lr_scheduler(optimizer)}
        return {**returned, "monitor": self.monitor} if self.monitor else returned

    def lr_scheduler_step(self, scheduler: Any, metric: Any) -> None:
        self.metrics.append(metric)
        scheduler.step() if metric is None else scheduler.step(metric)


def test_reduce_lr_on_plateau_is_marked_and_gets_the_monitored_value() -> None:
    model = Plateau(torch.optim.lr_scheduler.ReduceLROnPlateau)
    trainer = fit(model, epochs=2)
    config = trainer.lr_scheduler_configs[0]
    assert config.reduce_on_plateau and config.monitor == "train/loss" and config.strict
    assert (config.interval, config.frequency) == ("epoch", 1)
    assert len(model.metrics) == 2 and all(isinstance(m, float) for m in model.metrics)


def test_a_monitor_on_another_scheduler_is_not_passed_to_it() -> None:
    model = Plateau(lambda opt: torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5))
    trainer = fit(model, epochs=2)
    assert not trainer.lr_scheduler_configs[0].reduce_on_plateau
    assert model.metrics == [None, None]
    assert trainer.optimizers[0].param_groups[0]["lr"] == 0.25


def test_reduce_on_plateau_key_makes_a_custom_scheduler_get_the_metric() -> None:
    def custom(optimizer: torch.optim.Optimizer) -> Any:
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
        return {"scheduler": scheduler, "reduce_on_plateau": True, "monitor": "train/loss"}

    model = Plateau(custom, monitor=None)
    with mock.patch.object(torch.optim.lr_scheduler.StepLR, "step"):
        trainer = fit(model)
    assert trainer.lr_scheduler_configs[0].reduce_on_plateau
    assert len(model.metrics) == 1 and isinstance(model.metrics[0], float)


def test_plateau_without_a_monitor_uses_lightnings_wording() -> None:
    class ListForm(Classifier):
        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            return [optimizer], [torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)]

    with pytest.raises(
        ValueError,
        match="`configure_optimizers` must include a monitor when a `ReduceLROnPlateau`",
    ):
        fit(ListForm())
    dict_form = Plateau(
        lambda opt: {"scheduler": torch.optim.lr_scheduler.ReduceLROnPlateau(opt)}, monitor=None
    )
    with pytest.raises(
        ValueError,
        match="The lr scheduler dict must include a monitor when a `ReduceLROnPlateau`",
    ):
        fit(dict_form)


# ---------------------------------------------------- configure_optimizers


def test_without_an_optimizer_self_optimizers_is_lightnings_mock_optimizer() -> None:
    # Projects test for Lightning's private _MockOptimizer to tell "no optimizer" apart.
    import trainkit.lightning as L
    from trainkit.lightning.core.optimizer import _MockOptimizer

    seen: list[bool] = []

    class NoOptimizer(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            seen.append(isinstance(self.optimizers(), L.pytorch.core.optimizer._MockOptimizer))
            return super().training_step(batch, batch_idx)

        def configure_optimizers(self) -> None:
            return None

    with pytest.warns(UserWarning):
        trainkit.Trainer(max_epochs=1, **QUIET).fit(NoOptimizer(), loader(blobs(64)))
    assert seen == [True, True] and _MockOptimizer is L.core.optimizer._MockOptimizer

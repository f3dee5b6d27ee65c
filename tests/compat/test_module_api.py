"""Lightning's documented Module API under trainkit: hooks, helpers, manual optimization."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import inspect
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from trainkit.callbacks import GradientClipping
from trainkit.core.module import overrides

from ..helpers import QUIET, Classifier, blobs, loader


def fit(model: trainkit.Module, epochs: int = 1, n: int = 64, **kwargs: Any) -> trainkit.Trainer:
    trainer = trainkit.Trainer(max_epochs=epochs, **{**QUIET, **kwargs})
    trainer.fit(model, loader(blobs(n), 16), loader(blobs(32), 16))
    return trainer


# ------------------------------------------------------- manual optimization
class TwoOptimizers(trainkit.Module):
    """A GAN-shaped module: two networks, two optimizers, two schedulers, stepped by hand."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.a = torch.nn.Linear(8, 3)
        self.b = torch.nn.Linear(8, 3)
        self.grads_of_b_during_a: list[bool] = []

    def training_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        opt_a, opt_b = self.optimizers()
        sched_a, sched_b = self.lr_schedulers()
        self.toggle_optimizer(opt_a)
        loss_a = torch.nn.functional.cross_entropy(self.a(x) + self.b(x), y)
        self.manual_backward(loss_a)
        self.grads_of_b_during_a.append(self.b.weight.grad is not None)
        opt_a.step()
        opt_a.zero_grad()
        self.untoggle_optimizer(opt_a)
        loss_b = torch.nn.functional.cross_entropy(self.b(x), y)
        self.manual_backward(loss_b)
        opt_b.step()
        opt_b.zero_grad()
        if self.trainer.is_last_batch:
            sched_a.step()
            sched_b.step()

    def configure_optimizers(self) -> Any:
        opt_a = torch.optim.SGD(self.a.parameters(), lr=1.0)
        opt_b = torch.optim.SGD(self.b.parameters(), lr=1.0)
        return [opt_a, opt_b], [
            torch.optim.lr_scheduler.StepLR(opt_a, step_size=1, gamma=0.5),
            {"scheduler": torch.optim.lr_scheduler.StepLR(opt_b, 1, 0.5), "interval": "step"},
        ]


def test_manual_optimization_steps_no_scheduler_and_counts_every_optimizer_step() -> None:
    model = TwoOptimizers()
    trainer = fit(model, epochs=2)
    # The user steps each scheduler once per epoch; trainkit steps none of them.
    assert [g["lr"] for g in trainer.optimizers[0].param_groups] == [0.25]
    assert [g["lr"] for g in trainer.optimizers[1].param_groups] == [0.25]
    # 4 batches x 2 epochs x 2 optimizers
    assert trainer.global_step == 16
    # toggle_optimizer froze b's parameters for a's backward
    assert model.grads_of_b_during_a == [False] * 8
    assert all(p.requires_grad for p in model.parameters())


def test_optimizers_and_lr_schedulers_shapes() -> None:
    shapes: dict[str, Any] = {}

    class One(Classifier):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch: Any, batch_idx: int) -> None:
            shapes["opt"] = self.optimizers()
            shapes["sched"] = self.lr_schedulers()
            x, y = batch
            self.manual_backward(torch.nn.functional.cross_entropy(self(x), y))
            shapes["opt"].step()
            shapes["opt"].zero_grad()

    fit(One())
    assert hasattr(shapes["opt"], "step") and not isinstance(shapes["opt"], list)
    assert shapes["sched"] is None


def test_lr_scheduler_step_hook_steps_the_schedulers() -> None:
    calls: list[Any] = []

    class Custom(Classifier):
        def configure_optimizers(self) -> Any:
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, 1)}

        def lr_scheduler_step(self, scheduler: Any, metric: Any) -> None:
            calls.append((type(scheduler).__name__, metric))
            scheduler.step()

    fit(Custom(), epochs=2)
    assert calls == [("StepLR", None), ("StepLR", None)]


def test_configure_gradient_clipping_replaces_the_trainers_clipping() -> None:
    norms: list[tuple[int, float]] = []
    received: set[tuple[Any, Any]] = set()

    class Clipped(Classifier):
        def configure_gradient_clipping(
            self, optimizer: Any, gradient_clip_val: Any = None, gradient_clip_algorithm: Any = None
        ) -> None:
            received.add((gradient_clip_val, gradient_clip_algorithm))
            if self.trainer.global_step % 2 == 0:  # the hook decides: every other step only
                self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

        def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
            # The step's gradients, kept until the next step (global_step counts it).
            grads = [p.grad.flatten() for p in self.parameters() if p.grad is not None]
            norms.append((self.trainer.global_step - 1, float(torch.cat(grads).norm())))

    fit(Clipped(), gradient_clip_val=1e-3)
    assert received == {(1e-3, "norm")}
    assert all(norm <= 1e-3 * 1.0001 for step, norm in norms if step % 2 == 0)
    assert all(norm > 1e-3 for step, norm in norms if step % 2 == 1)  # not clipped there


def test_clip_gradients_refuses_a_value_other_than_the_trainers() -> None:
    # Lightning refuses it too: which of the two values should hold is unclear.
    class Conflicting(Classifier):
        def configure_gradient_clipping(self, optimizer: Any, *args: Any) -> None:
            self.clip_gradients(optimizer, gradient_clip_val=1e-3, gradient_clip_algorithm="norm")

    with pytest.raises(ValueError, match=r"Trainer\(gradient_clip_val=5.0\).*clip_gradients\("):
        fit(Conflicting(), gradient_clip_val=5.0)


# ------------------------------------------------------------ step arguments
def test_training_step_without_batch_idx() -> None:
    class NoIndex(Classifier):
        def training_step(self, batch: Any) -> torch.Tensor:  # type: ignore[override]
            return super().training_step(batch, 0)

    assert fit(NoIndex()).global_step == 4


def test_a_hook_set_to_none_counts_as_not_defined() -> None:
    class NoValidation(Classifier):
        validation_step = None  # type: ignore[assignment]

    model = NoValidation()
    assert not overrides(model, "validation_step")
    trainer = fit(model)
    # As in Lightning, fit then loads no validation loaders (nor calls val_dataloader).
    assert trainer.num_val_batches == [] and trainer.val_dataloaders is None
    assert "val/loss" not in trainer.callback_metrics
    plain = Classifier()
    plain.on_train_start = None  # type: ignore[assignment,method-assign]
    assert not overrides(plain, "on_train_start")


def test_predict_step_default_takes_a_dataloader_idx() -> None:
    class Plain(trainkit.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(8, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layer(x)  # type: ignore[no-any-return]

    data = torch.utils.data.DataLoader(torch.randn(8, 8), batch_size=4)
    out = trainkit.Trainer(**QUIET).predict(Plain(), [data, data])
    assert out is not None and len(out) == 2 and out[0][0].shape == (4, 2)


# ------------------------------------------------------------- module helpers
def test_logger_loggers_print_and_trainer_setter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}

    class Probe(Classifier):
        def on_train_start(self) -> None:
            seen["logger"], seen["loggers"] = self.logger, self.loggers
            seen["ranks"] = (self.global_rank, self.local_rank)
            self.print("hello from", self.global_rank)

    trainer = trainkit.Trainer(
        max_epochs=1,
        default_root_dir=tmp_path,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    model = Probe()
    trainer.fit(model, loader(blobs(32), 16))
    assert seen["logger"] is trainer.logger and seen["loggers"] == trainer.loggers
    assert seen["ranks"] == (0, 0) and "hello from 0" in capsys.readouterr().out
    detached = Classifier()
    assert detached.logger is None and detached.loggers == []
    detached.trainer = trainer
    assert detached.trainer is trainer
    detached.trainer = None
    with pytest.raises(RuntimeError, match="not attached"):
        _ = detached.trainer


def test_freeze_and_unfreeze() -> None:
    model = Classifier()
    model.freeze()
    assert not model.training and not any(p.requires_grad for p in model.parameters())
    model.unfreeze()
    assert model.training and all(p.requires_grad for p in model.parameters())


def test_hparams_initial_and_save_hyperparameters_forms() -> None:
    model = Classifier(lr=0.5)
    model.hparams.lr = 0.1
    assert model.hparams.lr == 0.1 and model.hparams_initial.lr == 0.5

    class FromDict(trainkit.Module):
        def __init__(self, config: dict[str, Any]) -> None:
            super().__init__()
            self.save_hyperparameters(config)

    assert FromDict({"a": 1, "b": "x"}).hparams == {"a": 1, "b": "x"}

    class FromNamespace(trainkit.Module):
        def __init__(self, args: argparse.Namespace) -> None:
            super().__init__()
            self.save_hyperparameters(args)

    assert FromNamespace(argparse.Namespace(depth=3)).hparams.depth == 3

    class Picked(trainkit.Module):
        def __init__(self, a: int = 1, b: int = 2, c: int = 3) -> None:
            super().__init__()
            self.save_hyperparameters("a", "c", logger=False)

    picked = Picked()
    assert picked.hparams == {"a": 1, "c": 3} and not picked.logs_hyperparams

    def record(module: trainkit.Module) -> None:
        # A helper __init__ calls: it names the __init__'s frame (Lightning's frame=).
        caller = inspect.currentframe()
        assert caller is not None and caller.f_back is not None
        module.save_hyperparameters(ignore="b", frame=caller.f_back)

    class ByHelper(trainkit.Module):
        def __init__(self, a: int = 1, b: int = 2) -> None:
            super().__init__()
            record(self)

    assert ByHelper(a=5).hparams == {"a": 5}
    with pytest.raises(RuntimeError, match="frame=, the frame of that __init__"):
        Picked().save_hyperparameters()  # outside __init__, no frame given
    for values in [(3.14,), (3.14, "a")]:  # neither names nor a config: Lightning's ValueError
        with pytest.raises(ValueError, match=r"takes argument names, or one dict.*\(float\)"):
            Picked().save_hyperparameters(*values)


def test_a_dataclass_module_records_its_init_fields_from_post_init() -> None:
    @dataclasses.dataclass(eq=False)  # eq=False: hashable, as nn.Module must be
    class Configured(trainkit.Module):
        width: int
        name: str = "net"
        cache: list[int] = dataclasses.field(default_factory=list, init=False)

        def __post_init__(self) -> None:
            super().__init__()
            self.save_hyperparameters(ignore="name")
            self.layer = torch.nn.Linear(8, self.width)

    model = Configured(width=3, name="x")
    assert model.hparams == {"width": 3} and model.hparams_initial == {"width": 3}


class Base(trainkit.Module):
    def __init__(self, width: int = 4, dropout: float = 0.1) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(8, width)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0]).square().mean()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Derived(Base):
    """Takes no dropout: drops the one its base class recorded."""

    def __init__(self, width: int = 4) -> None:
        super().__init__(width=width)
        self.remove_ignored_hparams(["dropout", "never_saved"])


def test_remove_ignored_hparams_drops_a_base_class_s_hyperparameters(tmp_path: Path) -> None:
    model = Derived(width=3)
    assert model.hparams == {"width": 3} and model.hparams_initial == {"width": 3}
    trainer = trainkit.Trainer(max_steps=1, default_root_dir=tmp_path, **QUIET)
    trainer.fit(model, loader(blobs(8)))
    path = tmp_path / "derived.ckpt"
    trainer.save_checkpoint(path)
    # The checkpoint no longer holds dropout, which Derived.__init__ would refuse.
    assert Derived.load_from_checkpoint(path).hparams == {"width": 3}


class Recording(trainkit.Module):
    """A base class that records the hyperparameters for its subclasses."""

    def __init__(self, inputs: int = 8, lr: float = 0.1, **kwargs: Any) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.lr = lr

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self(batch[0]).square().mean()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.lr)


class Wide(Recording):
    def __init__(self, hidden: int = 4, lr: float = 0.2, **kwargs: Any) -> None:
        super().__init__(lr=lr / 2, **kwargs)  # the base sees a value derived from lr
        self.net = torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def test_a_base_class_records_its_subclass_s_arguments_too(tmp_path: Path) -> None:
    # The subclass's own (hidden) and the value it was given (lr=0.6, not the 0.3 it
    # passed on) are recorded, as Lightning records them, so a reload has its shapes.
    model = Wide(hidden=16, lr=0.6, extra="kept")
    assert model.hparams == {"inputs": 8, "lr": 0.6, "extra": "kept", "hidden": 16}
    trainer = trainkit.Trainer(max_steps=1, default_root_dir=tmp_path, **QUIET)
    trainer.fit(model, loader(blobs(8)))
    trainer.save_checkpoint(tmp_path / "wide.ckpt")
    loaded = Wide.load_from_checkpoint(tmp_path / "wide.ckpt")
    assert loaded.net[0].out_features == 16 and loaded.lr == 0.3

    class Holder(trainkit.Module):
        def __init__(self, width: int = 5) -> None:
            super().__init__()
            self.inner = Recording(inputs=2)  # built inside: takes none of width

    assert Holder().inner.hparams == {"inputs": 2, "lr": 0.1}

    class Narrow(Recording):
        def __init__(self, hidden: int = 4, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.save_hyperparameters("lr", ignore=["hidden"])  # drops the base call's

    assert Narrow(hidden=3, lr=0.5, extra=1).hparams == {"inputs": 8, "lr": 0.5, "extra": 1}


def test_configure_callbacks_joins_and_replaces_the_trainers(tmp_path: Path) -> None:
    from trainkit.callbacks import EarlyStopping, ModelCheckpoint

    mine = EarlyStopping(monitor="val/loss", patience=100)
    saving = ModelCheckpoint(dirpath=tmp_path)

    class WithCallbacks(Classifier):
        def configure_callbacks(self) -> Any:
            return [saving, mine]

    trainer = trainkit.Trainer(
        max_epochs=1,
        callbacks=[EarlyStopping(monitor="val/acc", mode="max")],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(WithCallbacks(), loader(blobs(32), 16), loader(blobs(32), 16))
    assert trainer.early_stopping_callbacks == [mine]
    assert trainer.callbacks[-1] is saving  # checkpointing runs last
    assert saving.last_model_path or any(tmp_path.glob("*.ckpt"))


def test_model_eval_hooks_are_called() -> None:
    calls: list[str] = []

    class Probe(Classifier):
        def on_validation_model_eval(self) -> None:
            calls.append("eval")
            super().on_validation_model_eval()

        def on_validation_model_train(self) -> None:
            calls.append("train")
            super().on_validation_model_train()

    fit(Probe(), num_sanity_val_steps=0)
    assert calls == ["eval", "train"]


def test_to_torchscript_and_example_input_array(tmp_path: Path) -> None:
    model = Classifier()
    model.example_input_array = torch.randn(2, 8)
    traced = model.to_torchscript(tmp_path / "m.pt", method="trace")
    x = torch.randn(3, 8)
    assert torch.allclose(traced(x), model(x)) and (tmp_path / "m.pt").is_file()
    scripted = model.to_torchscript()
    assert torch.allclose(scripted(x), model(x))
    # Lightning's words (projects' tests match them).
    with pytest.raises(
        ValueError, match=r"Choosing method=`trace` requires either `example_inputs`"
    ):
        Classifier().to_torchscript(method="trace")
    with pytest.raises(
        ValueError, match="only supports 'script' or 'trace', but value given was: jit"
    ):
        Classifier().to_torchscript(method="jit")


def test_a_fitted_module_exports_and_keeps_its_trainer(tmp_path: Path) -> None:
    # After fit the Module links to its Trainer, which TorchScript cannot hold.
    model = Classifier()
    trainer = trainkit.Trainer(max_steps=2, **QUIET)
    trainer.fit(model, loader(blobs(64)))
    x = torch.randn(3, 8)
    assert torch.allclose(model.to_torchscript()(x), model(x))
    assert torch.allclose(model.to_torchscript()(x), model(x))  # and again
    if importlib.util.find_spec("onnx") is not None:  # an optional package
        model.to_onnx(tmp_path / "m.onnx", x)
    assert model.trainer is trainer and model.global_step == 2


def test_to_torchscript_gives_every_submodule_its_own_mode_back() -> None:
    model = Classifier()
    model.example_input_array = torch.randn(2, 8)
    first_layer = next(part for part in model.modules() if isinstance(part, torch.nn.Linear))
    first_layer.eval()  # e.g. a frozen part
    model.to_torchscript(method="trace")
    assert [part.training for part in model.modules()] == [
        part is not first_layer for part in model.modules()
    ]


def test_optimizer_step_override_warms_up_the_learning_rate() -> None:
    seen: list[float] = []

    class WarmUp(Classifier):
        def optimizer_step(
            self, epoch: int, batch_idx: int, optimizer: Any, optimizer_closure: Any = None
        ) -> None:
            scale = min(1.0, (self.trainer.global_step + 1) / 4)
            for group in optimizer.param_groups:
                group["lr"] = 0.1 * scale
            seen.append(optimizer.param_groups[0]["lr"])
            optimizer.step(closure=optimizer_closure)

    model = WarmUp()
    before = [p.detach().clone() for p in model.parameters()]
    fit(model, epochs=2)
    assert seen == pytest.approx([0.025, 0.05, 0.075, 0.1, 0.1, 0.1, 0.1, 0.1])
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_optimizer_zero_grad_and_backward_overrides_are_called() -> None:
    calls: list[str] = []

    class Custom(Classifier):
        def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
            calls.append("backward")
            loss.backward(*args, **kwargs)

        def optimizer_zero_grad(self, epoch: int, batch_idx: int, optimizer: Any) -> None:
            calls.append("zero_grad")
            optimizer.zero_grad(set_to_none=False)

    fit(Custom())
    # The last step's gradients are cleared before the next backward, as in Lightning.
    assert calls == ["zero_grad", "backward"] * 4


@pytest.mark.parametrize(
    ("clipping", "expected"),
    [
        ({"gradient_clip_val": 0.5, "gradient_clip_algorithm": "value"}, (0.5, "value")),
        ({"callbacks": [GradientClipping(max_norm=1.0)]}, (1.0, "norm")),
        ({"callbacks": [GradientClipping(max_value=0.25)]}, (0.25, "value")),
        ({}, (None, "norm")),
    ],
    ids=["arguments", "callback-norm", "callback-value", "none"],
)
def test_configure_gradient_clipping_receives_the_clipping_asked_for(
    clipping: dict[str, Any], expected: tuple[float | None, str]
) -> None:
    # A GradientClipping callback is the same mechanism as gradient_clip_val: the
    # hook (and clip_gradients' defaults, and the Trainer's properties) see its values.
    seen: list[tuple[Any, Any]] = []
    norms: list[float] = []

    class Clipped(Classifier):
        def configure_gradient_clipping(
            self, optimizer: Any, gradient_clip_val: Any = None, gradient_clip_algorithm: Any = None
        ) -> None:
            seen.append((gradient_clip_val, gradient_clip_algorithm))
            self.clip_gradients(optimizer)  # the defaults: the same settings

        def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
            grads = torch.cat([p.grad.flatten() for p in self.parameters() if p.grad is not None])
            norms.append(float(grads.abs().max() if expected[1] == "value" else grads.norm()))

    trainer = fit(Clipped(), **clipping)
    assert set(seen) == {expected}
    assert (trainer.gradient_clip_val, trainer.gradient_clip_algorithm) == expected
    if expected[0] is not None:
        assert max(norms) <= expected[0] * 1.0001


def test_a_trained_module_pickles_without_its_trainer_and_the_trainer_deep_copies() -> None:
    import copy
    import io

    model = Classifier()
    trainer = trainkit.Trainer(fast_dev_run=True, **QUIET)
    trainer.fit(model, loader(blobs(64)))
    trainer.predict(model, loader(blobs(32)))
    buffer = io.BytesIO()
    torch.save(model, buffer)  # as projects save a model for inference
    buffer.seek(0)
    restored = torch.load(buffer, weights_only=False)
    assert restored._trainer is None and model.trainer is trainer  # the original keeps it
    assert copy.deepcopy(model)._trainer is None
    copied = copy.deepcopy(trainer)  # a project keeping the best of several runs does this
    assert copied.global_step == trainer.global_step == 1

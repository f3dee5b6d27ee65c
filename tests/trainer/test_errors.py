"""Mistakes a user can make stop with a message that names the problem and the fix."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader


def _fit(model: trainkit.Module, **kwargs: Any) -> None:
    trainkit.Trainer(max_epochs=1, **{**QUIET, **kwargs}).fit(model, loader(blobs(64), 32))


def test_training_step_returning_none_skips_the_batch_and_says_so() -> None:
    # Lightning's documented meaning of None in automatic optimization: skip the batch.
    class SkipsOdd(Classifier):
        def __init__(self) -> None:
            super().__init__()
            self.outputs: list[Any] = []

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            loss = super().training_step(batch, batch_idx)
            return None if batch_idx % 2 else loss

        def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
            self.outputs.append(sorted(outputs))

    model = SkipsOdd()
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    with pytest.warns(
        UserWarning, match=r"^`training_step` returned `None`\. If this was on purpose.*step 1:"
    ):
        trainer.fit(model, loader(blobs(128), 32))
    assert model.outputs == [["loss"], [], ["loss"], []]
    assert trainer.global_step == 4  # every optimizer step counts, as in Lightning


@pytest.mark.parametrize("precision", ["32-true", "16-mixed"])
def test_a_skipped_batch_leaves_the_weights_as_they_are_and_still_steps(precision: str) -> None:
    # As in Lightning: the optimizer step and its hooks run, on no gradients, so a step
    # scheduler follows the optimizer (torch does not warn of the reverse order); the
    # float16 scaler, with no gradients to check, steps nothing (torch then warns).
    class SkipsAll(Classifier):
        steps = 0

        def training_step(self, batch: Any, batch_idx: int) -> None:
            super().training_step(batch, batch_idx)

        def on_before_optimizer_step(self, optimizer: Any) -> None:
            self.steps += 1

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
            return [optimizer], [{"scheduler": scheduler, "interval": "step"}]

    model = SkipsAll()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = trainkit.Trainer(max_epochs=1, precision=precision, **QUIET)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        trainer.fit(model, loader(blobs(128), 32))
    messages = [str(w.message) for w in said]
    assert sum(m.startswith("`training_step` returned `None`") for m in messages) == 1
    assert bool([m for m in messages if "lr_scheduler.step()" in m]) == (precision == "16-mixed")
    assert model.steps == trainer.global_step == 4
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_training_step_returning_a_non_scalar_loss() -> None:
    class VectorLoss(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            return torch.nn.functional.cross_entropy(self(x), y, reduction="none")

    with pytest.raises(ValueError, match=r"loss of shape \(32,\) at step 0.*must be a scalar"):
        _fit(VectorLoss())


def test_training_step_returning_a_float() -> None:
    class FloatLoss(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> Any:
            return super().training_step(batch, batch_idx).item()

    with pytest.raises(TypeError, match=r"got float.*not `loss.item\(\)`"):
        _fit(FloatLoss())


def test_training_step_dict_without_loss_and_detached_loss() -> None:
    class DictNoLoss(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> Any:
            return {"total": super().training_step(batch, batch_idx)}

    with pytest.raises(ValueError, match=r"without a 'loss' entry \(keys: \['total'\]\)"):
        _fit(DictNoLoss())

    class Detached(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> Any:
            return super().training_step(batch, batch_idx).detach()

    with pytest.raises(ValueError, match="does not require grad") as raised:
        _fit(Detached())
    # Also the RuntimeError torch's backward raises, which code written for Lightning catches.
    assert isinstance(raised.value, RuntimeError)

    class Unreduced(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            return torch.nn.functional.cross_entropy(self(x), y, reduction="none")

    with pytest.raises(RuntimeError, match=r"loss of shape \(\d+,\).*Reduce it"):
        _fit(Unreduced())


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ([], "configure_optimizers returned list"),
        ("adam", "configure_optimizers returned str"),
        ({"lr_scheduler": None}, "it needs 'optimizer'"),
    ],
)
def test_configure_optimizers_returning_nothing_usable(returned: Any, message: str) -> None:
    class Bad(Classifier):
        def configure_optimizers(self) -> Any:
            return returned

    with pytest.raises(TypeError, match=message.replace("(", r"\(")):
        _fit(Bad())


def test_configure_optimizers_returning_none_warns_and_trains_without_updates() -> None:
    # Lightning's documented meaning of None: the fit runs with no optimizer.
    class NoUpdates(Classifier):
        def configure_optimizers(self) -> Any:
            return None

    model = NoUpdates()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    with pytest.warns(UserWarning, match="returned `None`, this fit will run with no optimizer"):
        trainer.fit(model, loader(blobs(64), 32))
    assert trainer.global_step == 2
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_configure_optimizers_missing_entirely() -> None:
    class NoOptim(trainkit.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(8, 3)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self.layer(batch[0]).sum()

    with pytest.raises(NotImplementedError, match="has no configure_optimizers"):
        _fit(NoOptim())


def test_several_optimizers_need_manual_optimization() -> None:
    class Two(Classifier):
        def configure_optimizers(self) -> Any:
            return [torch.optim.SGD(self.parameters(), lr=0.1)] * 2

    with pytest.raises(ValueError, match="automatic_optimization = False"):
        _fit(Two())
    # Lightning raises a RuntimeError: code written for it catches that, in its words.
    with pytest.raises(RuntimeError, match=r"^Training with multiple optimizers is only supported"):
        _fit(Two())


def test_unknown_strategy_and_accelerator_names() -> None:
    with pytest.raises(
        ValueError, match=r"Unknown strategy 'singel_device'.*Did you mean 'single_device'"
    ):
        trainkit.Trainer(strategy="singel_device")
    with pytest.raises(ValueError, match=r"Unknown accelerator 'tpu'; valid accelerators are"):
        trainkit.Trainer(accelerator="tpu")


def test_cuda_requested_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"CUDA is not available.*accelerator='cpu'"):
        trainkit.Trainer(accelerator="cuda")


def test_more_devices_than_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(ValueError, match=r"2 visible.*Ask for fewer devices"):
        trainkit.Trainer(accelerator="cuda", devices=4)
    with pytest.raises(ValueError, match="2 visible"):
        trainkit.Trainer(accelerator="cuda", devices=[3])
    with pytest.raises(ValueError, match="devices=0 must be at least 1"):
        trainkit.Trainer(accelerator="cpu", devices=0)


class _Indexable:
    def __getitem__(self, index: int) -> int:  # list() of it would never end
        return index


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_epochs": -2}, ValueError, r"max_epochs=-2 is invalid: it must be >= -1"),
        ({"max_steps": -5}, ValueError, r"max_steps=-5 is invalid"),
        ({"max_epochs": 2.5}, TypeError, "max_epochs must be an integer"),
        ({"limit_train_batches": 1.5}, ValueError, r"limit_train_batches=1.5 is a fraction"),
        ({"limit_val_batches": -1}, ValueError, "limit_val_batches=-1 must be >= 0"),
        ({"val_check_interval": -1}, ValueError, "val_check_interval=-1 must be a positive"),
        ({"val_check_interval": 1.5}, ValueError, r"must be a fraction in \[0, 1\]"),
        ({"log_every_n_steps": 0}, ValueError, "log_every_n_steps=0 is invalid"),
        ({"gradient_clip_val": -1.0}, ValueError, r"gradient_clip_val=-1.0 must be a positive"),
        ({"fast_dev_run": -1}, ValueError, "fast_dev_run must be a bool"),
        ({"precision": "8-true"}, ValueError, "precision='8-true' is not supported"),
        ({"callbacks": [object()]}, TypeError, "not a callback: pass instances"),
        ({"logger": "tensorboard"}, TypeError, "logger must be a trainkit Logger"),
        # An object with __getitem__ and no __iter__ is one object, not a sequence to list.
        ({"logger": _Indexable()}, TypeError, "logger must be a trainkit Logger, got _Indexable"),
    ],
)
def test_bad_trainer_arguments(kwargs: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        trainkit.Trainer(**kwargs)


@pytest.mark.parametrize("off", [None, 0, 0.0])
def test_gradient_clip_val_none_or_zero_clips_nothing(off: float | None) -> None:
    # 0 is how many configs say "no clipping" (Lightning reads it so).
    trainer = trainkit.Trainer(max_steps=1, gradient_clip_val=off, **QUIET)
    trainer.fit(Classifier(), loader(blobs(64), 32))
    assert trainer.gradient_clip_val == off
    assert trainer.step_slots.clipping is None


def test_val_check_interval_larger_than_an_epoch() -> None:
    expected = r"val_check_interval=50 is larger than the 2 training.*must be less than or equal"
    with pytest.raises(ValueError, match=expected):
        trainkit.Trainer(max_epochs=1, val_check_interval=50, **QUIET).fit(
            Classifier(), loader(blobs(64), 32), loader(blobs(64), 32)
        )


def test_val_check_interval_0_is_refused_only_by_a_fit_that_trains_with_validation() -> None:
    # Accepted when built, as in Lightning: a fit with max_steps=0 never reads it
    # (a project sets min(val_check_steps, max_steps)); Lightning fails with a
    # ZeroDivisionError where a batch trains, trainkit says what to pass.
    trainer = trainkit.Trainer(max_steps=0, val_check_interval=0, **QUIET)
    trainer.fit(Classifier(), loader(blobs(64), 32), loader(blobs(64), 32))
    assert trainer.global_step == 0
    trainkit.Trainer(max_steps=2, val_check_interval=0, **QUIET).fit(
        Classifier(), loader(blobs(64), 32)
    )  # nothing to validate: nothing to refuse
    with pytest.raises(ValueError, match=r"val_check_interval=0 is no number of batches"):
        trainkit.Trainer(max_steps=2, val_check_interval=0, **QUIET).fit(
            Classifier(), loader(blobs(64), 32), loader(blobs(64), 32)
        )


def test_fit_without_data_or_with_a_plain_module() -> None:
    with pytest.raises(ValueError, match=r"Trainer.fit needs training data"):
        trainkit.Trainer(**QUIET).fit(Classifier())
    with pytest.raises(TypeError, match=r"expects a trainkit.Module, got Linear"):
        trainkit.Trainer(**QUIET).fit(torch.nn.Linear(2, 2), loader(blobs(64), 32))  # type: ignore[arg-type]


def test_logging_the_same_name_with_other_options() -> None:
    class Clash(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            self.log("x", 1.0, prog_bar=batch_idx == 0)
            return super().training_step(batch, batch_idx)

    with pytest.raises(ValueError, match=r"self.log\('x'\) was called with different options"):
        _fit(Clash())

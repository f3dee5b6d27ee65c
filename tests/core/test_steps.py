"""How the loops call the user's steps (trainkit/core/steps.py)."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.core.steps import fit_step_arguments


class BatchOnly(trainkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []

    def training_step(self, batch: Any) -> torch.Tensor:  # no batch_idx: allowed
        self.seen.append(batch)
        return torch.zeros(())


def _wrap_as_fsdp_does(module: torch.nn.Module, name: str) -> None:
    # What torch's register_fsdp_forward_method does: the instance's method becomes a
    # wrapper of the bound method (functools.wraps copies its signature), bound again.
    original = getattr(module, name)

    @functools.wraps(original)
    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    setattr(module, name, wrapped.__get__(module, type(module)))


def test_a_step_without_batch_idx_gets_the_batch_alone() -> None:
    module = BatchOnly()
    fit_step_arguments(module.training_step, module.training_step)("batch", 3, 0)
    assert module.seen == ["batch"]


def test_a_strategy_wrapping_the_instances_method_does_not_change_the_arguments() -> None:
    module = BatchOnly()
    _wrap_as_fsdp_does(module, "training_step")
    fit_step_arguments(module.training_step, module.training_step)("batch", 3, 0)
    assert module.seen == ["batch"]


def test_a_step_taking_the_dataloader_iterator_is_refused_saying_what_to_take() -> None:
    def training_step(dataloader_iter: Any) -> Any:
        return next(dataloader_iter)

    with pytest.raises(NotImplementedError, match=r"training_step\(dataloader_iter\).*batch_idx"):
        fit_step_arguments(training_step, training_step)


class WrittenForLightning1(Classifier):
    """Epoch-end hooks Lightning 2.0 removed: they would never run."""

    def training_epoch_end(self, outputs: Any) -> None:
        raise AssertionError("never called")

    def test_epoch_end(self, outputs: Any) -> None:
        raise AssertionError("never called")


def test_a_module_with_epoch_end_hooks_lightning_removed_is_refused_naming_the_new_hook() -> None:
    model = WrittenForLightning1()
    with pytest.raises(
        NotImplementedError,
        match=r"Support for `training_epoch_end` has been removed in v2.0.0. "
        r"`WrittenForLightning1` implements this method. You can use the `on_train_epoch_end`",
    ):
        trainkit.Trainer(max_epochs=1, **QUIET).fit(model, loader(blobs(64)))
    with pytest.raises(NotImplementedError, match=r"`test_epoch_end`.*`on_test_epoch_end`"):
        trainkit.Trainer(**QUIET).test(model, loader(blobs(64)), verbose=False)
    # Validation has no removed hook here: it runs.
    assert trainkit.Trainer(**QUIET).validate(model, loader(blobs(64)), verbose=False)


class SteppedPerOptimizer(Classifier):
    """Lightning 1.x's multiple optimizers: training_step called once per optimizer."""

    def __init__(self) -> None:
        super().__init__()
        self.started = False

    def on_fit_start(self) -> None:
        self.started = True

    def training_step(  # type: ignore[override]
        self, batch: Any, batch_idx: int, optimizer_idx: int = 0
    ) -> torch.Tensor:
        return super().training_step(batch, batch_idx)


def test_a_training_step_taking_optimizer_idx_is_refused_before_the_fit_starts() -> None:
    # Called with two arguments, it would train only its optimizer_idx=0 branch.
    model = SteppedPerOptimizer()
    with pytest.raises(
        RuntimeError, match=r"only supported with manual optimization.*once a batch"
    ):
        trainkit.Trainer(max_epochs=1, **QUIET).fit(model, loader(blobs(64)))
    assert not model.started and model.global_step == 0


@pytest.mark.parametrize(
    ("attribute", "entry", "said"),
    [
        ("training_step", "fit", r"No `training_step\(\)` method defined to run `Trainer.fit`"),
        ("configure_optimizers", "fit", r"No `configure_optimizers\(\)` method defined"),
        ("test_step", "test", r"No `test_step\(\)` method defined to run `Trainer.test`"),
        ("validation_step", "validate", r"validation_step"),
    ],
)
def test_a_step_set_to_none_where_the_run_needs_it_is_refused_naming_it(
    attribute: str, entry: str, said: str
) -> None:
    # Lightning's code turns a hook off by setting it to None; a run that needs it says so.
    model = Classifier()
    setattr(model, attribute, None)
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    run = getattr(trainer, entry)
    with pytest.raises((NotImplementedError, ValueError), match=said):
        run(model, loader(blobs(64)), **({} if entry == "fit" else {"verbose": False}))


def test_validation_step_set_to_none_turns_fit_s_validation_off() -> None:
    model = Classifier()
    model.validation_step = None  # type: ignore[method-assign,assignment]
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    with pytest.warns(UserWarning, match="but have no `validation_step`. Skipping val loop"):
        trainer.fit(model, loader(blobs(64)), loader(blobs(32)))
    assert "val/loss" not in trainer.callback_metrics

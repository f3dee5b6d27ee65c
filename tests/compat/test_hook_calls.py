"""Hooks as Lightning documents them: order, arguments, batch transfer, skipped runs."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from tests import helpers

QUIET: dict[str, Any] = {**helpers.QUIET, "num_sanity_val_steps": 0}


def rows(n: int = 8) -> DataLoader[Any]:
    return DataLoader(TensorDataset(torch.arange(n).float().unsqueeze(1)), batch_size=4)


class Tiny(trainkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0]).sum()

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        self.log("v", self.layer(batch[0]).sum())

    def predict_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
        return self.layer(batch[0])

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class TransferRecorder(Tiny):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, int]] = []

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        self.seen.append(("before", dataloader_idx))
        return [batch[0] * 0]  # the changed batch is what the step receives

    def transfer_batch_to_device(
        self, batch: Any, device: torch.device, dataloader_idx: int
    ) -> Any:
        self.seen.append(("transfer", dataloader_idx))
        return super().transfer_batch_to_device(batch, device, dataloader_idx)

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        self.seen.append(("after", dataloader_idx))
        return batch

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        assert torch.equal(batch[0], torch.zeros_like(batch[0]))
        return super().training_step(batch, batch_idx)


def test_batch_transfer_hooks_run_in_order_for_every_batch_with_the_dataloader_index() -> None:
    model = TransferRecorder()
    trainer = trainkit.Trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=1, **QUIET)
    trainer.fit(model, rows(), [rows(), rows()])
    assert model.seen == [
        ("before", 0), ("transfer", 0), ("after", 0),  # the training batch
        ("before", 0), ("transfer", 0), ("after", 0),  # validation, first loader
        ("before", 1), ("transfer", 1), ("after", 1),  # validation, second loader
    ]  # fmt: skip


def test_a_datamodules_batch_transfer_hook_is_used_instead_of_the_modules() -> None:
    calls: list[str] = []

    class Data(trainkit.DataModule):
        def train_dataloader(self) -> Any:
            return rows()

        def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
            calls.append("datamodule")
            return batch

    class Model(Tiny):
        def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
            calls.append("module")
            return batch

    trainkit.Trainer(max_epochs=1, limit_train_batches=2, **QUIET).fit(Model(), datamodule=Data())
    assert calls == ["datamodule", "datamodule"]


def test_validate_with_limit_val_batches_zero_runs_nothing_and_returns_an_empty_list() -> None:
    calls: list[str] = []

    class Model(Tiny):
        def val_dataloader(self) -> Any:
            calls.append("val_dataloader")
            return rows()

        def on_validation_start(self) -> None:
            calls.append("on_validation_start")

    trainer = trainkit.Trainer(limit_val_batches=0, **QUIET)
    assert trainer.validate(Model(), verbose=False) == []
    assert calls == []


def test_one_eval_loader_calls_batch_hooks_without_dataloader_idx_and_setup_with_stage() -> None:
    calls: list[tuple[Any, ...]] = []

    class Recorder(trainkit.Callback):
        def setup(self, *args: Any, **kwargs: Any) -> None:
            calls.append(("setup", kwargs))

        def on_validation_batch_start(self, *args: Any) -> None:
            calls.append(("batch_start", len(args)))

    trainkit.Trainer(callbacks=[Recorder()], **QUIET).validate(Tiny(), rows(), verbose=False)
    # (trainer, module, batch, batch_idx): no dataloader_idx with one loader
    assert calls == [("setup", {"stage": "validate"}), ("batch_start", 4), ("batch_start", 4)]


def test_each_run_starts_without_gradients() -> None:
    model = Tiny()
    model.layer.weight.grad = torch.ones_like(model.layer.weight)
    trainkit.Trainer(**QUIET).validate(model, rows(), verbose=False)
    assert model.layer.weight.grad is None


def test_validate_restores_submodule_modes_and_runs_the_model_train_hook() -> None:
    calls: list[str] = []

    class Model(Tiny):
        def __init__(self) -> None:
            super().__init__()
            self.frozen = torch.nn.BatchNorm1d(1)

        def on_validation_model_train(self) -> None:
            calls.append("on_validation_model_train")

    model = Model()
    model.train()
    model.frozen.eval()
    trainkit.Trainer(**QUIET).validate(model, rows(), verbose=False)
    assert model.training and model.layer.training and not model.frozen.training
    # The modes are restored, and the Module's own hook runs after a validate() call
    # too, as Lightning's does (it was called only for validation inside fit).
    assert calls == ["on_validation_model_train"]


def test_a_name_logged_per_step_then_in_the_epoch_hook_takes_the_later_value() -> None:
    class Model(Tiny):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            self.log("shared", 100.0, prog_bar=True)
            return super().training_step(batch, batch_idx)

        def on_train_epoch_end(self) -> None:
            self.log("shared", 111.0, prog_bar=True)
            self.log(f"epoch_{self.current_epoch}", float(self.current_epoch), prog_bar=True)

    trainer = trainkit.Trainer(max_epochs=3, limit_train_batches=2, **QUIET)
    trainer.fit(Model(), rows())
    bar = trainer.progress_bar_metrics
    assert float(trainer.callback_metrics["shared"]) == 111.0
    # The bar keeps the epoch values of earlier epochs, as Lightning's does.
    assert {bar["epoch_0"], bar["epoch_1"], bar["epoch_2"], bar["shared"]} == {0.0, 1.0, 2.0, 111.0}


def test_hooks_wrapped_on_the_instance_count_as_the_methods_they_wrap() -> None:
    # Instrumentation wraps every hook per instance (functools.partial with
    # update_wrapper, as Lightning's own hook tests do): a wrapped base hook is not an
    # override, so a model that overrides configure_model is not told it also
    # overrides configure_sharded_model.
    import functools

    calls: list[str] = []

    class Traced(Tiny):
        def __init__(self) -> None:
            super().__init__()
            for name in ("configure_sharded_model", "configure_model", "on_fit_start"):
                hook = getattr(self, name)

                def traced(hook_name: str, hook: Any, *args: Any) -> Any:
                    calls.append(hook_name)
                    return hook(*args)

                wrapper = functools.partial(traced, name, hook)
                functools.update_wrapper(wrapper, hook)
                setattr(self, name, wrapper)

        def configure_model(self) -> None:
            calls.append("own configure_model")

    trainkit.Trainer(max_steps=1, **helpers.QUIET).fit(Traced(), rows())
    assert calls == ["configure_model", "own configure_model", "on_fit_start"]


def test_the_module_is_zero_graded_where_lightning_does_it() -> None:
    # At the start of the stage: after on_fit_start when fitting, after the set-up
    # hooks when evaluating.
    from tests.helpers import QUIET, Classifier, blobs, loader

    calls: list[str] = []

    class Recording(Classifier):
        def setup(self, stage: str) -> None:
            calls.append("setup")

        def configure_model(self) -> None:
            calls.append("configure_model")

        def configure_optimizers(self) -> Any:
            calls.append("configure_optimizers")
            return super().configure_optimizers()

        def on_fit_start(self) -> None:
            calls.append("on_fit_start")

        def on_train_start(self) -> None:
            calls.append("on_train_start")

        def on_validation_start(self) -> None:
            calls.append("on_validation_start")

        def zero_grad(self, set_to_none: bool = True) -> None:
            calls.append("zero_grad")
            super().zero_grad(set_to_none)

    model, data = Recording(), loader(blobs(16), 16)
    trainkit.Trainer(max_epochs=1, **QUIET).fit(model, data)
    fit = ["setup", "configure_model", "configure_optimizers", "on_fit_start", "zero_grad"]
    assert calls == [*fit, "on_train_start"]
    calls.clear()
    trainkit.Trainer(**QUIET).validate(model, data, verbose=False)
    assert calls == ["setup", "configure_model", "zero_grad", "on_validation_start"]

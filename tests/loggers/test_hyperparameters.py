"""What fit writes to the loggers as hyperparameters: the Module's and the DataModule's."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import trainkit

from .. import helpers


class Net(trainkit.Module):
    def __init__(self, lr: float = 0.1, width: int = 2, save: bool = True) -> None:
        super().__init__()
        if save:
            self.save_hyperparameters()
        self.layer = torch.nn.Linear(width, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0]).sum()

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Data(trainkit.DataModule):
    def __init__(self, batch_size: int = 2, width: int = 2, log: bool = True) -> None:
        super().__init__()
        self.save_hyperparameters("batch_size", "width", logger=log)

    def train_dataloader(self) -> DataLoader[Any]:
        width = self.hparams.width
        return DataLoader(TensorDataset(torch.randn(4, width)), batch_size=self.hparams.batch_size)


def fit(model: Net, data: Data, **options: Any) -> list[dict[str, Any]]:
    logger = helpers.MemoryLogger()
    trainer = trainkit.Trainer(max_steps=1, **{**helpers.QUIET, "logger": logger, **options})
    trainer.fit(model, datamodule=data)
    return logger.hyperparameters


def test_the_module_and_datamodule_hyperparameters_are_written_together() -> None:
    assert fit(Net(lr=0.5), Data(batch_size=2)) == [
        {"lr": 0.5, "width": 2, "save": True, "batch_size": 2}
    ]


def test_a_datamodule_alone_or_turned_off_counts_as_lightning_counts_it() -> None:
    assert fit(Net(save=False), Data(batch_size=2)) == [{"batch_size": 2, "width": 2}]
    assert fit(Net(lr=0.5), Data(log=False)) == [{"lr": 0.5, "width": 2, "save": True}]
    assert fit(Net(save=False), Data(log=False)) == []


def test_one_name_with_two_values_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match=r"hyperparameter 'width', with different values \(3"):
        fit(Net(width=3), Data(width=2))


def test_the_loggers_get_the_values_given_not_those_changed_since() -> None:
    # As Lightning's: hparams_initial, what __init__ was given.
    model = Net(lr=0.5)
    model.hparams.lr = -1.0
    assert fit(model, Data()) == [{"lr": 0.5, "width": 2, "save": True, "batch_size": 2}]


def test_enable_autolog_hparams_false_writes_none() -> None:
    assert fit(Net(lr=0.5), Data(), enable_autolog_hparams=False) == []


class CallOrderLogger(helpers.MemoryLogger):
    """Records, in one list with the Module's hooks, every call the Trainer makes."""

    def __init__(self, calls: list[str]) -> None:
        super().__init__()
        self.calls = calls

    def log_hyperparams(self, params: Any) -> None:
        super().log_hyperparams(params)
        self.calls.append(f"log_hyperparams {sorted(params)}")

    def log_graph(self, model: Any, input_array: Any = None) -> None:
        self.calls.append("log_graph")

    def save(self) -> None:
        self.calls.append("save")


class HookedNet(Net):
    def __init__(self, calls: list[str]) -> None:
        super().__init__()
        self.calls = calls

    def on_fit_start(self) -> None:
        self.calls.append("on_fit_start")

    def on_validation_start(self) -> None:
        self.calls.append("on_validation_start")

    def on_test_start(self) -> None:
        self.calls.append("on_test_start")

    def on_predict_start(self) -> None:
        self.calls.append("on_predict_start")

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val", self.layer(batch[0]).sum())

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self.log("test", self.layer(batch[0]).sum())

    def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0])


def test_every_stage_writes_the_hyperparameters_and_graph_as_lightning_does() -> None:
    # Lightning logs them at the start of each fit, validate, test and predict (fit:
    # after on_fit_start, so a callback's on_fit_start may still change the
    # logger), then saves the logger.
    calls: list[str] = []
    model = HookedNet(calls)
    loader = DataLoader(TensorDataset(torch.randn(4, 2)), batch_size=2)
    trainer = trainkit.Trainer(max_steps=1, **{**helpers.QUIET, "logger": CallOrderLogger(calls)})
    # calls, HookedNet's own argument, too: Net's save_hyperparameters() records it.
    logged = ["log_hyperparams ['calls', 'lr', 'save', 'width']", "log_graph", "save"]
    trainer.fit(model, loader)
    assert calls[: 1 + len(logged)] == ["on_fit_start", *logged]
    for stage, start in (("validate", "on_validation_start"), ("test", "on_test_start")):
        calls.clear()
        getattr(trainer, stage)(model, loader)
        assert calls[: len(logged) + 1] == [*logged, start], stage
    calls.clear()
    trainer.predict(model, loader)
    assert calls[: len(logged) + 1] == [*logged, "on_predict_start"]


def test_without_saved_hyperparameters_the_graph_is_still_offered() -> None:
    calls: list[str] = []
    model = Net(save=False)
    trainer = trainkit.Trainer(max_steps=1, **{**helpers.QUIET, "logger": CallOrderLogger(calls)})
    trainer.fit(model, DataLoader(TensorDataset(torch.randn(4, 2)), batch_size=2))
    assert calls[:2] == ["log_graph", "save"]
    assert not any(call.startswith("log_hyperparams") for call in calls)

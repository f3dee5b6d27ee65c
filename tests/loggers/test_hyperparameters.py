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


def test_enable_autolog_hparams_false_writes_none() -> None:
    assert fit(Net(lr=0.5), Data(), enable_autolog_hparams=False) == []

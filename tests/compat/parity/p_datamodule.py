"""A DataModule's hooks, state and hyperparameters through fit, test and a resume."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset, random_split

from tests.compat.parity._probe import Record, framework

L, _ = framework()
record = Record()
calls: list[Any] = []


class Data(L.LightningDataModule):  # type: ignore[name-defined,misc]
    def __init__(self, batch_size: int = 4) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False)
        self.train_set: Any = None
        self.state = 0

    def prepare_data(self) -> None:
        calls.append("prepare_data")

    def setup(self, stage: str) -> None:
        calls.append(("setup", stage == self.trainer.state.fn))
        if self.train_set is None:
            data = TensorDataset(torch.randn(20, 2), torch.randn(20, 1))
            parts = random_split(data, [12, 4, 4], generator=torch.Generator().manual_seed(0))
            self.train_set, self.val_set, self.test_set = parts

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.train_set, batch_size=self.hparams.batch_size)

    def val_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.val_set, batch_size=self.hparams.batch_size)

    def test_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.test_set, batch_size=self.hparams.batch_size)

    def teardown(self, stage: str) -> None:
        calls.append("teardown")

    def state_dict(self) -> dict[str, Any]:
        return {"state": self.state + 1}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.state = state_dict["state"]
        calls.append(("load_state_dict", state_dict))

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        calls.append("before_transfer")
        return batch


class Model(L.LightningModule):  # type: ignore[name-defined,misc]
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        record["datamodule_seen"] = [
            type(self.trainer.datamodule).__name__,
            self.trainer.datamodule.hparams.batch_size,
        ]
        return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1]))

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self.log("test_loss", torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1]))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


QUIET = {"logger": False, "enable_progress_bar": False, "enable_model_summary": False}
data = Data()
record["hparams"] = dict(data.hparams)
record["prepare_data_per_node"] = data.prepare_data_per_node
trainer = L.Trainer(
    max_epochs=2, callbacks=[L.callbacks.ModelCheckpoint(dirpath="ck", save_last=True)], **QUIET
)
torch.manual_seed(1)
model = Model()
trainer.fit(model, datamodule=data)
record["test"] = trainer.test(model, datamodule=data, verbose=False)
record["test_last"] = trainer.test(datamodule=data, verbose=False, ckpt_path="last")
saved = torch.load("ck/last.ckpt", weights_only=False)
record["saved"] = [
    saved.get("Data"),
    saved.get("datamodule_hyper_parameters"),
    saved.get("datamodule_hparams_name"),
]
again = Data()
torch.manual_seed(1)
L.Trainer(max_epochs=3, enable_checkpointing=False, **QUIET).fit(
    Model(), datamodule=again, ckpt_path="ck/last.ckpt"
)
record["resumed_state"] = again.state
record["calls"] = [
    c for i, c in enumerate(calls) if c != "before_transfer" or calls[i - 1] != "before_transfer"
]
record.emit()

"""Lightning's documented utilities under trainkit: seeding, rank-zero helpers, DataModules,
and the porting module ``trainkit.lightning``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

import trainkit
import trainkit.lightning as L
from trainkit.utilities.rank_zero import rank_zero_only

from ..helpers import QUIET, Classifier, blobs


# ------------------------------------------------------------------ seeding
def test_seed_everything_without_a_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRAINKIT_GLOBAL_SEED", raising=False)
    with pytest.warns(UserWarning, match="seeding with 0"):
        assert trainkit.seed_everything() == 0
    first = torch.rand(3)
    monkeypatch.setenv("TRAINKIT_GLOBAL_SEED", "7")
    assert trainkit.seed_everything() == 7
    a = torch.rand(3)
    trainkit.seed_everything(7)
    assert torch.equal(a, torch.rand(3)) and not torch.equal(a, first)
    assert trainkit.seed_everything("12") == 12
    monkeypatch.setenv("TRAINKIT_GLOBAL_SEED", "x")
    with pytest.raises(ValueError, match="TRAINKIT_GLOBAL_SEED='x' is not a seed"):
        trainkit.seed_everything()


def test_seed_everything_verbose(capsys: pytest.CaptureFixture[str]) -> None:
    trainkit.seed_everything(3, verbose=True)
    assert "seed set to 3" in capsys.readouterr().out


# ------------------------------------------------------------------ ranks
def test_rank_zero_only_rank_can_be_read_and_set() -> None:
    calls: list[int] = []

    @rank_zero_only
    def record() -> None:
        calls.append(1)

    assert rank_zero_only.rank == 0
    record()
    rank_zero_only.rank = 1
    try:
        record()  # not rank 0: skipped
        assert rank_zero_only.rank == 1
    finally:
        rank_zero_only.rank = None  # back to the environment
    assert calls == [1] and rank_zero_only.rank == 0


# ------------------------------------------------------------- DataModules
class SavedData(trainkit.DataModule):
    def __init__(self, batch_size: int = 16, name: str = "blobs") -> None:
        super().__init__()
        self.save_hyperparameters()

    def train_dataloader(self) -> Any:
        return DataLoader(blobs(64), batch_size=self.hparams.batch_size)


def test_datamodule_hparams_and_trainer() -> None:
    data = SavedData(batch_size=8)
    assert data.hparams == {"batch_size": 8, "name": "blobs"} and data.trainer is None
    seen: dict[str, Any] = {}

    class Probe(Classifier):
        def on_train_start(self) -> None:
            seen["trainer"] = self.trainer.datamodule.trainer

    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(Probe(), datamodule=data)
    assert seen["trainer"] is trainer and trainer.num_training_batches == 8


def test_datamodule_from_datasets() -> None:
    data = trainkit.DataModule.from_datasets(
        train_dataset=blobs(64),
        val_dataset=[blobs(32), blobs(48)],
        test_dataset=blobs(16),
        batch_size=16,
    )
    assert len(data.train_dataloader()) == 4
    assert [len(loader) for loader in data.val_dataloader()] == [2, 3]
    assert len(data.test_dataloader()) == 1
    assert isinstance(data.train_dataloader().sampler, torch.utils.data.RandomSampler)
    assert isinstance(data.test_dataloader().sampler, torch.utils.data.SequentialSampler)

    class TwoVal(Classifier):
        def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
            super().validation_step(batch, batch_idx)

    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(TwoVal(), datamodule=data)
    assert trainer.num_val_batches == [2, 3]
    with pytest.raises(NotImplementedError, match="predict_dataloader"):
        data.predict_dataloader()
    assert data.train_dataloader().pin_memory is torch.cuda.is_available()


def test_from_datasets_builds_the_class_with_its_own_arguments() -> None:
    # As Lightning's: batch_size and num_workers also reach __init__ when it takes
    # them; every other keyword is an __init__ argument.
    class Sized(trainkit.DataModule):
        def __init__(self, batch_size: int = 1, num_workers: int = 0) -> None:
            super().__init__()
            self.batch_size, self.num_workers = batch_size, num_workers

    class Extra(trainkit.DataModule):
        def __init__(self, other: int, batch_size: int = 1) -> None:
            super().__init__()
            self.other, self.batch_size = other, batch_size

    class Anything(trainkit.DataModule):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__()
            self.kwargs = kwargs

    sized = Sized.from_datasets(blobs(64), batch_size=4, num_workers=0)
    assert isinstance(sized, Sized) and (sized.batch_size, sized.num_workers) == (4, 0)
    extra = Extra.from_datasets(blobs(64), batch_size=8, other=5)
    assert (extra.other, extra.batch_size) == (5, 8) and len(extra.train_dataloader()) == 8
    assert Anything.from_datasets(blobs(8), batch_size=2).kwargs == {
        "batch_size": 2,
        "num_workers": 0,
    }
    with pytest.raises(TypeError, match="other"):
        Extra.from_datasets(blobs(64))  # a required __init__ argument not given


# ---------------------------------------------------------- the porting module
def test_the_porting_module_offers_lightnings_names(tmp_path: Path) -> None:
    assert L.LightningModule is trainkit.Module and issubclass(L.Trainer, trainkit.Trainer)
    assert L.LightningDataModule is trainkit.DataModule and L.Callback is trainkit.Callback
    # trainkit's, also recording the seed where Lightning code reads it (PL_GLOBAL_SEED).
    from trainkit.lightning.fabric.utilities.seed import seed_everything

    assert L.seed_everything is seed_everything is not trainkit.seed_everything
    from trainkit.lightning.callbacks import EarlyStopping, ModelCheckpoint
    from trainkit.lightning.loggers import CSVLogger, TensorBoardLogger
    from trainkit.lightning.utilities import rank_zero_only as ported

    assert EarlyStopping is trainkit.callbacks.EarlyStopping
    assert ModelCheckpoint is L.callbacks.ModelCheckpoint
    assert issubclass(CSVLogger, trainkit.loggers.CSVLogger)
    assert issubclass(TensorBoardLogger, trainkit.loggers.TensorBoardLogger)
    assert ported is rank_zero_only
    # The ported Trainer and loggers write where Lightning's do; trainkit's own to logs/.
    root = str(tmp_path)
    assert L.Trainer(default_root_dir=root).logger.log_dir == f"{root}/lightning_logs/version_0"
    assert CSVLogger(root).log_dir == f"{root}/lightning_logs/version_1"
    assert TensorBoardLogger(root, name="x").log_dir == f"{root}/x/version_0"
    assert trainkit.Trainer(default_root_dir=root).logger.log_dir == f"{root}/logs/version_0"
    assert L.TrainerFn.FITTING == "fit" and L.RunningStage.VALIDATING == "validate"


def test_a_lightning_name_trainkit_lacks_fails_on_import_and_says_so() -> None:
    with pytest.raises(AttributeError, match="trainkit does not provide Lightning's DeepSpeed"):
        L.strategies.DeepSpeedStrategy  # noqa: B018
    with pytest.raises(ImportError, match="NeptuneLogger"):
        from trainkit.lightning.loggers import NeptuneLogger  # noqa: F401


def test_the_experiment_trackers_are_served_under_lightnings_names() -> None:
    from trainkit.lightning.loggers import MLFlowLogger, WandbLogger

    assert MLFlowLogger is trainkit.loggers.MLflowLogger
    # trainkit's, with Lightning's default project (as the ported TensorBoard and CSV
    # loggers have Lightning's default folder).
    assert issubclass(WandbLogger, trainkit.loggers.WandbLogger)
    assert WandbLogger._default_project == "lightning_logs"


def test_a_ported_module_trains_through_the_porting_names() -> None:
    class Ported(L.LightningModule):
        def __init__(self, lr: float = 0.1) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.layer = torch.nn.Linear(8, 3)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.layer(x), y)
            self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True)
            return {"loss": loss}

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
            return [optimizer], [scheduler]

    trainer = L.Trainer(max_epochs=2, **QUIET)
    model = Ported()
    trainer.fit(model, DataLoader(blobs(64), batch_size=16))
    assert trainer.global_step == 8 and trainer.optimizers[0].param_groups[0]["lr"] == 0.025
    assert {"train_loss", "train_loss_step", "train_loss_epoch"} <= set(trainer.callback_metrics)

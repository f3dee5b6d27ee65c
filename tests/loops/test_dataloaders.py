"""Several dataloaders in one stage: combined for training, one after the other for evaluation."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from tests.distributed.spawn import run_processes
from tests.helpers import QUIET
from trainkit.callbacks import ModelCheckpoint
from trainkit.utilities.combined_loader import CombinedLoader


def _ids(start: int, count: int) -> TensorDataset:
    """Samples whose feature is their id, so a batch says which samples it holds."""
    ids = torch.arange(start, start + count, dtype=torch.float32)
    return TensorDataset(ids.unsqueeze(1))


class Recording(trainkit.Module):
    """Trains a scalar on every batch it is given; notes the sample ids of each batch."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.seen: list[Any] = []
        self.evaluated: list[tuple[int, list[int]]] = []

    def _ids(self, batch: Any) -> Any:
        if isinstance(batch, dict):
            return {key: self._ids(value) for key, value in batch.items()}
        if isinstance(batch, list) and batch and isinstance(batch[0], list):
            return [self._ids(part) for part in batch]
        (x,) = batch
        return [int(v) for v in x.flatten().tolist()]

    def _loss(self, batch: Any) -> torch.Tensor:
        if isinstance(batch, dict):
            return sum((self._loss(value) for value in batch.values()), torch.zeros(()))
        if isinstance(batch, list) and batch and isinstance(batch[0], list):
            return sum((self._loss(part) for part in batch), torch.zeros(()))
        (x,) = batch
        return ((x * self.weight) ** 2).mean()

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.seen.append(self._ids(batch))
        return self._loss(batch)

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        self.evaluated.append((dataloader_idx, self._ids(batch)))
        self.log("val_loss", self._loss(batch))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def _pair() -> dict[str, DataLoader[Any]]:
    # "a": 2 batches of 2; "b": 3 batches of 2.
    return {"a": DataLoader(_ids(0, 4), batch_size=2), "b": DataLoader(_ids(100, 6), batch_size=2)}


def test_a_dict_of_training_loaders_gives_dict_batches_until_the_longest_ends() -> None:
    module, loaders = Recording(), _pair()
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(module, loaders)
    assert module.seen == [
        {"a": [0, 1], "b": [100, 101]},
        {"a": [2, 3], "b": [102, 103]},
        {"a": [0, 1], "b": [104, 105]},  # "a" started again
    ]
    assert trainer.num_training_batches == 3 and trainer.global_step == 3
    assert trainer.train_dataloader == loaders  # Lightning's shape: the collection


class TwoDatasets:
    """An iterable of dict batches from two datasets, whose batch_size is a list (one each)."""

    batch_size = [2, 2]

    def __len__(self) -> int:
        return 2

    def __iter__(self) -> Any:
        for i in range(2):
            yield {"a": [torch.full((2, 1), float(i))], "b": [torch.full((2, 1), 10.0 + i)]}


def test_an_iterable_whose_batch_size_is_not_a_number_trains_and_reports(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The end-of-fit summary counts samples/s only when each step's samples are known.
    options = {**QUIET, "enable_progress_bar": True}
    trainer = trainkit.Trainer(max_epochs=1, **options)
    trainer.fit(Recording(), TwoDatasets())
    assert trainer.global_step == 2 and trainer.state.samples_per_step is None
    out = capsys.readouterr().out
    assert "fit: finished" in out and "2 batches at" in out and "samples/s" not in out


def test_a_list_of_training_loaders_gives_list_batches() -> None:
    module, loaders = Recording(), _pair()
    trainkit.Trainer(max_epochs=1, **QUIET).fit(module, [loaders["b"], loaders["a"]])
    assert module.seen[0] == [[100, 101], [0, 1]] and len(module.seen) == 3


def test_a_combined_loader_keeps_its_mode() -> None:
    module = Recording()
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(module, CombinedLoader(_pair(), "min_size"))
    assert len(module.seen) == 2 and trainer.num_training_batches == 2


def test_a_list_of_batches_is_still_one_loader() -> None:
    module = Recording()
    batches = [[torch.tensor([[1.0]])], [torch.tensor([[2.0]])]]
    trainkit.Trainer(max_epochs=1, **QUIET).fit(module, batches)
    assert module.seen == [[1], [2]]


def test_a_dict_of_validation_loaders_runs_each_with_its_index() -> None:
    module = Recording()
    val = {
        "small": DataLoader(_ids(0, 2), batch_size=2),
        "big": DataLoader(_ids(50, 4), batch_size=2),
    }
    trainer = trainkit.Trainer(max_epochs=1, num_sanity_val_steps=0, **QUIET)
    trainer.fit(module, DataLoader(_ids(0, 2)), val)
    assert module.evaluated == [(0, [0, 1]), (1, [50, 51]), (1, [52, 53])]
    assert set(trainer.callback_metrics) >= {
        "val_loss/dataloader_idx_0",
        "val_loss/dataloader_idx_1",
    }
    # trainer.val_dataloaders shows the dict given (Lightning's shape), counts are ints.
    assert list(trainer.val_dataloaders) == ["small", "big"]
    assert trainer.val_dataloaders["big"].dataset is val["big"].dataset
    assert trainer.num_val_batches == [1, 2] and type(trainer.num_val_batches[0]) is int
    assert type(trainer.num_training_batches) is int
    trainer.validate(module, {"only": DataLoader(_ids(7, 1))}, verbose=False)
    assert list(trainer.val_dataloaders) == ["only"] and trainer.num_val_batches == [1]


def test_a_sequential_combined_loader_validates_like_a_list_of_loaders() -> None:
    module = Recording()
    val = CombinedLoader([DataLoader(_ids(0, 2)), DataLoader(_ids(9, 1))], "sequential")
    trainkit.Trainer(**QUIET).validate(module, val)
    assert module.evaluated == [(0, [0]), (0, [1]), (1, [9])]


class _Cut(Exception):
    """Ends a run where a crash would."""


def _resume_run(root: Path, ckpt_path: str | None, stop_at: int | None) -> list[Any]:
    class StopAt(trainkit.Callback):
        # A crash before batch stop_at + 1: the checkpoint of step stop_at is the last.
        def on_train_batch_start(self, trainer: Any, *args: Any) -> None:
            if stop_at is not None and trainer.global_step == stop_at:
                raise _Cut

    saving = ModelCheckpoint(dirpath=root, filename="mid", every_n_train_steps=7, save_last=False)
    generator = torch.Generator().manual_seed(3)
    loaders = {
        "a": DataLoader(_ids(0, 4), batch_size=2, shuffle=True, generator=generator),
        "b": DataLoader(_ids(100, 10), batch_size=2, shuffle=True),
    }
    module = Recording()
    trainer = trainkit.Trainer(
        max_epochs=2,
        seed=5,
        default_root_dir=str(root),
        callbacks=[StopAt(), saving],
        **{**QUIET, "enable_checkpointing": True},
    )
    with contextlib.suppress(_Cut):
        trainer.fit(module, loaders, ckpt_path=ckpt_path)
    return module.seen


def test_resuming_mid_epoch_continues_the_combined_batches_exactly(tmp_path: Path) -> None:
    whole = _resume_run(tmp_path / "whole", None, None)
    first = _resume_run(tmp_path / "cut", None, stop_at=7)  # epoch 2, batch 2 ("a" cycled)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "a" has its own generator: nothing to warn about
        warnings.filterwarnings("ignore", "You defined a `validation_step`")  # no val data
        rest = _resume_run(tmp_path / "cut", str(tmp_path / "cut" / "mid.ckpt"), None)
    assert len(whole) == 10 and first + rest == whole


def test_resuming_past_a_cycle_of_a_loader_without_a_generator_warns(tmp_path: Path) -> None:
    loaders = [
        DataLoader(_ids(0, 2), shuffle=True),  # 2 batches, cycles at the third
        DataLoader(_ids(100, 6)),
    ]
    saving = ModelCheckpoint(dirpath=tmp_path, filename="mid", every_n_train_steps=4)
    trainer = trainkit.Trainer(
        max_epochs=1,
        default_root_dir=str(tmp_path),
        callbacks=[saving],
        **{**QUIET, "enable_checkpointing": True},
    )
    trainer.fit(Recording(), loaders)
    again = trainkit.Trainer(max_epochs=1, default_root_dir=str(tmp_path), **QUIET)
    with pytest.warns(UserWarning, match=r"loader\(s\) \[0\] had started again"):
        again.fit(Recording(), loaders, ckpt_path=str(tmp_path / "mid.ckpt"))


def _ranks_ids() -> dict[str, list[int]]:
    # Each of 2 processes: every loader gets its own distributed sampler.
    module = Recording()
    loaders = {
        "a": DataLoader(_ids(0, 4), batch_size=1),
        "b": DataLoader(_ids(100, 8), batch_size=2),
    }
    trainer = trainkit.Trainer(max_epochs=1, strategy="ddp", **QUIET)
    trainer.fit(module, loaders)
    return {key: sorted({i for seen in module.seen for i in seen[key]}) for key in ("a", "b")}


def test_each_combined_loader_is_split_between_processes() -> None:
    ranks = run_processes(_ranks_ids, 2)
    # "b" (4 samples a process, 2 batches) sets the epoch; "a" has 2 a process.
    for key, everything in (("a", set(range(4))), ("b", set(range(100, 108)))):
        assert not set(ranks[0][key]) & set(ranks[1][key])
        assert set(ranks[0][key]) | set(ranks[1][key]) == everything


class StageRecording(Recording):
    """Records the running stage inside each dataloader hook."""

    def __init__(self) -> None:
        super().__init__()
        self.stages: list[tuple[str, str | None]] = []

    def _loader(self, kind: str) -> DataLoader[Any]:
        stage = self.trainer.state.stage
        self.stages.append((kind, None if stage is None else str(stage.value)))
        return DataLoader(_ids(0, 4), batch_size=2)

    def train_dataloader(self) -> DataLoader[Any]:
        return self._loader("train")

    def val_dataloader(self) -> DataLoader[Any]:
        return self._loader("val")

    def test_dataloader(self) -> DataLoader[Any]:
        return self._loader("test")

    def test_step(self, batch: Any, batch_idx: int) -> None:
        pass


def test_each_dataloader_hook_sees_the_stage_that_reads_its_loaders() -> None:
    # As under Lightning: projects build a loader's collate_fn from trainer.state.stage.
    model = StageRecording()
    trainer = trainkit.Trainer(max_epochs=2, reload_dataloaders_every_n_epochs=1, **QUIET)
    trainer.fit(model)
    trainer.test(model)
    assert model.stages == [
        ("val", "sanity_check"),
        ("train", "train"),
        ("train", "train"),  # the reloads at the second epoch: training's at its start,
        ("val", "validate"),  # validation's when its validation is due
        ("test", "test"),
    ]


class EpochData(Recording):
    """Each loader's samples are the epoch its hook was called in; records which epochs
    the hooks ran in and which loader's data each validation read."""

    def __init__(self) -> None:
        super().__init__()
        self.train_loads: list[int] = []
        self.val_loads: list[int] = []
        self.read: list[tuple[int, int]] = []  # (epoch validated, epoch its data is from)

    def _at_epoch(self) -> DataLoader[Any]:
        return DataLoader(_ids(self.current_epoch, 1), batch_size=1)

    def train_dataloader(self) -> DataLoader[Any]:
        self.train_loads.append(self.current_epoch)
        return self._at_epoch()

    def val_dataloader(self) -> DataLoader[Any]:
        if not self.trainer.sanity_checking:
            self.val_loads.append(self.current_epoch)
        return self._at_epoch()

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        if not self.trainer.sanity_checking:
            self.read.append((self.current_epoch, int(batch[0])))


@pytest.mark.parametrize(
    ("sanity", "check_every", "reload_every", "epochs", "train_loads", "read"),
    [
        # Validation less often than the reloads: each reads a loader loaded for it.
        (1, 3, 2, 9, [0, 2, 4, 6, 8], [(2, 2), (5, 5), (8, 8)]),
        (0, 2, 2, 6, [0, 2, 4], [(1, 1), (3, 3), (5, 5)]),
        # Reloads less often: the first validation loads them (the first epoch does
        # not validate), then again n epochs later.
        (1, 3, 4, 9, [0, 4, 8], [(2, 2), (5, 2), (8, 8)]),
        (0, 3, 4, 9, [0, 4, 8], [(2, 2), (5, 2), (8, 8)]),
        # Every epoch validates: the loaders from the start count for the first epoch.
        (1, 1, 2, 6, [0, 2, 4], [(0, 0), (1, 0), (2, 2), (3, 2), (4, 4), (5, 4)]),
    ],
)
def test_reloads_give_each_validation_the_loaders_lightning_loads_for_it(
    sanity: int,
    check_every: int,
    reload_every: int,
    epochs: int,
    train_loads: list[int],
    read: list[tuple[int, int]],
) -> None:
    # The epochs are those Lightning 2.6 calls the hooks in and validates with.
    model = EpochData()
    trainer = trainkit.Trainer(
        max_epochs=epochs,
        num_sanity_val_steps=sanity,
        check_val_every_n_epoch=check_every,
        reload_dataloaders_every_n_epochs=reload_every,
        **QUIET,
    )
    trainer.fit(model)
    assert model.train_loads == train_loads
    assert model.read == read
    assert int(trainer.val_dataloaders.dataset[0][0]) == read[-1][1]  # the last ones loaded


def test_a_resumed_fit_loads_its_loaders_at_the_epoch_it_resumes(tmp_path: Path) -> None:
    # The hooks see the checkpoint's epoch (a curriculum resumes where it was), and the
    # reloads count from there: every 2 epochs from epoch 3 is epoch 5.
    options: dict[str, Any] = {**QUIET, "reload_dataloaders_every_n_epochs": 2}
    first = trainkit.Trainer(max_epochs=3, **options)
    first.fit(EpochData())
    first.save_checkpoint(tmp_path / "at-3.ckpt")
    model = EpochData()
    trainkit.Trainer(max_epochs=7, **options).fit(model, ckpt_path=tmp_path / "at-3.ckpt")
    assert model.train_loads == [3, 5]
    assert model.read == [(3, 3), (4, 3), (5, 5), (6, 5)]

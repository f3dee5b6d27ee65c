"""The batch size finder (Tuner.scale_batch_size): power and binsearch, trials, clean-up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, BlobData, Classifier, blobs, loader
from trainkit.tuner import Tuner
from trainkit.tuner.batch_size_scaling import is_oom_error


class Limited(Classifier):
    """Runs out of (simulated) memory on a batch larger than ``limit``."""

    def __init__(self, limit: int = 100, batch_size: int = 8, samples: int = 1000) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.limit = limit
        self.data = blobs(samples)
        self.sizes: list[int] = []  # each training batch's size
        self.val_sizes: list[int] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.sizes.append(len(batch[0]))
        if len(batch[0]) > self.limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate (simulated)")
        return super().training_step(batch, batch_idx)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.val_sizes.append(len(batch[0]))

    def train_dataloader(self) -> Any:
        return loader(self.data, self.batch_size, shuffle=True)

    def val_dataloader(self) -> Any:
        return loader(self.data, self.batch_size)


def _tuner(tmp_path: Path, **kwargs: Any) -> Tuner:
    options = {**QUIET, "default_root_dir": str(tmp_path), "max_epochs": 1, **kwargs}
    return Tuner(trainkit.Trainer(**options))


def _tried(model: Limited, steps: int) -> list[int]:
    # The sizes tried, in order (each trial trains `steps` batches unless it fails first).
    tried: list[int] = []
    for size in model.sizes:
        if not tried or tried[-1] != size or tried.count(size) == 0:
            tried.append(size)
    return tried


def test_power_doubles_until_out_of_memory(tmp_path: Path) -> None:
    model = Limited(limit=100)
    found = _tuner(tmp_path).scale_batch_size(model, mode="power", steps_per_trial=2)
    assert found == 64 and model.batch_size == 64
    assert _tried(model, 2) == [2, 4, 8, 16, 32, 64, 128]
    # steps_per_trial steps at each size that fits; the failing one stops at its first.
    assert model.sizes.count(32) == 2 and model.sizes.count(128) == 1


def test_binsearch_bisects_to_the_exact_limit(tmp_path: Path) -> None:
    model = Limited(limit=100)
    found = _tuner(tmp_path).scale_batch_size(
        model, mode="binsearch", steps_per_trial=1, margin=0.0
    )
    assert found == 100 and model.batch_size == 100
    assert _tried(model, 1) == [2, 4, 8, 16, 32, 64, 128, 96, 112, 104, 100, 102, 101]


def test_binsearch_keeps_a_margin_and_no_size_above_max_val_is_tried(tmp_path: Path) -> None:
    # Lightning's defaults: 5% below the size found, in binsearch mode only.
    model = Limited(limit=100)
    assert _tuner(tmp_path).scale_batch_size(model, mode="binsearch", steps_per_trial=1) == 95
    assert model.batch_size == 95
    capped = Limited(limit=100)
    found = _tuner(tmp_path).scale_batch_size(capped, steps_per_trial=1, max_val=48)
    assert found == 48 and max(_tried(capped, 1)) == 48
    with pytest.raises(ValueError, match="init_val=64, max_val=48"):
        _tuner(tmp_path).scale_batch_size(Limited(limit=100), init_val=64, max_val=48)


def test_max_trials_ends_the_search_at_the_last_size_that_ran(tmp_path: Path) -> None:
    model = Limited(limit=100)
    assert _tuner(tmp_path).scale_batch_size(model, max_trials=3, init_val=5) == 20
    assert _tried(model, 3) == [5, 10, 20]


def test_a_failing_first_size_is_halved(tmp_path: Path) -> None:
    model = Limited(limit=3)
    assert _tuner(tmp_path).scale_batch_size(model, init_val=16, steps_per_trial=1) == 2
    assert _tried(model, 1) == [16, 8, 4, 2]
    with pytest.raises(RuntimeError, match="no batch size that fits"):
        _tuner(tmp_path).scale_batch_size(Limited(limit=0), init_val=2)


def test_the_training_set_caps_the_size(tmp_path: Path) -> None:
    model = Limited(limit=10_000, samples=300)
    assert _tuner(tmp_path).scale_batch_size(model, steps_per_trial=1) == 300
    assert _tried(model, 1)[-2:] == [256, 300]


def test_validation_runs_at_the_tried_size(tmp_path: Path) -> None:
    model = Limited(limit=100)
    _tuner(tmp_path).scale_batch_size(model, mode="power", steps_per_trial=2, max_trials=3)
    assert model.val_sizes == [2, 2, 4, 4, 8, 8]


def test_other_errors_propagate_and_oom_is_recognised(tmp_path: Path) -> None:
    class Broken(Limited):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        _tuner(tmp_path).scale_batch_size(Broken())
    assert is_oom_error(exception=torch.cuda.OutOfMemoryError("anything"))  # Lightning's keyword
    assert is_oom_error(RuntimeError("CUDA error: out of memory"))
    assert is_oom_error(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried"))
    assert not is_oom_error(ValueError("CUDA out of memory"))


def test_batch_arg_name_in_hparams_and_datamodule(tmp_path: Path) -> None:
    class Hparams(Limited):
        def __init__(self) -> None:
            super().__init__(limit=40)
            del self.batch_size
            self.hparams["per_device"] = 4

        def train_dataloader(self) -> Any:
            return loader(self.data, self.hparams.per_device)

        def val_dataloader(self) -> Any:
            return loader(self.data, 50)

    model = Hparams()
    found = _tuner(tmp_path).scale_batch_size(model, batch_arg_name="per_device", init_val=4)
    assert found == 32 and model.hparams.per_device == 32

    data = BlobData(batch_size=8)
    assert (
        _tuner(tmp_path).scale_batch_size(Classifier(), datamodule=data, init_val=8, max_trials=4)
        == 64
    )
    assert data.batch_size == 64
    with pytest.raises(AttributeError, match="Field 'nope' not found"):
        _tuner(tmp_path).scale_batch_size(model, batch_arg_name="nope")
    with pytest.raises(ValueError, match="passed directly"):
        _tuner(tmp_path).scale_batch_size(model, loader(blobs(64), 8))


def test_scaling_leaves_the_run_and_the_folder_as_they_were(tmp_path: Path) -> None:
    trainer = trainkit.Trainer(
        default_root_dir=str(tmp_path), max_epochs=1, enable_progress_bar=False, accelerator="cpu"
    )
    model = Limited(limit=40)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    assert Tuner(trainer).scale_batch_size(model) == 32
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert trainer.optimizers[0].state_dict()["state"] == {}
    assert (trainer.global_step, trainer.current_epoch) == (0, 0)
    assert torch.equal(torch.get_rng_state(), rng)
    assert list(tmp_path.iterdir()) == []


def test_a_value_held_twice_is_read_from_the_datamodule_and_written_to_both() -> None:
    # Lightning's rule: the last place found (the DataModule, which builds the
    # loaders) gives the value; every place gets the new one.
    from trainkit.tuner.values import get_attribute, set_attribute

    model, data = Classifier(), BlobData(batch_size=32)
    model.hparams["batch_size"] = 16
    trainer = trainkit.Trainer(**QUIET)
    trainer.datamodule = data
    assert get_attribute(trainer, model, "batch_size") == 32
    set_attribute(trainer, model, "batch_size", 64)
    assert model.hparams["batch_size"] == 64 and data.batch_size == 64
    trainer.datamodule = None
    assert get_attribute(trainer, model, "batch_size") == 64
    with pytest.raises(AttributeError, match="'nope' is neither an attribute of the model"):
        get_attribute(trainer, model, "nope")


def test_fast_dev_run_skips_the_search_and_says_so(tmp_path: Path) -> None:
    model = Limited()
    with pytest.warns(UserWarning, match="Skipping batch size scaler since `fast_dev_run`"):
        assert _tuner(tmp_path, fast_dev_run=True).scale_batch_size(model) is None
    assert model.batch_size == 8 and model.sizes == []  # nothing tried

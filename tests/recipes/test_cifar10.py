"""The CIFAR-10 recipe on tiny synthetic files in the real on-disk format.

The files are written as torchvision reads them (``cifar-10-batches-py`` with
pickled batches), so the recipe's own loading path runs unchanged; only
torchvision's MD5 check is relaxed, because synthetic files cannot match the
real checksums.
"""

from __future__ import annotations

import importlib
import inspect
import math
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import trainkit
from recipes.cifar10 import data as cifar_data
from recipes.cifar10.data import CIFAR10Data
from recipes.cifar10.model import CIFAR10ResNet

CONFIG = Path(__file__).resolve().parents[2] / "recipes" / "cifar10" / "config.yaml"
TRAIN_PER_BATCH, TEST_IMAGES = 20, 30
LABEL_NAMES = ["airplane", "automobile", "bird", "cat", "deer"]
LABEL_NAMES += ["dog", "frog", "horse", "ship", "truck"]


def _write_batch(path: Path, name: str, images: int, rng: np.random.Generator) -> None:
    # The keys torchvision's CIFAR10 reads after pickle.load(encoding="latin1"):
    # the original Python 2 files hold byte-string keys, which that decodes to str.
    batch = {
        "batch_label": name,
        "data": rng.integers(0, 256, size=(images, 3 * 32 * 32), dtype=np.uint8),
        "labels": rng.integers(0, 10, size=images).tolist(),
        "filenames": [f"{name}_{i}.png" for i in range(images)],
    }
    with open(path, "wb") as file:
        pickle.dump(batch, file)


@pytest.fixture
def synthetic_cifar10(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data root holding 5 training batches of 20 images and a 30-image test batch."""
    import torchvision.datasets.cifar as cifar

    folder = tmp_path / cifar_data.FOLDER
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(1, 6):
        _write_batch(folder / f"data_batch_{i}", f"training batch {i} of 5", TRAIN_PER_BATCH, rng)
    _write_batch(folder / "test_batch", "testing batch 1 of 1", TEST_IMAGES, rng)
    meta = {"num_cases_per_batch": TRAIN_PER_BATCH, "label_names": LABEL_NAMES, "num_vis": 3072}
    with open(folder / "batches.meta", "wb") as file:
        pickle.dump(meta, file)

    # The fixture files are synthetic, so their MD5 sums cannot match the real
    # ones. Both of torchvision's checks (CIFAR10._check_integrity for the batches,
    # _load_meta for batches.meta) go through this function; the stand-in still
    # requires each file to exist. The recipe's loading path is unchanged.
    def file_exists(fpath: str, md5: str | None = None) -> bool:
        return os.path.isfile(fpath)

    monkeypatch.setattr(cifar, "check_integrity", file_exists)
    return tmp_path


def test_short_run_end_to_end(synthetic_cifar10: Path, tmp_path: Path) -> None:
    from trainkit.callbacks import ModelCheckpoint

    data = CIFAR10Data(
        data_dir=synthetic_cifar10, batch_size=16, eval_batch_size=32, num_workers=0, val_size=20
    )
    model = CIFAR10ResNet(width=8)
    trainer = trainkit.Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_train_batches=3,
        # The config's checkpointing, to show the metric it watches is logged.
        callbacks=[ModelCheckpoint(monitor="val/acc", mode="max", save_top_k=1)],
        default_root_dir=tmp_path / "run",
    )
    trainer.fit(model, datamodule=data)
    assert trainer.global_step == 3
    assert list((tmp_path / "run").rglob("*.ckpt"))
    result = trainer.test(model, datamodule=data)[0]
    assert {"test/acc", "test/loss"} <= result.keys()
    assert all(math.isfinite(result[key]) for key in ("test/acc", "test/loss"))
    assert 0.0 <= result["test/acc"] <= 1.0


def test_splits_and_augmentation(synthetic_cifar10: Path) -> None:
    from torchvision.datasets import CIFAR10

    data = CIFAR10Data(data_dir=synthetic_cifar10, num_workers=0, val_size=20)
    data.prepare_data()  # files present: nothing to download
    data.setup("fit")
    train_set, val_set = data.train_set, data.val_set
    assert isinstance(train_set, torch.utils.data.Subset)
    assert isinstance(val_set, torch.utils.data.Subset)
    assert (len(train_set), len(val_set)) == (5 * TRAIN_PER_BATCH - 20, 20)
    # Disjoint and together the whole training split.
    assert sorted([*train_set.indices, *val_set.indices]) == list(range(5 * TRAIN_PER_BATCH))

    torch.manual_seed(0)
    image, label = train_set[0]
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32
    assert isinstance(label, int) and 0 <= label < 10
    # Random crop and flip: two draws of the same image differ (8 tries make a
    # chance repeat of the same crop and flip vanishingly unlikely).
    assert any(not torch.equal(image, train_set[0][0]) for _ in range(8))

    # Validation images get the evaluation transform: the same every time, and
    # exactly the normalised original pixels.
    first, again = val_set[0][0], val_set[0][0]
    assert torch.equal(first, again)
    pixels = CIFAR10(str(synthetic_cifar10), train=True).data[val_set.indices[0]]
    mean, std = torch.tensor(cifar_data.MEAN), torch.tensor(cifar_data.STD)
    expected = (torch.from_numpy(pixels).permute(2, 0, 1).float() / 255 - mean[:, None, None]) / (
        std[:, None, None]
    )
    torch.testing.assert_close(first, expected)

    data.setup("test")
    assert isinstance(data.test_set, CIFAR10)
    test_image = data.test_set[0][0]
    assert torch.equal(test_image, data.test_set[0][0])
    assert len(data.test_set) == TEST_IMAGES

    # The split is fixed, whatever the global RNG does.
    torch.manual_seed(123)
    other = CIFAR10Data(data_dir=synthetic_cifar10, num_workers=0, val_size=20)
    other.setup("fit")
    assert isinstance(other.val_set, torch.utils.data.Subset)
    assert other.val_set.indices == val_set.indices


def test_missing_files_offline_name_the_folder_and_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchvision.datasets import CIFAR10

    def no_network(self: CIFAR10) -> None:
        raise OSError("network is unreachable")

    # The real download path runs; only the network call itself fails, as offline.
    monkeypatch.setattr(CIFAR10, "download", no_network)
    data = CIFAR10Data(data_dir=tmp_path, num_workers=0)
    with pytest.raises(FileNotFoundError) as info:
        data.prepare_data()
    message = str(info.value)
    assert str(tmp_path / "cifar-10-batches-py") in message
    assert all(name in message for name in cifar_data.FILES)
    assert "TRAINKIT_DATA_DIR" in message
    assert "network is unreachable" in message

    # setup never downloads; it says how to get the files.
    with pytest.raises(FileNotFoundError, match=r"prepare_data\(\)"):
        data.setup("fit")


def test_data_dir_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINKIT_DATA_DIR", "/somewhere/data")
    assert CIFAR10Data().data_dir == Path("/somewhere/data")


def test_val_size_must_leave_training_images(synthetic_cifar10: Path) -> None:
    data = CIFAR10Data(data_dir=synthetic_cifar10, num_workers=0, val_size=5 * TRAIN_PER_BATCH)
    with pytest.raises(ValueError, match="val_size"):
        data.setup("fit")


def _import(class_path: str) -> Any:
    module_name, _, name = class_path.rpartition(".")
    return getattr(importlib.import_module(module_name), name)


def test_config_names_importable_classes_and_their_arguments() -> None:
    from omegaconf import OmegaConf

    config: Any = OmegaConf.to_container(OmegaConf.load(CONFIG))
    assert set(config) == {"trainer", "model", "data"}
    trainer_args = dict(config["trainer"])
    callbacks = trainer_args.pop("callbacks")
    inspect.signature(trainkit.Trainer).bind(**trainer_args)
    for spec in [*callbacks, config["model"], config["data"]]:
        cls = _import(spec["class_path"])
        inspect.signature(cls).bind(**spec.get("init_args", {}))
    # Callbacks are cheap to build: check their arguments' values too.
    for spec in callbacks:
        assert isinstance(_import(spec["class_path"])(**spec["init_args"]), trainkit.Callback)


def test_config_comment_states_the_run_s_step_count() -> None:
    from trainkit.cli.engine import TrainkitCLI

    run = TrainkitCLI("fit", [str(CONFIG)], []).run_config  # as the trainkit command reads it
    data = run["data"]["init_args"]  # every default filled in
    assert data["val_size"] == inspect.signature(CIFAR10Data).parameters["val_size"].default
    train_images = 50_000 - data["val_size"]
    steps_per_epoch = math.ceil(train_images / data["batch_size"])
    total = steps_per_epoch * run["trainer"]["max_epochs"]
    text = CONFIG.read_text()
    assert (train_images, steps_per_epoch, total) == (45_000, 88, 2_112)
    assert "an epoch is 88 steps (2,112 in all)" in text
    # The DAWNBench run it compares with used all 50,000 images: 98 steps of 512 an epoch.
    assert math.ceil(50_000 / 512) == 98 and "98 steps of 512 an epoch" in text
    assert "once DDP exists" not in text  # DDP exists: the config says how to use it

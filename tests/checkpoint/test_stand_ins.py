"""Hyperparameters pickled as objects, as Lightning stores them, and read safely as stand-ins."""

from __future__ import annotations

import io
import struct
import sys
import types
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.checkpoint.files import load
from trainkit.checkpoint.stand_ins import StandIn, plain_entries
from trainkit.checkpoint.weights import peek


class Block(trainkit.Module):
    """A submodule whose own hyperparameters (an AttributeDict holding a class) the model saves."""

    def __init__(self, depth: int = 2, activation: type[nn.Module] = nn.ReLU) -> None:
        super().__init__()
        self.save_hyperparameters()


class Composed(Classifier):
    """Saves a submodule's hyperparameters and a loss object among its own."""

    def __init__(self, block: Any = None, loss: nn.Module | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()


def _fit(tmp_path: Path, model: trainkit.Module, **options: Any) -> trainkit.Trainer:
    trainer = trainkit.Trainer(
        max_epochs=options.pop("max_epochs", 1),
        default_root_dir=str(tmp_path),
        **{**QUIET, "enable_checkpointing": True},
    )
    trainer.fit(model, loader(blobs(64), 32), **options)
    return trainer


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    model = Composed(block=Block(depth=3).hparams, loss=nn.SmoothL1Loss(beta=0.5))
    return Path(_fit(tmp_path, model).checkpoint_callback.last_model_path)  # type: ignore[union-attr]


def test_a_trusted_read_gets_the_objects_back_as_from_lightnings_files(saved: Path) -> None:
    # What a project's own loading code (torch.load with weights_only=False) relies on.
    hparams = torch.load(saved, weights_only=False)["hyper_parameters"]
    assert hparams["block"] == {"depth": 3, "activation": nn.ReLU}
    assert hparams["block"].activation is nn.ReLU  # an AttributeDict, as saved
    assert isinstance(hparams["loss"], nn.SmoothL1Loss) and hparams["loss"].beta == 0.5
    built = hparams["block"].pop("activation")(**{})
    assert isinstance(built, nn.ReLU)


def test_a_safe_read_runs_nothing_and_its_digest_holds(saved: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "changed after trainkit wrote it"
        hparams = load(saved)["hyper_parameters"]
        from_memory = load(io.BytesIO(saved.read_bytes()))["hyper_parameters"]
    assert type(hparams["block"]) is dict and hparams["block"]["depth"] == 3
    activation = hparams["block"]["activation"]
    assert issubclass(activation, StandIn) and activation is not nn.ReLU
    assert repr(activation) == (
        "<class torch.nn.modules.activation.ReLU (not loaded: weights_only=True)>"
    )
    loss = hparams["loss"]
    assert isinstance(loss, StandIn) and not isinstance(loss, nn.Module)
    assert loss.state["beta"] == 0.5  # the stored state, as data
    assert repr(from_memory["loss"]) == repr(loss)


def test_a_file_with_objects_resumes_and_compares_them_by_their_text(
    saved: Path, tmp_path: Path
) -> None:
    assert (peek(saved) or {}).get("global_step") == 2  # found by ckpt_path="last"
    model = Composed(block=Block(depth=3).hparams, loss=nn.L1Loss())
    with pytest.warns(UserWarning, match=r"model\.init_args\.loss: 'SmoothL1Loss\(\)' -> 'L1Loss"):
        trainer = _fit(tmp_path, model, max_epochs=2, ckpt_path=saved)
    assert trainer.global_step == 4


def test_an_edited_object_is_not_damage(saved: Path) -> None:
    # The digest counts a hyperparameter object as one, whatever it holds: a file
    # whose objects a program replaced and saved again is edited, not corrupt.
    checkpoint = torch.load(saved, weights_only=False)
    checkpoint["hyper_parameters"]["loss"] = nn.MSELoss()
    torch.save(checkpoint, saved)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(load(saved, weights_only=False)["hyper_parameters"]["loss"], nn.MSELoss)


@pytest.fixture
def lightning_attribute_dict() -> Iterator[type]:
    # Lightning's AttributeDict, importable while the file is written and gone when it
    # is read: a project's old checkpoints, read where only trainkit is installed.
    names = ["lightning", "lightning.fabric", "lightning.fabric.utilities"]
    module = types.ModuleType("lightning.fabric.utilities.data")
    kind = type("AttributeDict", (dict,), {"__module__": module.__name__})
    module.AttributeDict = kind  # type: ignore[attr-defined]
    added = {name: types.ModuleType(name) for name in names if name not in sys.modules}
    sys.modules.update(added)
    sys.modules[module.__name__] = module
    try:
        yield kind
    finally:
        for name in [*added, module.__name__]:
            sys.modules.pop(name, None)


def test_lightnings_attribute_dicts_read_as_dicts(
    tmp_path: Path, lightning_attribute_dict: type
) -> None:
    path = tmp_path / "lightning.ckpt"
    model = Classifier()
    torch.save(
        {
            "pytorch-lightning_version": "2.6.0",
            "epoch": 0,
            "global_step": 0,
            "state_dict": model.state_dict(),
            "hyper_parameters": {"lr": 0.3, "optim": lightning_attribute_dict(momentum=0.9)},
        },
        path,
    )
    sys.modules.pop("lightning.fabric.utilities.data")
    assert load(path)["hyper_parameters"] == {"lr": 0.3, "optim": {"momentum": 0.9}}


def test_damage_inside_a_hyperparameter_object_is_caught(saved: Path) -> None:
    # The digest counts the object as one; the CRC of the record pickling it covers it.
    data = bytearray(saved.read_bytes())
    beta = b"G" + struct.pack(">d", 0.5)  # pickle's BINFLOAT of SmoothL1Loss(beta=0.5)
    at = data.find(beta)
    assert at > 0 and data.find(beta, at + 1) == -1
    data[at + 3] ^= 0x01  # 0.5 becomes another float: the file still unpickles
    saved.write_bytes(bytes(data))
    assert torch.load(saved, weights_only=False)["hyper_parameters"]["loss"].beta != 0.5
    for weights_only in (True, False):
        with pytest.raises(trainkit.CheckpointError, match="is corrupt"):
            load(saved, weights_only=weights_only)


class Normalizer:
    """An object of the user's own that a Module stores in its checkpoints."""

    def __init__(self) -> None:
        self.center = 1.0


class Counts(dict[str, int]):
    """A dict subclass of the user's own, stored the same way."""


class Slotted:
    """An object whose pickled state is a tuple (slots), not a dict of attributes."""

    __slots__ = ("scale",)

    def __init__(self) -> None:
        self.scale = 2.0


class StoresObjects(Classifier):
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["dataset_parameters"] = {
            "normalizer": Normalizer(),
            "counts": Counts(a=1),
            # numpy values pickle their state as a tuple, as slotted objects do.
            "center": np.float64(1.5),
            "scales": np.ones(3),
            "slotted": Slotted(),
        }


def test_objects_a_module_stores_do_not_hide_a_files_run(tmp_path: Path) -> None:
    # A run tells its own files from another run's by their lineage: objects elsewhere
    # in the file must not make its own last.ckpt look foreign (renamed to last-v1.ckpt).
    # (An even number of epochs: a run that took its own file for another's wrote
    # last-v1.ckpt every other epoch, and removed the one before.)
    trainer = _fit(tmp_path, StoresObjects(), max_epochs=4)
    folder = Path(trainer.checkpoint_callback.dirpath)  # type: ignore[union-attr]
    assert sorted(path.name for path in folder.iterdir()) == ["epoch=3-step=8.ckpt", "last.ckpt"]
    assert (peek(folder / "last.ckpt") or {}).get("lineage") is not None
    # Resuming needs those objects (on_load_checkpoint reads them): refused unless trusted.
    with pytest.raises(trainkit.CheckpointError, match="weights_only=False"):
        load(folder / "last.ckpt")
    stored = load(folder / "last.ckpt", weights_only=False)["dataset_parameters"]
    assert stored["normalizer"].center == 1.0 and stored["counts"] == {"a": 1}
    assert stored["center"] == 1.5 and stored["slotted"].scale == 2.0


def test_reading_a_files_plain_entries_imports_and_runs_nothing(tmp_path: Path) -> None:
    # A class the reading process has never imported, stored with its state.
    module = types.ModuleType("never_imported_here")
    source = "class Trap:\n    def __setstate__(self, state):\n        raise SystemExit"
    exec(source, module.__dict__)
    module.Trap.__module__ = "never_imported_here"
    sys.modules["never_imported_here"] = module
    try:
        trap = module.Trap()
        trap.__dict__["armed"] = True
        target = tmp_path / "file.ckpt"
        torch.save({"format": "x", "lineage": "abc", "objects": [trap, np.ones(2)]}, target)
    finally:
        del sys.modules["never_imported_here"]
    entries = plain_entries(target)
    assert entries["lineage"] == "abc" and "never_imported_here" not in sys.modules
    assert len(entries["objects"]) == 2


class NumpyValued(Classifier):
    """Hyperparameters computed with numpy: a float64 is a float, but pickles as numpy's."""

    def __init__(self, threshold: float = 0.5, scales: Any = None) -> None:
        super().__init__()
        self.save_hyperparameters()


def test_numpy_hyperparameters_are_objects_and_the_files_digest_holds(tmp_path: Path) -> None:
    trainer = _fit(tmp_path, NumpyValued(threshold=np.float64(0.25), scales=np.ones(2)))
    path = trainer.checkpoint_callback.best_model_path  # type: ignore[union-attr]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "changed after trainkit wrote it"
        assert isinstance(load(path)["hyper_parameters"]["threshold"], StandIn)
        trusted = load(path, weights_only=False)["hyper_parameters"]
    assert type(trusted["threshold"]) is np.float64 and trusted["threshold"] == 0.25
    refused = r"scales=array\(\[1\., 1\.\]\), threshold=0\.25 as objects"
    with pytest.raises(trainkit.CheckpointError, match=refused):
        NumpyValued.load_from_checkpoint(path)

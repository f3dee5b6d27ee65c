"""Hyperparameters that are objects: kept in checkpoints, rebuilt only from trusted files."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import trainkit
from tests.helpers import QUIET, BlobData, Classifier, blobs, loader
from trainkit.checkpoint.files import PICKLED_HYPER_PARAMS_KEY, CheckpointError, load


def halve(value: float) -> float:
    """A function passed as a hyperparameter (picklable: it has an import path)."""
    return value / 2


class WithObjects(Classifier):
    """Takes a loss module, a function and a kernel size as ``__init__`` arguments."""

    def __init__(
        self,
        loss: nn.Module | None = None,
        schedule: Callable[[float], float] = halve,
        kernel: tuple[int, int] = (3, 3),
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.loss = loss if loss is not None else nn.CrossEntropyLoss()

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return self.loss(self(x), y)  # type: ignore[no-any-return]


def _saved(tmp_path: Path, model: trainkit.Module, datamodule: Any = None) -> Path:
    trainer = trainkit.Trainer(max_steps=2, default_root_dir=str(tmp_path), **QUIET)
    if datamodule is None:
        trainer.fit(model, loader(blobs(64)))
    else:
        trainer.fit(model, datamodule=datamodule)
    path = tmp_path / "two.ckpt"
    trainer.save_checkpoint(path)
    return path


def _load(path: Path, **options: Any) -> WithObjects:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*eval mode")
        return WithObjects.load_from_checkpoint(path, **options)


def test_objects_are_rebuilt_with_weights_only_false_and_refused_without(tmp_path: Path) -> None:
    path = _saved(tmp_path, WithObjects(loss=nn.CrossEntropyLoss(label_smoothing=0.1)))

    # A safe read of the file still works: the objects are bytes in a tensor.
    checkpoint = torch.load(path, weights_only=True)
    assert checkpoint["hyper_parameters"]["loss"] == "CrossEntropyLoss()"  # what YAML readers see
    assert set(checkpoint[PICKLED_HYPER_PARAMS_KEY]) == {"loss", "schedule"}  # not the tuple

    with pytest.raises(CheckpointError) as refused:
        _load(path)
    message = str(refused.value)
    assert "loss=CrossEntropyLoss()" in message and "schedule=<function halve" in message
    assert "weights_only=False" in message  # the way out, for a file one trusts

    trusted = _load(path, weights_only=False)
    assert isinstance(trusted.hparams.loss, nn.CrossEntropyLoss)
    assert trusted.hparams.loss.label_smoothing == 0.1
    assert trusted.hparams.schedule is halve
    assert trusted.loss is trusted.hparams.loss  # __init__ received the object itself


def test_an_override_replaces_an_object_without_unpickling_anything(tmp_path: Path) -> None:
    path = _saved(tmp_path, WithObjects(loss=nn.CrossEntropyLoss(label_smoothing=0.1)))
    with pytest.raises(CheckpointError, match=r"hyperparameter schedule=<function halve"):
        _load(path, loss=nn.L1Loss())  # schedule is still an object from the file
    model = _load(path, loss=nn.L1Loss(), schedule=halve)
    assert isinstance(model.loss, nn.L1Loss)


def test_an_object_that_could_not_be_pickled_must_be_passed(tmp_path: Path) -> None:
    path = _saved(tmp_path, WithObjects(schedule=lambda value: value))
    with pytest.raises(CheckpointError, match=r"schedule could not be pickled.*schedule=\.\.\."):
        _load(path, weights_only=False)
    assert _load(path, schedule=halve).hparams.schedule is halve


def test_resume_and_evaluation_read_a_file_with_objects_safely(tmp_path: Path) -> None:
    path = _saved(tmp_path, WithObjects(loss=nn.CrossEntropyLoss(label_smoothing=0.1)))
    resumed = trainkit.Trainer(max_steps=3, **QUIET)
    same = WithObjects(loss=nn.CrossEntropyLoss(label_smoothing=0.1))
    resumed.fit(same, loader(blobs(64)), ckpt_path=path)
    assert resumed.global_step == 3
    results = trainkit.Trainer(**QUIET).test(
        WithObjects(), loader(blobs(32)), ckpt_path=path, verbose=False
    )
    assert results and "test/acc" in results[0]


def test_plain_hyperparameters_add_nothing(tmp_path: Path) -> None:
    path = _saved(tmp_path, Classifier(lr=0.05))
    assert PICKLED_HYPER_PARAMS_KEY not in load(path)


class TransformedData(BlobData):
    def __init__(self, batch_size: int = 32, transform: Callable[[float], float] = halve):
        super().__init__(batch_size)
        self.save_hyperparameters()


def test_a_datamodule_hyperparameter_object_needs_weights_only_false(tmp_path: Path) -> None:
    path = _saved(tmp_path, Classifier(), TransformedData(16))
    with pytest.raises(CheckpointError, match=r"transform=<function halve.*weights_only=False"):
        TransformedData.load_from_checkpoint(path)
    data = TransformedData.load_from_checkpoint(path, weights_only=False)
    assert data.hparams.transform is halve and data.batch_size == 16


class WithNetwork(Classifier):
    def __init__(self, net: nn.Module | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()


def test_a_network_recorded_as_a_hyperparameter_is_warned_about() -> None:
    with pytest.warns(UserWarning, match=r"records 'net', a Linear with weights.*ignore=\['net'\]"):
        WithNetwork(nn.Linear(2, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        WithObjects(loss=nn.CrossEntropyLoss())  # no weights: nothing stored twice
        WithNetwork()

"""Hyperparameters that are objects: kept in checkpoints, rebuilt only from trusted files."""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import trainkit
from tests.helpers import QUIET, BlobData, Classifier, blobs, loader
from trainkit.checkpoint.files import OBJECT_HYPER_PARAMS_KEY, CheckpointError, load


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

    # As in Lightning's files, the objects are pickled as they are: a project's own
    # trusted read gets them back, and torch's safe read refuses the file.
    trusted_read = torch.load(path, weights_only=False)["hyper_parameters"]
    assert isinstance(trusted_read["loss"], nn.CrossEntropyLoss)
    assert trusted_read["schedule"] is halve and trusted_read["kernel"] == (3, 3)
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global"):
        torch.load(path, weights_only=True)
    # trainkit's safe read puts inert stand-ins in their place; nothing of them runs.
    checkpoint = load(path)
    assert "CrossEntropyLoss object (not loaded" in repr(checkpoint["hyper_parameters"]["loss"])
    assert set(checkpoint[OBJECT_HYPER_PARAMS_KEY]) == {"loss", "schedule"}  # not the tuple
    assert checkpoint[OBJECT_HYPER_PARAMS_KEY]["loss"] == {"object": "CrossEntropyLoss()"}

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
    assert trusted.hparams.kernel == (3, 3)  # a tuple stays a tuple, as in Lightning
    assert checkpoint["hyper_parameters"]["kernel"] == (3, 3)  # in a safe load too


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
    assert OBJECT_HYPER_PARAMS_KEY not in load(path)


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
    with pytest.warns(UserWarning, match=r"records 'net', a dataset \(TensorDataset\).*ignore="):
        WithNetwork(blobs(8))  # type: ignore[arg-type]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        WithObjects(loss=nn.CrossEntropyLoss())  # no weights: nothing stored twice
        WithNetwork()


class Configured(Classifier):
    """Takes OmegaConf containers, as Hydra projects pass them."""

    def __init__(self, config: Any = None, widths: Any = None) -> None:
        super().__init__()
        self.save_hyperparameters()


def test_omegaconf_containers_come_back_as_such_from_any_load(tmp_path: Path) -> None:
    from omegaconf import DictConfig, ListConfig, OmegaConf

    config = OmegaConf.create({"lr": 0.1, "optimizer": {"name": "sgd"}, "scaled": "${lr}"})
    path = _saved(tmp_path, Configured(config, OmegaConf.create([8, 16])))
    assert torch.load(path, weights_only=True)["hyper_parameters"]["config"]["scaled"] == 0.1

    loaded = Configured.load_from_checkpoint(path)  # nothing unpickled: rebuilt from data
    assert isinstance(loaded.hparams.config, DictConfig)
    assert loaded.hparams.config.optimizer.name == "sgd"  # attribute access, as before
    assert isinstance(loaded.hparams.widths, ListConfig)
    assert list(loaded.hparams.widths) == [8, 16]

    class OneConfig(Classifier):
        def __init__(self, cfg: Any) -> None:
            super().__init__()
            self.save_hyperparameters(cfg)

    nested = OmegaConf.create({"model": {"width": 4}, "lr": 0.5})
    path = _saved(tmp_path / "one", OneConfig(nested))
    rebuilt = OneConfig.load_from_checkpoint(path)
    assert isinstance(rebuilt.hparams.model, DictConfig) and rebuilt.hparams.model.width == 4


def test_one_config_object_comes_back_as_its_type_and_a_whole_override_replaces_it(
    tmp_path: Path,
) -> None:
    from argparse import Namespace

    from omegaconf import DictConfig, OmegaConf

    class OneObject(trainkit.Module):
        # Not a subclass of Classifier, whose save_hyperparameters() would record cfg
        # itself as an argument too (a base class records its subclasses' arguments).
        def __init__(self, cfg: Any) -> None:
            super().__init__()
            self.save_hyperparameters(cfg)
            self.cfg = cfg
            self.layer = torch.nn.Linear(8, 3)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self.layer(batch[0]).square().mean()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    path = _saved(tmp_path, OneObject(OmegaConf.create({"width": 4, "lr": 0.5})))
    loaded = OneObject.load_from_checkpoint(path)
    assert isinstance(loaded.cfg, DictConfig) and loaded.cfg.width == 4
    assert OneObject.load_from_checkpoint(path, lr=0.1).cfg.lr == 0.1  # merged into it
    given = OmegaConf.create({"width": 8})
    assert OneObject.load_from_checkpoint(path, cfg=given).cfg is given  # replaces it

    path = _saved(tmp_path / "ns", OneObject(Namespace(width=3)))
    restored = OneObject.load_from_checkpoint(path).cfg
    assert isinstance(restored, Namespace) and restored.width == 3


class MetaScale(nn.Module):
    """A module whose repr reads a tensor on the meta device, which has no data."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.ones(2, device="meta"))

    def extra_repr(self) -> str:
        return f"scale={self.scale.tolist()}"


class RecordsAFlow(Classifier):
    """Records a module as a hyperparameter (it builds its layers from it later)."""

    def __init__(self, flow: nn.Module) -> None:
        super().__init__()
        self.save_hyperparameters()


def test_an_object_whose_repr_fails_is_saved_and_rebuilt(tmp_path: Path) -> None:
    with pytest.raises(NotImplementedError):
        repr(MetaScale())
    path = _saved(tmp_path, RecordsAFlow(MetaScale()))
    saved = torch.load(path, weights_only=False)
    assert "MetaScale" in str(saved[OBJECT_HYPER_PARAMS_KEY]["flow"])  # named by its class
    rebuilt = saved["hyper_parameters"]["flow"]
    assert isinstance(rebuilt, MetaScale) and rebuilt.scale.is_meta

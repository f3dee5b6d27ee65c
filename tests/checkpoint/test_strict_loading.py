"""``Module.strict_loading``: how every path that loads a checkpoint into a module matches keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, BlobData, Classifier


class WithHead(Classifier):
    """The classifier with one more layer, which the classifier's checkpoints do not hold."""

    def __init__(self, strict_keys: bool | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.extra_head = torch.nn.Linear(3, 3)
        if strict_keys is not None:
            self.strict_loading = strict_keys


def _saved(tmp_path: Path) -> Path:
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(Classifier(), datamodule=BlobData())
    path = tmp_path / "run.ckpt"
    trainer.save_checkpoint(path)
    return path


def test_strict_loading_defaults_to_true_and_is_settable() -> None:
    model = Classifier()
    assert model.strict_loading is True
    model.strict_loading = False
    assert model.strict_loading is False
    model.strict_loading = None  # as in Lightning: not set, so strict
    assert model.strict_loading is True


def test_evaluating_with_ckpt_path_follows_strict_loading(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    strict = WithHead()
    with pytest.raises(trainkit.CheckpointError, match=r"missing keys \(2\): extra_head"):
        trainkit.Trainer(**QUIET).validate(strict, datamodule=BlobData(), ckpt_path=path)

    loose = WithHead(strict_keys=False)
    with pytest.warns(UserWarning, match="keys missing from the checkpoint"):
        trainkit.Trainer(**QUIET).validate(loose, datamodule=BlobData(), ckpt_path=path)
    # The keys the checkpoint has were loaded.
    saved = torch.load(path, weights_only=True)["state_dict"]
    for key, tensor in saved.items():
        assert torch.equal(loose.state_dict()[key], tensor), key


class FrozenHead(WithHead):
    """A frozen head its checkpoints leave out (loaded from elsewhere, say), as Lightning's
    strict_loading documentation describes."""

    def __init__(self, strict_keys: bool | None = None, **kwargs: Any) -> None:
        super().__init__(strict_keys, **kwargs)
        self.extra_head.requires_grad_(False)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        state = super().state_dict(*args, **kwargs)
        for key in [key for key in state if key.startswith("extra_head.")]:
            del state[key]
        return state

    def configure_optimizers(self) -> Any:
        trainable = [p for p in self.parameters() if p.requires_grad]
        return torch.optim.SGD(trainable, lr=self.hparams.lr)


def test_a_resumed_fit_follows_strict_loading(tmp_path: Path) -> None:
    first = trainkit.Trainer(max_epochs=1, **QUIET)
    first.fit(FrozenHead(strict_keys=False), datamodule=BlobData())
    path = tmp_path / "run.ckpt"
    first.save_checkpoint(path)
    with pytest.raises(RuntimeError, match="extra_head"):
        trainkit.Trainer(max_epochs=2, **QUIET).fit(
            FrozenHead(), datamodule=BlobData(), ckpt_path=path
        )
    model = FrozenHead(strict_keys=False)
    head = model.extra_head.weight.clone()
    trainer = trainkit.Trainer(max_epochs=2, **QUIET)
    trainer.fit(model, datamodule=BlobData(), ckpt_path=path)
    assert trainer.current_epoch == 2  # resumed after the first epoch
    assert torch.equal(model.extra_head.weight, head)  # the head was left as it was


def test_load_from_checkpoint_takes_strict_loading_and_refuses_a_contradiction(
    tmp_path: Path,
) -> None:
    path = _saved(tmp_path)
    with pytest.raises(trainkit.CheckpointError, match="missing keys"):
        WithHead.load_from_checkpoint(path)
    with pytest.warns(UserWarning, match="keys missing from the checkpoint"):
        WithHead.load_from_checkpoint(path, strict=False)
    with pytest.warns(UserWarning, match="keys missing from the checkpoint"):
        assert not WithHead.load_from_checkpoint(path, strict_keys=False).strict_loading
    with pytest.raises(ValueError, match=r"in conflict with `WithHead\.strict_loading=False`"):
        WithHead.load_from_checkpoint(path, strict_keys=False, strict=True)

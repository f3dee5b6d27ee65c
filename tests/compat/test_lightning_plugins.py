"""Lightning's precision, layer-sync and checkpoint-IO plugins under trainkit's Trainer."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import MixedPrecision as MixedPrecisionCallback
from trainkit.lightning.plugins import (
    AsyncCheckpointIO,
    DoublePrecision,
    FSDPPrecision,
    HalfPrecision,
    MixedPrecision,
    Precision,
    TorchCheckpointIO,
    TorchSyncBatchNorm,
)


def _precision_callback(trainer: trainkit.Trainer) -> MixedPrecisionCallback:
    return next(cb for cb in trainer.callbacks if isinstance(cb, MixedPrecisionCallback))


@pytest.mark.parametrize(
    ("plugin", "precision", "dtype"),
    [
        (DoublePrecision(), "64-true", torch.float64),
        (HalfPrecision("bf16-true"), "bf16-true", torch.bfloat16),
        (MixedPrecision("bf16-mixed", "cpu"), "bf16-mixed", torch.float32),
        (FSDPPrecision("bf16-true"), "bf16-true", torch.bfloat16),
        (Precision(), "32-true", torch.float32),
    ],
)
def test_a_precision_plugin_is_the_precision_option(
    plugin: Precision, precision: str, dtype: torch.dtype
) -> None:
    trainer = trainkit.Trainer(plugins=[plugin], max_steps=2, **QUIET)
    model = Classifier()
    trainer.fit(model, loader(blobs(64)))
    assert trainer.precision == precision
    assert trainer.strategy.precision == precision  # what init_module and FSDP read
    assert next(model.parameters()).dtype == dtype


def test_a_float16_plugin_s_own_scaler_scales_the_loss() -> None:
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=1)
    trainer = trainkit.Trainer(
        plugins=MixedPrecision("16-mixed", "cpu", scaler=scaler), max_steps=3, **QUIET
    )
    trainer.fit(Classifier(), loader(blobs(96)))
    assert _precision_callback(trainer).scaler is scaler
    # growth_interval=1: each of the 3 finite steps doubled the scale.
    assert scaler.get_scale() == 2.0**13


def test_what_cannot_be_taken_is_refused_saying_so() -> None:
    with pytest.raises(ValueError, match=r"Received both precision='bf16-mixed' and a precision"):
        trainkit.Trainer(precision="bf16-mixed", plugins=[DoublePrecision()], **QUIET)
    with pytest.raises(ValueError, match="sets precision twice"):
        trainkit.Trainer(plugins=[DoublePrecision(), HalfPrecision()], **QUIET)
    with pytest.raises(ValueError, match="uses no gradient scaler"):
        MixedPrecision("bf16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu"))
    with pytest.raises(ValueError, match="takes 'bf16-true' or '16-true'"):
        HalfPrecision("32-true")

    class Custom(DoublePrecision):
        def convert_input(self, data: Any) -> Any:
            return data

    with pytest.raises(ValueError, match=r"Custom\(a subclass of DoublePrecision: .*precision='64"):
        trainkit.Trainer(plugins=[Custom()], **QUIET)

    class CloudIO(TorchCheckpointIO):
        pass

    with pytest.raises(ValueError, match=r"CloudIO\(a subclass of TorchCheckpointIO"):
        trainkit.Trainer(plugins=[CloudIO()], **QUIET)


def test_cluster_environments_of_ones_own_are_said_to_go_unused() -> None:
    # Lightning's names, from either package; the base class itself is no environment.
    from trainkit.lightning.fabric.plugins import CheckpointIO as FabricCheckpointIO
    from trainkit.lightning.fabric.plugins import ClusterEnvironment as FabricEnvironment
    from trainkit.lightning.plugins import CheckpointIO, ClusterEnvironment, LightningEnvironment

    assert FabricEnvironment is ClusterEnvironment and FabricCheckpointIO is CheckpointIO
    assert isinstance(LightningEnvironment(), ClusterEnvironment)
    with pytest.raises(ValueError, match=r"ClusterEnvironment\(the base class: pass Lightning"):
        trainkit.Trainer(plugins=[ClusterEnvironment()], **QUIET)

    class OwnCluster(LightningEnvironment):
        @property
        def main_address(self) -> str:
            return "head-node"

    with pytest.warns(UserWarning, match=r"the methods OwnCluster defines are not run"):
        trainkit.Trainer(plugins=[OwnCluster()], **QUIET)


def test_sync_batchnorm_and_checkpoint_io_plugins_are_taken(tmp_path: Path) -> None:
    trainer = trainkit.Trainer(plugins=[TorchSyncBatchNorm(), TorchCheckpointIO()], **QUIET)
    assert trainer.hardware.sync_batchnorm
    with pytest.warns(UserWarning, match="AsyncCheckpointIO: trainkit writes one-file"):
        trainer = trainkit.Trainer(
            plugins=[AsyncCheckpointIO()],
            default_root_dir=tmp_path,
            max_steps=2,
            **{**QUIET, "enable_checkpointing": True},
        )
    trainer.fit(Classifier(), loader(blobs(64)))
    assert Path(trainer.checkpoint_callback.last_model_path).is_file()


def test_the_plugins_work_on_their_own(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    synced = TorchSyncBatchNorm().apply(model)
    assert isinstance(synced[1], nn.SyncBatchNorm)
    synced[1].running_mean.fill_(0.5)
    reverted = TorchSyncBatchNorm().revert(synced)
    assert not isinstance(reverted[1], nn.SyncBatchNorm)
    assert torch.equal(reverted[1].running_mean, torch.full((4,), 0.5))
    assert reverted(torch.randn(3, 4)).shape == (3, 4)

    x, y = DoublePrecision().convert_input((torch.zeros(2), torch.tensor([1, 0])))
    assert (x.dtype, y.dtype) == (torch.float64, torch.int64)
    assert next(HalfPrecision().convert_module(nn.Linear(2, 2)).parameters()).dtype == torch.half
    with DoublePrecision().tensor_init_context():
        assert nn.Linear(2, 2).weight.dtype == torch.float64
    with MixedPrecision("bf16-mixed", "cpu").forward_context():
        assert nn.Linear(2, 2)(torch.zeros(1, 2)).dtype == torch.bfloat16

    io = TorchCheckpointIO()
    path = tmp_path / "state.ckpt"
    io.save_checkpoint({"state_dict": {"w": torch.ones(2)}}, path)
    assert torch.equal(io.load_checkpoint(path)["state_dict"]["w"], torch.ones(2))
    io.save_checkpoint({"path": tmp_path}, path)  # an object: loads only when asked to
    with pytest.raises(pickle.UnpicklingError):
        io.load_checkpoint(path)
    assert io.load_checkpoint(path, weights_only=False)["path"] == tmp_path
    io.remove_checkpoint(path)
    assert not path.exists()

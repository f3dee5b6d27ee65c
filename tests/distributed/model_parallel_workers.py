"""What the ModelParallelStrategy tests run in each process (spawn imports them by name)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)
from torch.utils.data import DataLoader, DistributedSampler

import trainkit
from tests.helpers import QUIET, blobs
from trainkit.distributed import sharding
from trainkit.strategies.model_parallel import ModelParallelStrategy

SEED = 7


class TensorParallelMlp(trainkit.Module):
    """An MLP whose hidden layer is split over the tensor-parallel processes
    (column-wise, then row-wise) and, with ``shard``, sharded over the data-parallel ones."""

    def __init__(self, shard: bool = True, hidden: int = 32) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.up = nn.Linear(8, hidden)
        self.down = nn.Linear(hidden, 3)
        self.mesh_seen: Any = "not configured"

    def configure_model(self) -> None:
        mesh = self.device_mesh
        self.mesh_seen = None if mesh is None else tuple(mesh.mesh_dim_names)
        if mesh is None or isinstance(self.up.weight, DTensor):
            return  # one device (load_from_checkpoint), or parallelized by an earlier stage
        plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
        parallelize_module(self, mesh["tensor_parallel"], plan)
        if self.hparams.shard:
            for layer in (self.up, self.down):
                fully_shard(layer, mesh=mesh["data_parallel"])
            fully_shard(self, mesh=mesh["data_parallel"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.relu(self.up(x)))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train/loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val/loss", F.cross_entropy(self(x), y), sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=0.01)


def _loader(batch_size: int, distributed: bool) -> DataLoader[Any]:
    data = blobs(192, seed=0)
    if distributed:  # under the strategy: its own sampler
        return DataLoader(data, batch_size=batch_size, shuffle=True)
    # One process: the permutation a DistributedSampler draws, as one process's order.
    sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=SEED)
    return DataLoader(data, batch_size=batch_size, sampler=sampler)


def train(
    sizes: tuple[Any, Any] | None,
    batch_size: int,
    steps: int,
    shard: bool = True,
    root: str | None = None,
    save_distributed_checkpoint: bool = True,
    ckpt_path: str | None = None,
) -> dict[str, Any]:
    """Train ``steps`` steps under ModelParallelStrategy(*sizes) (None: one device)."""
    torch.manual_seed(0)
    model = TensorParallelMlp(shard=shard)
    strategy: Any = "single_device"
    if sizes is not None:
        strategy = ModelParallelStrategy(
            *sizes, save_distributed_checkpoint=save_distributed_checkpoint
        )
    trainer = trainkit.Trainer(
        max_steps=steps,
        strategy=strategy,
        seed=SEED,
        val_check_interval=min(steps, 192 // 16),  # once, at the last step or the epoch's end
        default_root_dir=root,
        **{**QUIET, "enable_checkpointing": root is not None},
    )
    loaders = [_loader(batch_size, distributed=sizes is not None) for _ in range(2)]
    trainer.fit(model, *loaders, ckpt_path=ckpt_path)
    val_loss = float(trainer.callback_metrics["val/loss"])  # validation inside fit
    # A second stage of the same Trainer and model (set up again, not parallelized again).
    validated = trainer.validate(model, loaders[1], verbose=False)[0]["val/loss"]
    state = sharding.full_model_state(model) if sizes is not None else model.state_dict()
    last = trainer.checkpoint_callback.last_model_path if root is not None else None
    return {
        "state": {k: v.detach().cpu().clone() for k, v in state.items()},
        "mesh_seen": model.mesh_seen,
        "batches": trainer.num_training_batches,
        "val_loss": val_loss,
        "validated": validated,
        "last": last,
        "local_up": tuple(_local(model.up.weight).shape),
    }


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def train_many(cases: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """:func:`train` for each case, one after another in the same processes."""
    return [train(*case) for case in cases]

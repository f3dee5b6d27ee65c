"""What the FSDP strategy tests run in each process (spawn imports them by name)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, DistributedSampler

import trainkit
from tests.helpers import QUIET, blobs
from trainkit.distributed.sharding import full_model_state
from trainkit.strategies.fsdp import FSDPStrategy

SEED = 7


class Mlp(trainkit.Module):
    """A small float64 MLP (float64: reduction order cannot matter at rtol 1e-5)."""

    def __init__(self, optimizer: str = "sgd", manual: bool = False) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = not manual
        width = 16
        self.layers = nn.Sequential(
            nn.Linear(8, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh()
        )
        self.head = nn.Linear(width, 3)
        self.double()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(x.double()))  # type: ignore[no-any-return]

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor | None:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        if self.hparams.manual:
            optimizer = self.optimizers()
            optimizer.zero_grad()
            self.manual_backward(loss)
            optimizer.step()
            return None
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val/loss", F.cross_entropy(self(x), y), sync_dist=True)

    def configure_optimizers(self) -> Any:
        if self.hparams.optimizer == "adamw":
            return torch.optim.AdamW(self.parameters(), lr=0.01, weight_decay=0.1)
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


class LateMlp(trainkit.Module):
    """Layers built in configure_model (on the meta device under FSDP)."""

    def __init__(self, width: int = 64, depth: int = 4) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layers: nn.Sequential | None = None
        self.peak_local_bytes = 0

    def configure_model(self) -> None:
        if self.layers is None:
            width, depth = self.hparams.width, self.hparams.depth
            self.layers = nn.Sequential(
                nn.Linear(8, width), *[nn.Linear(width, width) for _ in range(depth)]
            )

    def local_bytes(self) -> int:
        total = 0
        for parameter in self.parameters():
            data = parameter.to_local() if hasattr(parameter, "to_local") else parameter
            total += data.numel() * data.element_size()
        return total

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.peak_local_bytes = max(self.peak_local_bytes, self.local_bytes())
        x, y = batch
        assert self.layers is not None
        return F.cross_entropy(self.layers(x)[:, :3], y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def _loader(fsdp: bool, batch_size: int) -> DataLoader[Any]:
    data = blobs(160, seed=0)
    if fsdp:
        return DataLoader(data, batch_size=batch_size, shuffle=True)  # automatic sampler
    # The permutation a DistributedSampler draws, as one process's order.
    sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=SEED)
    return DataLoader(data, batch_size=batch_size, sampler=sampler)


def train(
    options: dict[str, Any] | None,
    batch_size: int,
    steps: int,
    settings: dict[str, Any] | None = None,
    model_options: dict[str, Any] | None = None,
    root: str | None = None,
    ckpt_path: str | None = None,
) -> dict[str, Any]:
    """Train Mlp ``steps`` steps under FSDPStrategy(**options), or on one device (None)."""
    torch.manual_seed(0)
    model = Mlp(**(model_options or {}))
    strategy: Any = FSDPStrategy(**options) if options is not None else "single_device"
    trainer = trainkit.Trainer(
        max_steps=steps,
        strategy=strategy,
        seed=SEED,
        default_root_dir=root,
        **{**QUIET, "enable_checkpointing": root is not None, **(settings or {})},
    )
    loaders = [_loader(options is not None, batch_size)]
    if "val_check_interval" in (settings or {}):  # validation inside fit
        loaders.append(DataLoader(blobs(64, seed=1), batch_size=batch_size))
    trainer.fit(model, *loaders, ckpt_path=ckpt_path)
    state = full_model_state(model) if options is not None else model.state_dict()
    return {
        "val_loss": float(trainer.callback_metrics.get("val/loss", float("nan"))),
        "state": {k: v.detach().clone() for k, v in state.items()},
        "rank": trainer.global_rank,
        "best": trainer.checkpoint_callback.best_model_path if root else None,
        "last": trainer.checkpoint_callback.last_model_path if root else None,
    }


def train_many(runs: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """:func:`train` once per argument tuple, in the same processes (one start for many fits)."""
    return [train(*arguments) for arguments in runs]


def train_on_meta(width: int, steps: int) -> dict[str, Any]:
    """Train LateMlp (built on the meta device, sharded) for ``steps`` steps."""
    torch.manual_seed(0)
    model = LateMlp(width=width)
    trainer = trainkit.Trainer(max_steps=steps, strategy=FSDPStrategy(), seed=SEED, **QUIET)
    trainer.fit(model, DataLoader(blobs(64), batch_size=8))
    full = sum(v.numel() * v.element_size() for v in full_model_state(model).values())
    return {
        "peak_local_bytes": model.peak_local_bytes,
        "full_bytes": full,
        "global_step": trainer.global_step,
        "finite": all(
            bool(torch.isfinite(p.full_tensor()).all())  # type: ignore[operator]
            for p in model.parameters()
        ),
    }


def late_dtypes(precision: str, meta_init: bool) -> dict[str, Any]:
    """The dtypes of LateMlp's layers (built in configure_model) after a 2-step fit."""
    torch.manual_seed(0)
    model = LateMlp(width=16, depth=1)
    trainer = trainkit.Trainer(
        max_steps=2, strategy=FSDPStrategy(meta_init=meta_init), precision=precision, **QUIET
    )
    trainer.fit(model, DataLoader(blobs(32), batch_size=8))
    return {
        "dtypes": {str(p.dtype) for p in model.parameters()},
        "finite": all(bool(torch.isfinite(p.full_tensor()).all()) for p in model.parameters()),  # type: ignore[operator]
    }

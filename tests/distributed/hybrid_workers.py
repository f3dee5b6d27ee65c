"""What the hybrid strategy tests run in each process (spawn imports them by name)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, DistributedSampler

import trainkit
from tests.helpers import QUIET, blobs
from trainkit.strategies.hybrid import HybridStrategy

SEED = 7


class EightLayers(trainkit.Module):
    """An 8-layer MLP whose forward is ``self.layers``; stages come from configure_stages."""

    def __init__(self, lr: float = 0.2) -> None:
        super().__init__()
        self.save_hyperparameters()
        width = 32
        blocks: list[nn.Module] = [nn.Sequential(nn.Linear(8, width), nn.Tanh())]
        blocks += [nn.Sequential(nn.Linear(width, width), nn.Tanh()) for _ in range(6)]
        self.layers = nn.Sequential(*blocks, nn.Linear(width, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)  # type: ignore[no-any-return]

    def configure_stages(self) -> nn.Sequential:
        return self.layers

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train/loss", loss)
        return loss

    def pipeline_loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(output, target)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val/acc", (self(x).argmax(dim=1) == y).float().mean(), sync_dist=True)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class StepLosses(trainkit.Callback):
    """This process's ``train/loss`` after each training batch."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
        self.losses.append(float(trainer.callback_metrics["train/loss"]))


def _model() -> EightLayers:
    torch.manual_seed(0)
    return EightLayers()


def train(
    options: dict[str, Any],
    batch_size: int,
    steps: int,
    root: str | None = None,
    ckpt_path: str | None = None,
) -> dict[str, Any]:
    """Train EightLayers for ``steps`` steps; ``options`` None means one device."""
    model = _model()
    data = blobs(256, seed=0)
    if options:
        strategy: Any = HybridStrategy(**options)
        loader: Any = DataLoader(data, batch_size=batch_size, shuffle=True)  # automatic sampler
    else:
        # The permutation a DistributedSampler draws, as one process's order.
        strategy = "single_device"
        sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=SEED)
        loader = DataLoader(data, batch_size=batch_size, sampler=sampler)
    settings = {**QUIET, "enable_checkpointing": root is not None}
    losses = StepLosses()
    trainer = trainkit.Trainer(
        callbacks=[losses],
        max_steps=steps,
        strategy=strategy,
        seed=SEED,
        default_root_dir=root,
        val_check_interval=3,
        **settings,
    )
    validation = DataLoader(blobs(37, seed=3), batch_size=8)
    trainer.fit(model, loader, validation, ckpt_path=ckpt_path)
    partition = getattr(trainer.strategy, "partition", None)
    return {
        "rank": trainer.strategy.global_rank,
        "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "split_restored": type(model.layers) is nn.Sequential,
        "sizes": partition.sizes if partition is not None else None,
        "val_acc": float(trainer.callback_metrics["val/acc"]),
        "losses": losses.losses,
    }


class Heavy(nn.Module):
    """A layer that costs far more than its neighbours."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(60):
            x = torch.tanh(self.linear(x))
        return x


class WithHeavyLayer(EightLayers):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(8, 64), nn.Tanh(), Heavy(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 3)
        )
        self.example_input_array = torch.randn(64, 8)


def balance_by_time() -> tuple[int, ...]:
    torch.set_num_threads(1)  # timings on a shared CPU: keep the heavy layer clearly heavy
    trainer = trainkit.Trainer(
        max_steps=1, strategy=HybridStrategy(stage_devices=3, balance="time"), **QUIET
    )
    trainer.fit(WithHeavyLayer(), DataLoader(blobs(64), batch_size=16))
    partition = trainer.strategy.partition  # type: ignore[attr-defined]
    return tuple(partition.sizes)

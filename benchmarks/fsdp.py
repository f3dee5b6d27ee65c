"""Per-rank memory of parameters + gradients + optimizer state: DDP against FSDP.

A ~50M-parameter MLP (8 blocks of Linear 2048x2048 + ReLU, float32) takes one
AdamW step (so gradients and both moment buffers exist) on 1, 2 and 4 gloo
processes on the CPU, under trainkit's DDPStrategy and FSDPStrategy. Each rank
counts the bytes of the tensors it holds locally (a DTensor's local shard),
not the process's RSS. FSDP's figure should be DDP's / N (within 10%).

Run from the repository root::

    PYTHONPATH=. python benchmarks/fsdp.py [--width 2048] [--blocks 12]
"""

from __future__ import annotations

import argparse

import torch
from _wide import Wide  # benchmarks/_wide.py, beside this script
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from tests.distributed.spawn import run_processes
from trainkit.strategies.ddp import DDPStrategy
from trainkit.strategies.fsdp import FSDPStrategy


class Measured(Wide):
    """:class:`Wide`, counting the bytes this rank holds after each optimizer step."""

    def __init__(self, width: int, blocks: int) -> None:
        super().__init__(width, blocks)
        self.measured = 0

    def on_before_zero_grad(self, optimizer: torch.optim.Optimizer) -> None:
        # After the step, before zero_grad: gradients and AdamW's moments all exist.
        self.measured = local_bytes(self, optimizer)


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def local_bytes(module: nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Bytes of parameters, gradients and optimizer state this rank holds."""
    tensors = []
    for parameter in module.parameters():
        tensors.append(_local(parameter))
        if parameter.grad is not None:
            tensors.append(_local(parameter.grad))
    for state in optimizer.state.values():
        tensors += [_local(v) for v in state.values() if isinstance(v, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def worker(kind: str, width: int, blocks: int) -> int:
    torch.manual_seed(0)
    model = Measured(width, blocks)
    strategy = FSDPStrategy() if kind == "fsdp" else DDPStrategy()
    trainer = trainkit.Trainer(
        max_steps=1,
        strategy=strategy,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.fit(model, DataLoader(TensorDataset(torch.randn(8, width)), batch_size=2))
    return model.measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--blocks", type=int, default=12)
    args = parser.parse_args()
    parameters = args.blocks * (args.width * args.width + args.width)
    print(f"model: {parameters / 1e6:.1f}M parameters, AdamW, float32")
    print(f"{'ranks':>5} {'DDP MiB/rank':>13} {'FSDP MiB/rank':>14} {'FSDP/(DDP/N)':>13}")
    for ranks in (1, 2, 4):
        ddp = run_processes(worker, ranks, "ddp", args.width, args.blocks, timeout=600)
        fsdp = run_processes(worker, ranks, "fsdp", args.width, args.blocks, timeout=600)
        ratio = max(fsdp) / (max(ddp) / ranks)
        print(f"{ranks:>5} {max(ddp) / 2**20:>13.1f} {max(fsdp) / 2**20:>14.1f} {ratio:>13.3f}")


if __name__ == "__main__":
    main()

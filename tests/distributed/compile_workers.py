"""Functions the compile tests run in each process (spawn imports them by name)."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader

import trainkit
from tests.helpers import QUIET, Classifier, blobs


def train(compile: Any, steps: int) -> dict[str, Any]:
    """Train the blob classifier under DDP; count the graphs torch's DDP optimizer compiled."""
    from torch._dynamo.backends.distributed import DDPOptimizer

    calls = [0]
    original = DDPOptimizer.compile_fn

    def counted(self: Any, graph: Any, inputs: Any) -> Any:
        calls[0] += 1
        return original(self, graph, inputs)

    DDPOptimizer.compile_fn = counted  # type: ignore[method-assign]
    torch.manual_seed(0)
    model = Classifier(lr=0.2)
    loader = DataLoader(blobs(256, seed=0), batch_size=16, shuffle=True)
    trainer = trainkit.Trainer(
        max_steps=steps, strategy="ddp", seed=7, compile=compile, limit_val_batches=0, **QUIET
    )
    trainer.fit(model, loader)
    return {
        "state": {k: v.clone() for k, v in model.state_dict().items()},
        "ddp_optimizer_graphs": calls[0],
    }

"""What the FSDP option tests run in each process (spawn imports them by name)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor
from torch.nn import functional as F

import trainkit
from tests.distributed.fsdp_workers import SEED, _loader
from tests.helpers import QUIET
from trainkit.distributed.sharding import full_model_state
from trainkit.strategies.fsdp import FSDPStrategy

#: FSDPStrategy options that make its checkpoint one ordinary file (the default now).
ONE_FILE: dict[str, Any] = {}


class Block(nn.Module):
    """A residual tanh layer: the unit the options select by class."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.linear(x))


class Net(trainkit.Module):
    """stem -> blocks (a ModuleList of Block) -> head; float64 unless told otherwise."""

    def __init__(self, dtype: str = "float64", depth: int = 2, width: int = 16) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.stem = nn.Linear(8, width)
        self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])
        self.head = nn.Linear(width, 3)
        self.to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.stem(x.to(self.stem.weight.dtype)))
        for block in self.blocks:
            x = block(x)
        return self.head(x)  # type: ignore[no-any-return]

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x).float(), y)

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        grads = {str(p.grad.dtype) for p in self.parameters() if p.grad is not None}
        self.gradient_dtypes = getattr(self, "gradient_dtypes", set()) | grads

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


#: How many graphs :func:`counting_backend` compiled in this process's current run.
GRAPHS = [0]


def counting_backend(graph: torch.fx.GraphModule, inputs: Any) -> Any:
    """torch.compile's "aot_eager" backend (no C++ code), counting the graphs it gets."""
    from torch._dynamo.backends.registry import lookup_backend

    GRAPHS[0] += 1
    return lookup_backend("aot_eager")(graph, inputs)


class SelfShardedNet(Net):
    """Shards its blocks itself (``configure_sharding``), leaving stem and head to the root."""

    def configure_sharding(self, mesh: DeviceMesh) -> None:
        self.sharded_on = tuple(mesh.shape)
        for block in self.blocks:
            fully_shard(block, mesh=mesh)


def train(
    options: dict[str, Any] | None,
    steps: int,
    settings: dict[str, Any] | None = None,
    model_options: dict[str, Any] | None = None,
    root: str | None = None,
    self_sharded: bool = False,
) -> dict[str, Any]:
    """Train Net ``steps`` steps (global batch 16) under FSDPStrategy(**options) over the
    job's processes, or on one device (``options=None``); what the tests look at."""
    torch.manual_seed(0)
    model = (SelfShardedNet if self_sharded else Net)(**(model_options or {}))
    calls = [0]  # forward calls of the blocks (recomputations included)
    seen: set[tuple[str, str]] = set()  # the head's (weight, output) dtypes in forward
    first = model.blocks[0].linear  # by the head's forward, its forward is done
    resharded: set[bool] = set()  # whether it was back to its shard by then
    for block in model.blocks:
        block.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))

    def look(head: nn.Module, _: Any, output: torch.Tensor) -> None:
        seen.add((str(head.weight.dtype), str(output.dtype)))
        resharded.add(isinstance(first.weight, DTensor))

    model.head.register_forward_hook(look)
    GRAPHS[0] = 0
    fsdp = options is not None
    strategy: Any = FSDPStrategy(**options) if fsdp else "single_device"
    trainer = trainkit.Trainer(
        max_steps=steps,
        strategy=strategy,
        seed=SEED,
        default_root_dir=root,
        **{**QUIET, "enable_checkpointing": root is not None, **(settings or {})},
    )
    batch_size = 16 // trainer.world_size
    trainer.fit(model, _loader(fsdp, batch_size))
    state = full_model_state(model) if fsdp else model.state_dict()
    return {
        "state": {k: v.detach().clone() for k, v in state.items()},
        "units": sorted(name for name, m in model.named_modules() if isinstance(m, FSDPModule)),
        "parameter_dtypes": {str(p.dtype) for p in model.parameters()},
        "gradient_dtypes": getattr(model, "gradient_dtypes", set()),
        "head_in_forward": seen,
        "block_calls": calls[0],
        "resharded_after_forward": resharded,
        "compiled_graphs": GRAPHS[0],
        "sharded_on": getattr(model, "sharded_on", None),
        "last": trainer.checkpoint_callback.last_model_path if root else None,
    }


def refused(options: dict[str, Any], settings: dict[str, Any] | None = None) -> str:
    """The message of the error a fit under FSDPStrategy(**options) stops with."""
    try:
        train(options, 1, settings)
    except ValueError as error:
        return str(error)
    raise AssertionError(f"FSDPStrategy(**{options}) with {settings} trained")


def run_cases(cases: dict[str, tuple[str, tuple[Any, ...]]]) -> dict[str, Any]:
    """Each case ``name: (function name, arguments)`` in turn, in the same processes."""
    functions = {"train": train, "refused": refused}
    results: dict[str, Any] = {}
    for name, (function, arguments) in cases.items():
        if "compile" in name:
            torch._dynamo.reset()
        results[name] = functions[function](*arguments)
    return results

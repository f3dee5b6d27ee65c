"""What the pipeline tests run in each process, and the single-process runs they compare with."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn import functional as F

from trainkit.pipelining.pipeline import RankPipeline

MICRO_BATCHES = 4
SCHEDULES = ("gpipe", "1f1b")
OPTIMIZERS = ("sgd", "adam")
FULL_STEPS = (16, 16, 16)  # global rows per step
PARTIAL_STEPS = (16, 8, 16)  # a smaller batch in between, as at an epoch's end


def mlp() -> nn.Sequential:
    """Eight layers, the same initial weights in every process."""
    torch.manual_seed(0)
    width = 16
    return nn.Sequential(
        nn.Linear(6, width),
        nn.Tanh(),
        nn.Linear(width, width),
        nn.Tanh(),
        nn.Linear(width, width),
        nn.Tanh(),
        nn.Linear(width, width),
        nn.Linear(width, 3),
    )


def optimizer_for(name: str, model: nn.Module) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=0.1)
    return torch.optim.Adam(model.parameters(), lr=0.01)


def batches(rows_per_step: Sequence[int]) -> list[tuple[Tensor, Tensor]]:
    generator = torch.Generator().manual_seed(1)
    return [
        (torch.randn(rows, 6, generator=generator), torch.randn(rows, 3, generator=generator))
        for rows in rows_per_step
    ]


def replica_part(tensor: Tensor, data_rank: int, data_size: int) -> Tensor:
    """Data replica ``data_rank``'s contiguous share of a global batch."""
    return tensor.chunk(data_size)[data_rank]


def train_reference(optimizer_name: str, rows_per_step: Sequence[int]) -> dict[str, Any]:
    """One process, the whole global batch each step."""
    model = mlp()
    optimizer = optimizer_for(optimizer_name, model)
    for x, y in batches(rows_per_step):
        optimizer.zero_grad()
        F.mse_loss(model(x), y).backward()  # type: ignore[no-untyped-call]
        optimizer.step()
    return {"state": model.state_dict(), "optimizer": optimizer.state_dict()}


def replica_losses(rows_per_step: Sequence[int], data_size: int) -> Tensor:
    """The loss each data replica sees at each step of ``train_reference`` with SGD."""
    model = mlp()
    optimizer = optimizer_for("sgd", model)
    losses = []
    for x, y in batches(rows_per_step):
        with torch.no_grad():
            losses.append(
                torch.stack(
                    [
                        F.mse_loss(model(a), b)
                        for a, b in zip(x.chunk(data_size), y.chunk(data_size), strict=True)
                    ]
                )
            )
        optimizer.zero_grad()
        F.mse_loss(model(x), y).backward()  # type: ignore[no-untyped-call]
        optimizer.step()
    return torch.stack(losses)


def reference_gradients(rows: int) -> dict[str, Tensor]:
    model = mlp()
    ((x, y),) = batches([rows])
    F.mse_loss(model(x), y).backward()  # type: ignore[no-untyped-call]
    return {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


def _pipeline(
    schedule: str,
    pipe_size: int = 2,
    layers: nn.Sequential | None = None,
    micro_batches: int = MICRO_BATCHES,
) -> RankPipeline:
    return RankPipeline(
        mlp() if layers is None else layers,
        None,
        pipe_size=pipe_size,
        micro_batches=micro_batches,
        schedule=schedule,
        loss_fn=F.mse_loss,
        device=torch.device("cpu"),
    )


def _train(
    schedule: str, optimizer_name: str, rows_per_step: Sequence[int], only_needed: bool
) -> dict[str, Any]:
    pipeline = _pipeline(schedule)
    optimizer = optimizer_for(optimizer_name, pipeline.layers)
    losses = []
    for x, y in batches(rows_per_step):
        x = replica_part(x, pipeline.data_rank, pipeline.data_size)
        y = replica_part(y, pipeline.data_rank, pipeline.data_size)
        if only_needed:  # ranks that need no inputs or targets get none
            x = x if pipeline.is_first_stage else None  # type: ignore[assignment]
            y = y if pipeline.is_last_stage else None  # type: ignore[assignment]
        optimizer.zero_grad()
        losses.append(pipeline.train_step(x, y))
        optimizer.step()
    before_sync = {k: v.clone() for k, v in pipeline.layers.state_dict().items()}
    pipeline.sync_parameters()
    return {
        "owned": list(pipeline.stage_layers),
        "stage_names": list(pipeline.stage_module._modules),
        "data_rank": pipeline.data_rank,
        "losses": torch.stack(losses),
        "before_sync": before_sync,
        "state": {k: v.clone() for k, v in pipeline.layers.state_dict().items()},
        "optimizer": pipeline.merge_optimizer_state(optimizer),
    }


def _accumulate(rows: int) -> dict[str, Tensor]:
    """Half batches with ``sync_gradients=False`` then ``True``; the owned gradients."""
    pipeline = _pipeline("gpipe")
    ((x, y),) = batches([rows])
    x = replica_part(x, pipeline.data_rank, pipeline.data_size)
    y = replica_part(y, pipeline.data_rank, pipeline.data_size)
    for index, (part_x, part_y) in enumerate(zip(x.chunk(2), y.chunk(2), strict=True)):
        pipeline.train_step(part_x, part_y, sync_gradients=index == 1, loss_scale=0.5)
    return {
        name: p.grad.clone() for name, p in pipeline.layers.named_parameters() if p.grad is not None
    }


def _error(action: Callable[[], object]) -> str:
    try:
        action()
    except ValueError as error:
        return str(error)
    return "no error"


def _errors() -> dict[str, str]:
    world_size = dist.get_world_size()
    pipeline = _pipeline("gpipe")
    ((x, y),) = batches([8])
    errors = {
        "indivisible world": _error(lambda: _pipeline("gpipe", pipe_size=world_size + 1)),
        "too few layers": _error(lambda: _pipeline("gpipe", layers=nn.Sequential(nn.Linear(6, 3)))),
        "unknown schedule": _error(lambda: _pipeline("1fb1")),
        "1f1b micro-batches": _error(lambda: _pipeline("1f1b", micro_batches=1)),
        "uneven micro-batches": _error(lambda: pipeline.train_step(x[:6], y[:6])),
        "missing inputs": _error(lambda: pipeline.train_step(None, y)),
    }
    # The pipeline still works after the refused steps: no rank was left waiting.
    errors["afterwards"] = f"loss {pipeline.train_step(x, y).item():.3f}"
    return errors


def scenarios() -> dict[str, Any]:
    """Everything the tests check, in one process group (spawning is the slow part)."""
    dist.init_process_group("gloo")
    results: dict[str, Any] = {
        f"{schedule}-{name}": _train(schedule, name, FULL_STEPS, only_needed=False)
        for schedule in SCHEDULES
        for name in OPTIMIZERS
    }
    results["partial"] = _train("1f1b", "sgd", PARTIAL_STEPS, only_needed=True)
    results["accumulated"] = _accumulate(32)
    results["errors"] = _errors()
    return results

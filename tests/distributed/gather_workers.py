"""Worker functions for tests/distributed/test_all_gather.py (spawn imports them by name)."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from tests.helpers import QUIET


class Gathering(trainkit.Module):
    """Gathers a rank-dependent tensor, a nested collection and a number in its first step."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.seen: dict[str, Any] = {}

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        rank = self.trainer.global_rank
        if batch_idx == 0:
            mine = torch.full((2, 3), float(rank))
            self.seen["tensor"] = self.all_gather(mine)
            self.seen["nested"] = self.all_gather({"a": [mine[0], torch.tensor(rank)]})
            self.seen["number"] = self.all_gather(rank * 10)
            self.seen["input"] = mine
        (x,) = batch
        return self.layer(x).sum()

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def gather_in_a_module(strategy: str) -> dict[str, Any]:
    data = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=2)
    trainer = trainkit.Trainer(max_steps=1, strategy=strategy, **QUIET)
    module = Gathering()
    trainer.fit(module, data)
    return module.seen


def gather_gradients() -> dict[str, Any]:
    """Every rank's input gathered with sync_grads=True; each rank's loss weighs the slots."""
    import torch.distributed as dist

    from trainkit.distributed.gather import gather

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = torch.tensor([rank + 1.0, 2.0 * rank + 1.0], requires_grad=True)
    gathered = gather(mine, sync_grads=True)
    # Rank s's loss weighs slot j by (s + 1) * (j + 1).
    slots = torch.arange(1.0, world + 1.0).unsqueeze(1)
    (gathered * slots * (rank + 1)).sum().backward()
    detached = gather(mine.detach().requires_grad_(), sync_grads=False)
    return {
        "gathered": gathered.detach(),
        "grad": mine.grad,
        "without_sync_has_graph": detached.requires_grad,
        "world": world,
    }


class Ring(trainkit.Callback):
    """Each rank sends its rank to the next and receives from the previous (isend/irecv)."""

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def on_train_start(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
        import torch.distributed as dist

        strategy = trainer.strategy
        rank, world, group = strategy.global_rank, strategy.world_size, strategy.process_group
        outgoing, incoming = torch.tensor([float(rank)]), torch.zeros(1)
        sent = dist.isend(outgoing, dst=(rank + 1) % world, group=group)
        received = dist.irecv(incoming, src=(rank - 1) % world, group=group)
        sent.wait()
        received.wait()
        self.seen["received"] = incoming.item()
        self.seen["sum"] = strategy.all_reduce(torch.tensor(float(rank)), op="sum").item()
        self.seen["broadcast"] = strategy.broadcast(f"from rank {rank}", src=0)
        self.seen["any"] = strategy.reduce_boolean_decision(rank == 1, all=False)
        self.seen["all"] = strategy.reduce_boolean_decision(rank == 1, all=True)
        strategy.barrier("ring")


def ring() -> dict[str, Any]:
    data = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=2)
    callback = Ring()
    trainer = trainkit.Trainer(max_steps=1, strategy="ddp", callbacks=[callback], **QUIET)
    trainer.fit(Gathering(), data)
    return callback.seen


def reduce_in_a_callback() -> dict[str, Any]:
    """Lightning's strategy.reduce, from a callback inside a DDP fit."""
    seen: dict[str, Any] = {}

    class Reducing(trainkit.Callback):
        def on_train_start(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
            strategy, rank = trainer.strategy, trainer.global_rank
            summed = torch.tensor([rank + 1.0, 10.0])
            returned = strategy.reduce(summed, reduce_op="sum")
            seen["sum"], seen["in_place"] = summed.tolist(), returned is summed
            seen["mean"] = strategy.reduce(torch.tensor(rank + 1.0)).item()
            seen["max"] = strategy.reduce(torch.tensor(rank), reduce_op="max").item()
            seen["avg_int"] = strategy.reduce(torch.tensor(rank + 2), reduce_op="avg").item()
            seen["number"] = strategy.reduce(1.5)  # not a tensor: as it is
            seen["model"] = type(strategy.model).__name__  # Lightning's: the wrapper
            seen["lightning_module"] = strategy.lightning_module is module
            seen["trainer.model"] = type(trainer.model).__name__

    data = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=2)
    trainer = trainkit.Trainer(max_steps=1, strategy="ddp", callbacks=[Reducing()], **QUIET)
    module = Gathering()
    trainer.fit(module, data)
    seen["after"] = trainer.model is module and trainer.strategy.model is module  # unwrapped
    return seen

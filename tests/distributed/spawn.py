"""Run a function in N gloo processes on this machine and collect each rank's result."""

from __future__ import annotations

import io
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.multiprocessing as mp

from trainkit.launch.environment import ClusterEnvironment
from trainkit.launch.launcher import free_port

__all__ = ["free_port", "run_processes"]


def _entry(
    fn: Callable[..., Any], rank: int, world_size: int, port: int, queue: Any, args: tuple[Any, ...]
) -> None:
    # The variables torchrun would set: trainkit reads them and joins the group.
    ClusterEnvironment.local(rank, world_size, port).export()
    try:
        # Bytes, not tensors: torch would share tensor memory with the parent by
        # file descriptor, which is gone once this process exits.
        buffer = io.BytesIO()
        torch.save(fn(*args), buffer)
        queue.put((rank, "ok", buffer.getvalue()))
    except BaseException:
        queue.put((rank, "error", traceback.format_exc()))
    finally:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def run_processes(
    fn: Callable[..., Any], world_size: int, *args: Any, timeout: float = 180
) -> list[Any]:
    """``fn(*args)`` in ``world_size`` spawned processes; the results by rank.

    ``fn`` must be a module-level function (spawn imports it by name). Raises with
    the failing rank's traceback if any rank fails.
    """
    context = mp.get_context("spawn")
    queue = context.Queue()
    port = free_port()
    processes = [
        context.Process(target=_entry, args=(fn, rank, world_size, port, queue, args))
        for rank in range(world_size)
    ]
    for process in processes:
        process.start()
    results: dict[int, Any] = {}
    try:
        for _ in range(world_size):
            rank, status, value = queue.get(timeout=timeout)
            if status == "error":
                raise AssertionError(f"rank {rank} failed:\n{value}")
            results[rank] = torch.load(io.BytesIO(value), weights_only=False)
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    return [results[rank] for rank in range(world_size)]

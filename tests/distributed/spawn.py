"""Run a function in N gloo processes on this machine and collect each rank's result."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.multiprocessing as mp

from trainkit.launch.environment import ClusterEnvironment
from trainkit.launch.launcher import free_port

__all__ = ["free_port", "run_by_hand", "run_processes"]

# What the forkserver imports before forking the ranks (what every rank imports anyway).
_PRELOAD = [
    "torch",
    # Imported lazily by torch itself in a rank that builds DistributedDataParallel
    # or an optimizer (its first add_param_group): about 1 s of CPU a rank here.
    "torch._dynamo",
    "torch.distributed",
    "trainkit",
    "trainkit.trainer.trainer",
    "tests.distributed.spawn",
]


def _entry(
    fn: Callable[..., Any],
    rank: int,
    world_size: int,
    port: int,
    queue: Any,
    args: tuple[Any, ...],
    environ: dict[str, str],
) -> None:
    # A forkserver child starts with the server's environment: take the caller's.
    os.environ.clear()
    os.environ.update(environ)
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

    ``fn`` must be a module-level function (the child imports it by name). Raises
    with the failing rank's traceback if any rank fails.

    The processes are forked from a server process that has imported torch and
    trainkit once (Python's ``forkserver`` start method), instead of each importing
    them again (``spawn``): about 3 s of CPU saved per process on the test machine.
    Each starts with the caller's current environment and working directory.
    """
    context = mp.get_context("forkserver")
    # Read when the server starts (the first call); later calls reuse the server.
    context.set_forkserver_preload(_PRELOAD)
    queue = context.Queue()
    port = free_port()
    environ = dict(os.environ)
    processes = [
        context.Process(target=_entry, args=(fn, rank, world_size, port, queue, args, environ))
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


def run_by_hand(commands: list[list[str]], timeout: float = 240) -> None:
    """Start each command as a plain subprocess, as a user would by hand; all must exit 0.

    No rank variables are passed on (each process is told who it is on its
    command line); the repository root is the working directory and on PYTHONPATH.
    """
    from tests.helpers import ROOT, repo_env

    root, env = str(ROOT), repo_env()
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        env.pop(name, None)
    processes = [
        subprocess.Popen(
            [sys.executable, *command],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for command in commands
    ]
    outputs = [process.communicate(timeout=timeout)[0] for process in processes]
    for process, output in zip(processes, outputs, strict=True):
        assert process.returncode == 0, output[-3000:]

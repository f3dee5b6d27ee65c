"""Launchers: how the processes of a job are started, chosen apart from the strategy.

A launcher runs one of the Trainer's entry points (fit, validate, ...) as the
ranks of a job. Under torchrun or SLURM the ranks already exist and trainkit
launches nothing; otherwise, for a multi-process strategy:

- :class:`ScriptLauncher` (``strategy="ddp"``/``"hybrid"`` from a plain
  ``python train.py``): re-runs the same command N-1 times, each with
  torchrun's variables (``RANK``, ``WORLD_SIZE``, ...) set, and runs the entry
  point itself as rank 0. The new processes run the script from the top, reach
  the same ``Trainer(...)``, see the variables and join the group, exactly as
  under ``torchrun --nproc-per-node N``. The rendezvous is torch's env:// on
  127.0.0.1 with a free port.
- :class:`~trainkit.launch.spawn.SpawnLauncher` (``strategy="ddp_spawn"``): runs
  the entry point in N new processes and hands rank 0's result back.

Building a launcher starts nothing: the processes start when the first entry
point runs.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from trainkit.launch.environment import ClusterEnvironment

if TYPE_CHECKING:
    from trainkit.trainer import Trainer

T = TypeVar("T")


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Launcher(ABC):
    """Runs a Trainer entry point as the ranks of a job."""

    #: This process's place in the job when it runs as a rank itself (None: it does not).
    environment: ClusterEnvironment | None = None

    @abstractmethod
    def launch(self, function: Callable[..., T], *args: Any, trainer: Trainer) -> T:
        """Run ``function(*args)`` (a bound entry point of ``trainer``) as the job's ranks.

        Args:
            function: the entry point's implementation.
            *args: its arguments.
            trainer: the Trainer it belongs to.

        Returns:
            What the function returned (on rank 0).
        """


class ScriptLauncher(Launcher):
    """Starts ranks 1..N-1 as copies of this command; this process is rank 0.

    Args:
        num_processes: N, the processes on this machine.

    Raises:
        RuntimeError: when there is no command to re-run (an interactive session
            or ``python -c``): checked when the launcher is built, before anything runs.
    """

    def __init__(self, num_processes: int) -> None:
        if not sys.argv or sys.argv[0] in ("", "-c") or "-c" in sys.orig_argv[1:2]:
            raise RuntimeError(
                f"devices={num_processes} with strategy='ddp' re-runs this program once per "
                "device, and an interactive session or `python -c` cannot be re-run. Put the "
                f"code in a script and run it with python or `torchrun --nproc-per-node "
                f"{num_processes}` (or use strategy='ddp_spawn' in a notebook)."
            )
        self.num_processes = num_processes
        self.command = [sys.executable, *sys.orig_argv[1:]]
        self.environment = ClusterEnvironment.local(0, num_processes, free_port())
        self._workers: list[subprocess.Popen[bytes]] = []

    def launch(self, function: Callable[..., T], *args: Any, trainer: Trainer) -> T:
        if not self._workers:  # once: later entry points run in the same job
            self._start_workers()
        return function(*args)

    def _start_workers(self) -> None:
        assert self.environment is not None
        port = self.environment.master_port
        for rank in range(1, self.num_processes):
            variables = ClusterEnvironment.local(rank, self.num_processes, port).variables()
            self._workers.append(subprocess.Popen(self.command, env={**os.environ, **variables}))
        atexit.register(_wait_for, self._workers)


def _wait_for(workers: list[subprocess.Popen[bytes]]) -> None:
    # Rank 0 is done: give the workers time to finish their own teardown, and end
    # them if they do not (a worker must never outlive the run it belongs to).
    for worker in workers:
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()

"""Starting the other local processes of a plain ``python train.py`` run.

``Trainer(strategy="ddp", devices=N)`` in a process that no launcher started
re-runs the same command N-1 times, each with torchrun's variables (``RANK``,
``WORLD_SIZE``, ...) set, and becomes rank 0 itself. The new processes run the
script from the top, reach the same ``Trainer(...)``, see the variables and join
the group, exactly as under ``torchrun --nproc-per-node N``. The rendezvous is
torch's env:// on 127.0.0.1 with a free port.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys

from trainkit.launch.environment import ClusterEnvironment


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def launch_local_workers(num_processes: int) -> ClusterEnvironment:
    """Start ranks 1..N-1 as copies of this command; return rank 0's environment.

    Args:
        num_processes: N, the processes on this machine.

    Raises:
        RuntimeError: when there is no command to re-run (an interactive
            session or notebook).
    """
    command = [sys.executable, *sys.orig_argv[1:]]
    if not sys.argv or sys.argv[0] in ("", "-c") or "-c" in sys.orig_argv[1:2]:
        raise RuntimeError(
            f"devices={num_processes} with strategy='ddp' re-runs this program once per "
            "device, and an interactive session or `python -c` cannot be re-run. Put the "
            f"code in a script and run it with python or `torchrun --nproc-per-node "
            f"{num_processes}`."
        )
    port = free_port()
    workers = []
    for rank in range(1, num_processes):
        variables = ClusterEnvironment.local(rank, num_processes, port).variables()
        workers.append(subprocess.Popen(command, env={**os.environ, **variables}))
    atexit.register(_wait_for, workers)
    return ClusterEnvironment.local(0, num_processes, port)


def _wait_for(workers: list[subprocess.Popen[bytes]]) -> None:
    # Rank 0 is done: give the workers time to finish their own teardown, and end
    # them if they do not (a worker must never outlive the run it belongs to).
    for worker in workers:
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()

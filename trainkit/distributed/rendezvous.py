"""How a process joins its job's process group: ``env://``, ``tcp://`` or ``file://``.

Under torchrun, SLURM or trainkit's own launcher the variables say where rank 0
is (``env://``; a torchrun attempt gets a namespace of its own in the agent's
store, see :func:`trainkit.launch.environment.attempt_store`). On a cluster
without either, ``DDPStrategy(init_method=...)`` names the meeting point
itself: ``tcp://HOST:PORT`` (rank 0 listens there) or ``file:///PATH`` (a file
every process can reach), with the rank and world size given or read from
``RANK``/``WORLD_SIZE``.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlparse

import torch.distributed as dist

from trainkit.launch.environment import ClusterEnvironment, attempt_store

SCHEMES = ("env://", "tcp://", "file://")
# How long leaving the process group waits for the backend's threads (see end_process_group).
_RELEASE_S = 0.05


def check_init_method(init_method: str | None) -> str | None:
    """``init_method`` if it is one trainkit can start a group with; else a ValueError.

    Args:
        init_method: ``env://``, ``tcp://HOST:PORT``, ``file:///PATH`` or None.

    Example:
        >>> check_init_method("tcp://10.1.1.20:23456")
        'tcp://10.1.1.20:23456'
    """
    if init_method is None:
        return None
    if not init_method.startswith(SCHEMES):
        raise ValueError(
            f"init_method={init_method!r} is not one of env://, tcp://HOST:PORT or "
            "file:///PATH (how the processes find each other)."
        )
    parsed = urlparse(init_method)
    if init_method.startswith("tcp://") and (not parsed.hostname or parsed.port is None):
        raise ValueError(
            f"init_method={init_method!r} needs a host and a port: tcp://HOST:PORT, where "
            "HOST is rank 0's machine and PORT a free port on it."
        )
    if init_method.startswith("file://") and not parsed.path:
        raise ValueError(f"init_method={init_method!r} needs a path: file:///shared/folder/file.")
    return init_method


def join_group(
    init_method: str | None, backend: str, environment: ClusterEnvironment, timeout: timedelta
) -> None:
    """Join the job's default process group.

    Args:
        init_method: None for the environment's ``env://`` (with a torchrun
            attempt's own store), or an explicit ``env://``/``tcp://``/``file://``.
        backend: "gloo" or "nccl".
        environment: this process's rank and the job's size.
        timeout: how long to wait for the other processes.

    Raises:
        RuntimeError: the group could not be formed: names ``init_method``, this
            rank, and what to check.
    """
    if init_method is None:
        environment.export()
        store = attempt_store(environment, timeout)
        if store is None:
            dist.init_process_group(backend, init_method="env://", timeout=timeout)
        else:  # a torchrun attempt: its own keys in the agent's store
            dist.init_process_group(
                backend,
                store=store,
                rank=environment.global_rank,
                world_size=environment.world_size,
                timeout=timeout,
            )
        return
    rank, world_size = environment.global_rank, environment.world_size
    if init_method.startswith("file://"):
        _check_shared_file(init_method, rank, world_size)
    try:
        dist.init_process_group(
            backend, init_method=init_method, rank=rank, world_size=world_size, timeout=timeout
        )
    except (RuntimeError, ValueError, OSError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise RuntimeError(
            f"Rank {rank} of {world_size} could not join the process group at {init_method} "
            f"within {timeout.total_seconds():.0f} s ({reason}). Check that every process uses "
            f"the same init_method and world size, and {_CHECK[init_method[:6]]}"
        ) from error


def end_process_group() -> None:
    """Leave the default process group (and every group made from it), if joined.

    trainkit calls this at interpreter exit for groups it started; call it
    earlier to free the connections in a process that goes on without them.
    """
    if dist.is_initialized():
        dist.destroy_process_group()
        # The backend's threads release finished collectives, which needs the
        # interpreter: let them, before a shutdown that would abort them.
        time.sleep(_RELEASE_S)


#: What else to check, by scheme.
_CHECK = {
    "tcp://": "that HOST is rank 0's machine, reachable from this one, with PORT free there.",
    "file:/": "that the file is new for this job (a file left by an earlier one misleads it).",
    "env://": "that MASTER_ADDR and MASTER_PORT name rank 0's machine and a free port there.",
}


def _check_shared_file(init_method: str, rank: int, world_size: int) -> None:
    # torch waits for the others without saying that it cannot write the file.
    folder = Path(urlparse(init_method).path).parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        problem = "does not exist" if not folder.is_dir() else "is not writable"
        raise RuntimeError(
            f"Rank {rank} of {world_size} cannot use {init_method}: the folder {folder} "
            f"{problem}. Use a file in a folder every process can write (a shared filesystem "
            "for several machines), and a new file for each job."
        )

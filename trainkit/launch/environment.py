"""Reading rank, world size and the rendezvous address from the process environment.

Under torchrun (and its elastic agent) or SLURM's ``srun``, the processes are
already started and each one's environment says who it is: trainkit reads it
and joins the group, launching nothing. Without either, this is a plain
``python`` process, rank 0 of 1.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any


@dataclass(frozen=True)
class ClusterEnvironment:
    """Who this process is in the job.

    Attributes:
        global_rank: rank among all processes.
        local_rank: rank on this machine (selects the GPU).
        world_size: number of processes.
        master_addr: host of rank 0, for the rendezvous.
        master_port: port of the rendezvous.
        source: "torchrun", "slurm", "trainkit" (rank 0 of workers trainkit
            started, see ``trainkit.launch.launcher``), "user" (rank and world size
            given to ``DDPStrategy``) or "local".
    """

    global_rank: int
    local_rank: int
    world_size: int
    master_addr: str
    master_port: int
    source: str

    @property
    def launched_externally(self) -> bool:
        """Whether the processes were started by torchrun, SLURM or the user (trainkit
        launches none)."""
        return self.source in ("torchrun", "slurm", "user")

    @classmethod
    def local(cls, rank: int, world_size: int, port: int) -> ClusterEnvironment:
        """Rank ``rank`` of a job whose processes trainkit starts on this machine.

        Args:
            rank: the process's rank (global and local: one machine).
            world_size: the number of processes.
            port: the rendezvous port on 127.0.0.1.

        Example:
            >>> ClusterEnvironment.local(1, 2, 29500).variables()["RANK"]
            '1'
        """
        return cls(rank, rank, world_size, "127.0.0.1", port, "trainkit")

    @classmethod
    def given(cls, rank: int, world_size: int) -> ClusterEnvironment:
        """Rank ``rank`` of ``world_size`` processes started by the user, who said which.

        The local rank (the GPU) is ``LOCAL_RANK`` if set, else the rank.

        Args:
            rank: the process's global rank.
            world_size: the number of processes.

        Example:
            >>> ClusterEnvironment.given(1, 2).launched_externally
            True
        """
        if not 0 <= rank < world_size:
            raise ValueError(
                f"rank={rank} must be in 0..{world_size - 1} for world_size={world_size}."
            )
        local = int(os.environ.get("LOCAL_RANK", rank))
        return cls(rank, local, world_size, "", 0, "user")

    def variables(self) -> dict[str, str]:
        """The variables torchrun would set for this process (env:// reads them)."""
        return {
            "RANK": str(self.global_rank),
            "LOCAL_RANK": str(self.local_rank),
            "WORLD_SIZE": str(self.world_size),
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
        }

    def export(self) -> None:
        """Set the variables ``torch.distributed``'s env:// rendezvous reads."""
        os.environ.update(self.variables())


def detect_environment(environ: dict[str, str] | None = None) -> ClusterEnvironment:
    """Read the environment: torchrun's variables first, then SLURM's, else local.

    Args:
        environ: the variables to read (default ``os.environ``).

    Example:
        >>> detect_environment({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
        ...                     "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}).source
        'torchrun'
    """
    env = dict(os.environ if environ is None else environ)
    if "RANK" in env and "WORLD_SIZE" in env:
        return ClusterEnvironment(
            global_rank=int(env["RANK"]),
            local_rank=int(env.get("LOCAL_RANK", env["RANK"])),
            world_size=int(env["WORLD_SIZE"]),
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
            master_port=int(env.get("MASTER_PORT", "29500")),
            source="torchrun",
        )
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env and env.get("SLURM_JOB_NAME") != "bash":
        # An interactive `srun --pty bash` is not a training job: stay local there.
        job_id = int(re.sub(r"\D", "", env.get("SLURM_JOB_ID", "0")) or 0)
        return ClusterEnvironment(
            global_rank=int(env["SLURM_PROCID"]),
            local_rank=int(env.get("SLURM_LOCALID", "0")),
            world_size=int(env["SLURM_NTASKS"]),
            master_addr=env.get("MASTER_ADDR") or first_slurm_host(env.get("SLURM_NODELIST", "")),
            # A port derived from the job id, so that two jobs sharing a node differ.
            master_port=int(env.get("MASTER_PORT", 10000 + job_id % 20000)),
            source="slurm",
        )
    return ClusterEnvironment(0, 0, 1, "127.0.0.1", 29500, "local")


def first_slurm_host(nodelist: str) -> str:
    """The first host of a SLURM node list (``"node[03-05,09],gpu1"`` -> ``"node03"``).

    Args:
        nodelist: ``SLURM_NODELIST`` / ``SLURM_JOB_NODELIST``.

    Example:
        >>> first_slurm_host("node[03-05,09],gpu1")
        'node03'
    """
    if not nodelist:
        return "127.0.0.1"
    first = re.split(r",(?![^\[]*\])", nodelist)[0]
    match = re.match(r"^(.*?)\[([^\]]+)\](.*)$", first)
    if not match:
        return first
    prefix, ranges, suffix = match.groups()
    return prefix + ranges.split(",")[0].split("-")[0] + suffix


def restart_count() -> int:
    """How many times the job's scheduler has restarted this process's job (0: first start).

    torchrun's elastic agent sets ``TORCHELASTIC_RESTART_COUNT`` when it restarts
    the workers (``--max-restarts``); SLURM sets ``SLURM_RESTART_COUNT`` when it
    requeues a job (``--requeue``).
    """
    for variable in ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT"):
        value = os.environ.get(variable, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 0


def attempt_store(environment: ClusterEnvironment, timeout: timedelta) -> Any | None:
    """The store a restarted torchrun worker's process group must meet its peers in.

    torchrun's elastic agent serves one store for the whole job
    (``TORCHELASTIC_USE_AGENT_STORE``), and the keys a failed attempt's processes
    wrote stay in it: a restarted process that reads a dead peer's address before
    the peer's successor has written its own fails to connect (gloo's
    ``connectFullMesh failed ... Connection refused``), so a restart would fail
    by chance. Every attempt gets a namespace of its own in that store instead.

    Args:
        environment: this process's place in the job.
        timeout: how long the store waits for a key.

    Returns:
        A store for ``init_process_group`` under an agent's store; None elsewhere
        (``env://`` then serves).
    """
    if environment.source != "torchrun" or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    import torch.distributed as dist

    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    store = dist.TCPStore(  # type: ignore[attr-defined]
        environment.master_addr,
        environment.master_port,
        environment.world_size,
        is_master=False,
        timeout=timeout,
    )
    return dist.PrefixStore(  # type: ignore[attr-defined]
        f"trainkit/attempt_{attempt}", store
    )


def resume_on_restart(ckpt_path: str | os.PathLike[str] | None) -> str | os.PathLike[str] | None:
    """``"last"`` for a restarted job's ``fit`` given no checkpoint; else ``ckpt_path``.

    So a job that torchrun or SLURM restarts after a failure continues from its
    last checkpoint with no change to the script (an explicit ``ckpt_path`` is kept).

    Args:
        ckpt_path: what ``fit`` was given.
    """
    restarts = restart_count()
    if ckpt_path is not None or restarts == 0:
        return ckpt_path
    if os.environ.get("RANK", "0") == "0":
        print(
            f"trainkit: this job was restarted ({restarts} time(s)); fit continues from the "
            "last checkpoint (ckpt_path='last').",
            flush=True,
        )
    return "last"

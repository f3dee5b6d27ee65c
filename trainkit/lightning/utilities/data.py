"""Lightning's ``suggested_max_num_workers``: a DataLoader's worker count for this machine."""

from __future__ import annotations

import os

__all__ = ["suggested_max_num_workers"]


def suggested_max_num_workers(local_world_size: int) -> int:
    """An upper bound for a DataLoader's ``num_workers``: this process's share of the
    CPU cores it may run on, less one for the process itself (at least 1).

    Args:
        local_world_size: the training processes on this machine (the Trainer's
            ``devices``).

    Example:
        >>> suggested_max_num_workers(1) >= 1
        True
    """
    if local_world_size < 1:
        raise ValueError(
            f"suggested_max_num_workers(local_world_size={local_world_size}) counts the "
            "processes on this machine: pass 1 or more."
        )
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    return max(1, cores // local_world_size - 1)

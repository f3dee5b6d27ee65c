"""Lightning's ``is_shared_filesystem``: whether every process sees the same folder."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["is_shared_filesystem"]

#: How often the other processes look for rank 0's file, in seconds.
_POLL_S = 0.01


def is_shared_filesystem(
    strategy: Any, path: str | os.PathLike[str] | None = None, timeout: float = 3
) -> bool:
    """Whether ``path`` (default: the working folder) is one folder shared by every process.

    Rank 0 writes a uniquely named file there; each other process looks for it for
    up to ``timeout`` seconds. Every process must call this (it is collective), and
    every process gets the same answer. A URL of another storage (``s3://...``) is
    taken as shared, and so is any path in a job of one process.

    Args:
        strategy: the run's strategy (``trainer.strategy``).
        path: a folder, or a file whose folder is checked; it must exist and rank 0
            must be able to write there.
        timeout: how long the other processes look for the file, in seconds.

    Raises:
        FileNotFoundError: ``path`` does not exist on some process.
    """
    text = os.fspath(path) if path is not None else os.getcwd()
    if "://" in text and not text.startswith("file://"):
        return True
    if strategy.world_size == 1:
        return True
    folder = Path(text.removeprefix("file://")).resolve()
    if not strategy.reduce_boolean_decision(folder.exists(), all=True, point="a path check"):
        raise FileNotFoundError(
            f"is_shared_filesystem: {folder} does not exist on every process; pass a folder "
            "that exists on all of them."
        )
    if folder.is_file():
        folder = folder.parent
    marker = folder / f".trainkit-shared-{strategy.broadcast(uuid.uuid4().hex)}"
    if strategy.is_global_zero:
        marker.touch()
    strategy.barrier("is_shared_filesystem: written")
    found = marker.exists()
    deadline = time.monotonic() + timeout
    while not found and time.monotonic() < deadline:
        time.sleep(_POLL_S)
        found = marker.exists()
    shared = strategy.reduce_boolean_decision(found, all=True, point="a shared-folder check")
    if strategy.is_global_zero:
        marker.unlink(missing_ok=True)
    return bool(shared)

"""Lightning Fabric's ``lightning.fabric.utilities.cloud_io`` names, served by trainkit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["get_filesystem"]


def get_filesystem(path: str | Path, **kwargs: Any) -> Any:
    """The fsspec filesystem that holds ``path`` (the local one for a plain path).

    Args:
        path: a local path or a URL (``s3://...``, ``memory://...``).
        **kwargs: the filesystem's options (credentials, ...).

    Example:
        >>> type(get_filesystem("/tmp")).__name__, type(get_filesystem("memory://x")).__name__
        ('LocalFileSystem', 'MemoryFileSystem')
    """
    from fsspec.core import url_to_fs  # torch's dependency; imported here, when needed

    filesystem, _ = url_to_fs(str(path), **kwargs)
    return filesystem

"""Lightning Fabric's ``lightning.fabric.utilities.cloud_io`` names, served by trainkit.

``get_filesystem``, and the private helpers projects import (a model's own
``from_pretrained`` loads through ``_load``): ``_load``, ``_atomic_save``,
``_is_dir``, ``_is_local_file_protocol`` and ``_is_object_storage``. Remote paths
go through fsspec, URLs through ``torch.hub``'s download cache.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO, Any

import torch

from trainkit.utilities.io import atomic_write

__all__ = [
    "_atomic_save",
    "_is_dir",
    "_is_local_file_protocol",
    "_is_object_storage",
    "_load",
    "get_filesystem",
]

#: fsspec protocols of object stores, which have no real folders.
_OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl"})


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


def _load(
    path_or_url: IO[bytes] | str | Path,
    map_location: Any = None,
    weights_only: bool | None = None,
) -> Any:
    """``torch.load`` of a file object, a local or fsspec path, or an http(s) URL.

    Args:
        path_or_url: what to load.
        map_location: as for ``torch.load``.
        weights_only: as for ``torch.load`` (None: torch's default); a URL loads with
            ``weights_only=False`` unless True is given, as Lightning's does.

    Example:
        >>> import io, torch
        >>> buffer = io.BytesIO(); torch.save({"w": torch.ones(2)}, buffer); _ = buffer.seek(0)
        >>> _load(buffer)
        {'w': tensor([1., 1.])}
    """
    if not isinstance(path_or_url, (str, Path)):
        return torch.load(path_or_url, map_location=map_location, weights_only=weights_only)
    where = str(path_or_url)
    if where.startswith(("http://", "https://")):
        return torch.hub.load_state_dict_from_url(
            where, map_location=map_location, weights_only=bool(weights_only)
        )
    with get_filesystem(where).open(where, "rb") as file:
        return torch.load(file, map_location=map_location, weights_only=weights_only)


def _atomic_save(checkpoint: Any, filepath: str | Path) -> None:
    """``torch.save`` to ``filepath`` so that it appears complete or not at all.

    A local file goes through trainkit's atomic writer (a temporary file, fsynced,
    renamed over the target); a remote one is uploaded from memory in one write.

    Args:
        checkpoint: what to save.
        filepath: a local path or an fsspec URL.
    """
    if _is_local_file_protocol(filepath):
        with atomic_write(Path(str(filepath).removeprefix("file://")), "wb") as file:
            torch.save(checkpoint, file)
        return
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    with get_filesystem(filepath).open(str(filepath), "wb") as file:
        file.write(buffer.getvalue())


def _is_object_storage(fs: Any) -> bool:
    """Whether ``fs`` is an object store (S3, GCS, Azure), whose folders are only prefixes."""
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return any(protocol in _OBJECT_STORES for protocol in protocols)


def _is_dir(fs: Any, path: str | Path, strict: bool = False) -> bool:
    """Whether ``path`` is a folder of ``fs``; on an object store (unless ``strict``), any
    path that is not a file, since writing under it makes it one.

    Example:
        >>> import tempfile
        >>> _is_dir(get_filesystem("/"), tempfile.gettempdir())
        True
    """
    if _is_object_storage(fs) and not strict:
        return not fs.isfile(str(path))
    return bool(fs.isdir(str(path)))


def _is_local_file_protocol(path: str | Path) -> bool:
    """Whether ``path`` is on the local file system (a plain path or ``file://``).

    Example:
        >>> _is_local_file_protocol("/tmp/a.ckpt"), _is_local_file_protocol("s3://b/a.ckpt")
        (True, False)
    """
    from fsspec.utils import get_protocol

    return bool(get_protocol(str(path)) == "file")

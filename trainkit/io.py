"""The one atomic writer: checkpoints, configs and logger files are written through it.

A file is written to a temporary name in its own folder, flushed and fsynced,
then renamed over the target with ``os.replace`` and the folder's entry table
is fsynced. A process killed at any moment leaves either the previous file or
the complete new one under the real name, never a half-written file; a failure
inside the write removes the temporary file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal, overload


@overload
def atomic_write(
    path: str | os.PathLike[str], mode: Literal["wb"]
) -> contextlib.AbstractContextManager[IO[bytes]]: ...


@overload
def atomic_write(
    path: str | os.PathLike[str], mode: Literal["w"] = "w"
) -> contextlib.AbstractContextManager[IO[str]]: ...


def atomic_write(
    path: str | os.PathLike[str], mode: Literal["w", "wb"] = "w"
) -> contextlib.AbstractContextManager[IO[Any]]:
    """Open ``path`` for writing so that it appears complete or not at all.

    Yields a file on a temporary name beside ``path`` (``.<name>.tmp-*``);
    when the block ends without an error the file is flushed, fsynced and
    renamed over ``path``. Text files are opened with UTF-8 and ``newline=""``
    (as the ``csv`` module needs). The folder is created if needed.

    Args:
        path: the file to create or replace.
        mode: "w" for text, "wb" for bytes.

    Example:
        >>> import tempfile, pathlib
        >>> target = pathlib.Path(tempfile.mkdtemp()) / "note.txt"
        >>> with atomic_write(target) as file:
        ...     _ = file.write("hello")
        >>> target.read_text()
        'hello'
    """
    return _atomic_write(Path(path), mode)


@contextlib.contextmanager
def _atomic_write(target: Path, mode: str) -> Iterator[IO[Any]]:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.tmp-", dir=target.parent)
    try:
        text = {"encoding": "utf-8", "newline": ""} if "b" not in mode else {}
        with os.fdopen(handle, mode, **text) as file:  # type: ignore[call-overload]
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    fsync_folder(target.parent)


def fsync_folder(folder: str | os.PathLike[str]) -> None:
    """Make a rename inside ``folder`` durable (it lives in the folder's entry table).

    Without it a new name survives a process crash but not necessarily a power
    loss. Platforms that cannot open a folder skip this.

    Args:
        folder: the folder whose entries changed.
    """
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)

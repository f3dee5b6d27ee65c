"""The one atomic writer: checkpoints, configs and logger files are written through it.

A file is written to a temporary name in its own folder, flushed and fsynced,
then renamed over the target with ``os.replace`` and the folder's entry table
is fsynced. A process killed at any moment leaves either the previous file or
the complete new one under the real name, never a half-written file; a failure
inside the write removes the temporary file.

A process killed in the middle of a write cannot remove its temporary file, so
the name records who wrote it: ``.<name>.tmp-<pid>-<host>-<random>``. The next
write of the same file, and :func:`remove_stale_temporaries` (which
ModelCheckpoint calls when fit starts), remove such files once their writer is
gone: the process is no longer alive on this machine, or the file has not
changed for :data:`STALE_AFTER_SECONDS`. A save that is still running in
another live process is left alone. Only names of this pattern are touched.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal, overload

#: A temporary file untouched this long is removed even when its writer's
#: process id is alive (the id may have been reused) or belongs to another machine.
STALE_AFTER_SECONDS = 3600.0

# ".<target>.tmp-<pid>-<host>-<random>": what temporary_prefix() and mkstemp make.
_TEMPORARY = re.compile(r"\.(?P<target>.+)\.tmp-(?P<pid>\d+)-(?P<host>[A-Za-z0-9]*)-[A-Za-z0-9_]+")


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

    Yields a file on a temporary name beside ``path``
    (``.<name>.tmp-<pid>-<host>-<random>``); when the block ends without an
    error the file is flushed, fsynced and renamed over ``path``. On an error
    the temporary file is removed, and a full disk is reported as an
    ``OSError`` (``errno.ENOSPC``) that names ``path``. Temporary files of
    earlier writes of ``path`` whose process died are removed first. Text
    files are opened with UTF-8 and ``newline=""`` (as the ``csv`` module
    needs). The folder is created if needed.

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
    remove_stale_temporaries(target.parent, target.name)
    handle, temporary = tempfile.mkstemp(prefix=temporary_prefix(target), dir=target.parent)
    try:
        text = {"encoding": "utf-8", "newline": ""} if "b" not in mode else {}
        with os.fdopen(handle, mode, **text) as file:  # type: ignore[call-overload]
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException as error:
        Path(temporary).unlink(missing_ok=True)
        if no_space_error(error) is not None:
            raise OSError(
                errno.ENOSPC, f"No space left on device while writing {target}"
            ) from error
        raise
    fsync_folder(target.parent)


def temporary_prefix(target: str | os.PathLike[str]) -> str:
    """The start of a temporary file's name for ``target``: ``.<name>.tmp-<pid>-<host>-``.

    Args:
        target: the file that the temporary file will replace.

    Example:
        >>> temporary_prefix("/runs/last.ckpt").startswith(".last.ckpt.tmp-")
        True
    """
    return f".{Path(target).name}.tmp-{os.getpid()}-{_host()}-"


def remove_stale_temporaries(folder: str | os.PathLike[str], target: str | None = None) -> int:
    """Remove the temporary files that killed writes left in ``folder``.

    Only files named by this module's pattern are considered, and only those
    whose writer is gone: its process id is not alive on this machine, or the
    file has not changed for :data:`STALE_AFTER_SECONDS` (a save in progress
    keeps writing to it). A missing folder is not an error.

    Args:
        folder: the folder to clean.
        target: only the temporary files of this file name (None: of any file).

    Returns:
        How many files were removed.
    """
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    removed, host, now = 0, _host(), time.time()
    for entry in entries:
        match = _TEMPORARY.fullmatch(entry.name)
        if match is None or (target is not None and match["target"] != target):
            continue
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue  # removed meanwhile
        ours = match["host"] == host
        if age < STALE_AFTER_SECONDS and (not ours or _alive(int(match["pid"]))):
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):  # a sharded checkpoint's staging folder
                shutil.rmtree(entry.path)
            else:
                os.remove(entry.path)
            removed += 1
    return removed


def no_space_error(error: BaseException) -> OSError | None:
    """The "no space left on device" error behind ``error``, if there is one.

    Writers such as ``torch.save`` report a full disk as their own error and
    keep the ``OSError`` only as its cause or context; this finds it.

    Args:
        error: any exception.

    Returns:
        The ``OSError`` with ``errno.ENOSPC`` or ``errno.EDQUOT`` (quota
        exceeded) in ``error``'s chain, or None.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return current
        current = current.__cause__ or current.__context__
    return None


class _DeferredSync:
    """The folder whose fsyncs a :func:`deferred_folder_sync` block holds back."""

    __slots__ = ("asked", "folder")

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.asked = False  # whether an fsync of it was asked for inside the block


# The deferred folder of this thread's context (None: fsync at once). A thread of
# its own, such as a background save's, starts with None.
_DEFERRED: contextvars.ContextVar[_DeferredSync | None] = contextvars.ContextVar(
    "trainkit_deferred_folder_sync", default=None
)


@contextlib.contextmanager
def deferred_folder_sync(folder: str | os.PathLike[str]) -> Iterator[None]:
    """Fsync ``folder`` once when the block ends, for every rename into it inside the block.

    A save that renames two files into one folder (a checkpoint and its
    ``last.ckpt`` link) needs the folder's entries fsynced once, after both
    renames: each file's data is fsynced before its rename either way, so a
    power loss before the folder's fsync leaves each name holding either its
    previous file or the complete new one, as it would between two fsyncs.
    Only ``folder`` itself waits: a folder inside it (a sharded checkpoint's
    staging folder) is still fsynced before it is renamed. The fsync runs when
    the block ends, also after an error, and only if something asked for it.

    Args:
        folder: the folder whose fsyncs wait for the block's end.

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> with deferred_folder_sync(folder):
        ...     for name in ("a.txt", "b.txt"):
        ...         with atomic_write(folder / name) as file:
        ...             _ = file.write(name)
        >>> sorted(path.name for path in folder.iterdir())
        ['a.txt', 'b.txt']
    """
    if _DEFERRED.get() is not None:
        yield  # an enclosing block defers its own folder; this one syncs as usual
        return
    deferred = _DeferredSync(os.path.abspath(folder))
    token = _DEFERRED.set(deferred)
    try:
        yield
    finally:
        _DEFERRED.reset(token)
        if deferred.asked:
            fsync_folder(deferred.folder)


def fsync_folder(folder: str | os.PathLike[str]) -> None:
    """Make a rename inside ``folder`` durable (it lives in the folder's entry table).

    Without it a new name survives a process crash but not necessarily a power
    loss. Platforms that cannot open a folder skip this. Inside
    :func:`deferred_folder_sync` of this folder the fsync waits for the block's end.

    Args:
        folder: the folder whose entries changed.
    """
    deferred = _DEFERRED.get()
    if deferred is not None and os.path.abspath(folder) == deferred.folder:
        deferred.asked = True
        return
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


def local_path(path: str, where: str, instead: str) -> str:
    """``path`` as a local path (``file://`` removed); a URL of another store is refused.

    trainkit's file writers (checkpoints, the file loggers) write through
    :func:`atomic_write`, on a local or mounted file system.

    Args:
        path: the path the user gave.
        where: the argument it was given as, for the message (``"ModelCheckpoint(dirpath=...)"``).
        instead: what to do instead of writing to a store, for the message.

    Raises:
        ValueError: ``path`` is a URL (``scheme://...``) other than ``file://``.

    Example:
        >>> local_path("file:///runs", "CSVLogger(save_dir=...)", "")
        '/runs'
    """
    if path.startswith("file://"):
        return path.removeprefix("file://")
    scheme, found, _ = path.partition("://")
    if found and scheme.replace("+", "").replace("-", "").isalnum():
        raise ValueError(
            f"{where.replace('...', repr(path))}: trainkit writes these files on a local or "
            f"mounted file system, not to {scheme}:// stores. Give a local folder (a bucket "
            f"mounted as one works){instead}."
        )
    return path


def _host() -> str:
    # The machine's name, reduced to letters and digits (the pattern's separator is "-").
    return re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:32]


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: alive, owned by someone else
        return True
    return True

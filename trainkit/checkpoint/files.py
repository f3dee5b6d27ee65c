"""Checkpoint files: atomic writes, safe loads, and clear errors.

A checkpoint is a dict of tensors and plain containers (see
:meth:`trainkit.Trainer.save_checkpoint` for its keys), but for hyperparameters
that are objects, pickled as Lightning stores them. :func:`load` reads it with
``weights_only=True``, those objects as inert stand-ins
(:mod:`trainkit.checkpoint.stand_ins`): loading a checkpoint never runs code from
it (unless the caller passes ``weights_only=False`` for a file it trusts).

The file is also a Lightning 2.x checkpoint: its top-level keys include
Lightning's (``epoch``, ``global_step``, ``pytorch-lightning_version``,
``state_dict``, ``loops``, ``callbacks``, ``optimizer_states``,
``lr_schedulers``, ``hparams_name``, ``hyper_parameters``), so tools that read
Lightning checkpoints read trainkit's. trainkit's own entries (``loop``, ``rng``,
the logged metrics, ...) sit beside them and give the exact resume; no tensor
is stored twice. Files written by Lightning load too (:func:`load`), through
``Module.load_from_checkpoint`` and ``Trainer.fit(ckpt_path=...)``
(:func:`restore_state`).

Writes are atomic (``trainkit.utilities.io.atomic_write``): the file is written to a
temporary name in the same folder, flushed and fsynced, then renamed over the
target with ``os.replace``. A process killed mid-save leaves the previous file
intact and a temporary file (``.<name>.tmp-<pid>-<host>-*``) that the next save
of that file, or the next fit's ModelCheckpoint, removes; never a half-written
checkpoint under the real name. A full disk is a :class:`CheckpointError` that
says so, with the path and the space needed.

Every file trainkit writes carries a SHA-256 digest of its contents (the
``integrity`` entry, see :func:`payload_digest`), checked by :func:`load`: a
file damaged on disk or in a copy is a :class:`CheckpointError` naming it,
never weights that load silently wrong. Files without the entry (Lightning's,
older trainkit's) load unchecked.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import shutil
import warnings
import zipfile
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import torch

from trainkit.checkpoint import sharded
from trainkit.checkpoint.stand_ins import HPARAMS_ENTRIES, holds_stand_in, load_with_stand_ins
from trainkit.utilities.io import atomic_write, fsync_folder, no_space_error, temporary_prefix

#: Marks a dict as a trainkit checkpoint; bumped when the layout changes.
FORMAT = "trainkit-checkpoint"
FORMAT_VERSION = 1

#: Where a checkpoint keeps the Module's hyperparameters (the ``__init__`` arguments).
CHECKPOINT_HYPER_PARAMS_KEY = "hyper_parameters"
#: The name the hyperparameters were saved under ("kwargs" for ``save_hyperparameters()``).
CHECKPOINT_HYPER_PARAMS_NAME = "hparams_name"
#: The type of the saved hyperparameters, when they are not a plain dict.
CHECKPOINT_HYPER_PARAMS_TYPE = "hparams_type"
#: How to rebuild the hyperparameters that are objects (a loss, a function, an OmegaConf
#: config), by name: the hyperparameters entry holds plain values only, so that a safe
#: load reads it (see ``trainkit.checkpoint.weights.hparams_entries``).
OBJECT_HYPER_PARAMS_KEY = "hyper_parameters_objects"
#: Prefixes the hyperparameter keys for a DataModule's (``datamodule_hyper_parameters``).
DATAMODULE_PREFIX = "datamodule_"
#: The key that marks a file as a Lightning checkpoint (and the version that wrote it).
LIGHTNING_VERSION_KEY = "pytorch-lightning_version"
#: The Lightning checkpoint layout trainkit's files follow, written under
#: :data:`LIGHTNING_VERSION_KEY` so that Lightning's tools apply no migration to them.
LIGHTNING_FORMAT_VERSION = "2.6.0"


# What torch.load raises for truncated, corrupt or foreign files (a truncated
# archive makes its reader seek past the end: OSError).
_READ_ERRORS = (
    RuntimeError,
    EOFError,
    OSError,
    zipfile.BadZipFile,
    pickle.UnpicklingError,
    ValueError,
)


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, damaged, foreign, or does not fit the run.

    Exported as ``trainkit.CheckpointError``. The message names the file and
    what is wrong: corrupt (its digest does not match), truncated, not a
    checkpoint, written by another optimizer, missing an entry resume needs,
    or a full disk while saving.
    """


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """The checkpoint to load does not exist: a :class:`CheckpointError`, and the
    ``FileNotFoundError`` code written for Lightning catches."""


class RefusedObjectsError(CheckpointError, pickle.UnpicklingError):
    """A load with ``weights_only=True`` refused objects the file stores: a
    :class:`CheckpointError`, and the ``pickle.UnpicklingError`` torch.load raises for
    it, which code written for Lightning catches to load again with
    ``weights_only=False``."""


def save_atomic(checkpoint: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Write ``checkpoint`` to ``path`` so that a crash never leaves a broken file there.

    The file gets an ``integrity`` entry, the :func:`payload_digest` of the rest,
    which :func:`load` checks.

    Args:
        checkpoint: the dict to save.
        path: the destination; its folder is created if needed.

    Raises:
        CheckpointError: the disk (or quota) is full. The previous file at
            ``path`` is untouched and no temporary file is left.
    """
    payload = {key: value for key, value in checkpoint.items() if key != INTEGRITY_KEY}
    payload[INTEGRITY_KEY] = {"algorithm": DIGEST_ALGORITHM, "digest": payload_digest(payload)}
    try:
        with atomic_write(path, "wb") as file:
            torch.save(payload, file)
    except OSError as error:
        if no_space_error(error) is None:
            raise
        raise _disk_full(Path(path), payload) from error


def _disk_full(path: Path, payload: Mapping[str, Any]) -> CheckpointError:
    needed = _tensor_bytes(payload)
    try:
        free = f", and {_size(shutil.disk_usage(path.parent).free)} is free there"
    except OSError:
        free = ""
    previous = " (the previous file there is untouched)" if path.exists() else ""
    return CheckpointError(
        f"No space left on device while saving checkpoint {path}{previous}: it needs about "
        f"{_size(needed)}{free}; free some space, or save to another disk (ModelCheckpoint's "
        "dirpath, or the Trainer's default_root_dir)."
    )


def _tensor_bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, Mapping):
        return sum(_tensor_bytes(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(item) for item in value)
    return 0


def _size(count: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"  # pragma: no cover - the loop returns


#: The entry that holds a checkpoint's digest: ``{"algorithm": ..., "digest": hex}``.
INTEGRITY_KEY = "integrity"
#: The hash of :func:`payload_digest` (any name ``hashlib.new`` takes).
DIGEST_ALGORITHM = "sha256"


def payload_digest(payload: Mapping[str, Any], algorithm: str = DIGEST_ALGORITHM) -> str:
    """A digest of a checkpoint's contents: every tensor's bytes, and the structure around them.

    The structure (keys, containers, numbers, strings) and each tensor's dtype,
    shape and bytes are hashed in order, so the digest is the same for the dict
    that was saved and the dict ``torch.load`` returns from an intact file, and
    differs when any stored value changed. Objects that are not tensors, plain
    values or containers count by their type only; in the hyperparameter
    entries, a value that is not plain (:func:`is_plain`) counts as an object
    whatever its type, so that the digest is the same whether a load builds it
    or puts a stand-in in its place (see :mod:`trainkit.checkpoint.stand_ins`).
    The ``integrity`` entry itself is left out.

    Args:
        payload: a checkpoint dict.
        algorithm: a ``hashlib`` algorithm name.

    Returns:
        The hex digest.

    Example:
        >>> a = payload_digest({"w": torch.ones(2), "step": 1})
        >>> a == payload_digest({"w": torch.ones(2), "step": 1})
        True
        >>> a == payload_digest({"w": torch.tensor([1.0, 1.5]), "step": 1})
        False
    """
    hasher = hashlib.new(algorithm)
    _feed(
        hasher,
        {
            key: _digested_hparams(value) if key in HPARAMS_ENTRIES else value
            for key, value in payload.items()
            if key != INTEGRITY_KEY
        },
    )
    return hasher.hexdigest()


def _digested_hparams(hparams: Any) -> Any:
    if not isinstance(hparams, Mapping):
        return hparams if is_plain(hparams) else "<object>"
    return {key: value if is_plain(value) else "<object>" for key, value in hparams.items()}


#: The exact types of the plain scalars :func:`is_plain` accepts.
_PLAIN_SCALARS = frozenset({bool, int, float, str})


def is_plain(value: Any) -> bool:
    """Whether ``value`` is None, a bool, number or string, or a dict, list or tuple of them.

    Such values load with ``weights_only=True`` as they were saved (a dict subclass
    as a dict); hyperparameters that are not plain are stored as objects. A number
    or string of a subclass (a numpy float, an ``IntEnum``) is not plain: it is
    pickled as its class, which a safe load does not build.

    Example:
        >>> is_plain({"lr": 0.1, "sizes": [64, 32]}), is_plain({"loss": object()})
        (True, False)
        >>> import numpy
        >>> is_plain({"lr": numpy.float64(0.1)})
        False
    """
    if value is None or type(value) in _PLAIN_SCALARS:
        return True
    if isinstance(value, dict):
        return all(is_plain(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return all(is_plain(item) for item in value)
    return False


def _feed(hasher: Any, value: Any) -> None:
    kind = type(value)
    if kind in _PLAIN:  # the same bytes as the isinstance branch below, found sooner
        hasher.update(_plain_bytes(value))
        return
    if kind is dict or kind is OrderedDict:  # skips the Mapping check (an ABC: slow)
        _feed_mapping(hasher, value)
        return
    if isinstance(value, torch.Tensor):
        hasher.update(f"<tensor {value.dtype} {tuple(value.shape)}>".encode())
        try:
            data = value.detach().cpu().resolve_conj().resolve_neg().contiguous()
            hasher.update(data.reshape(-1).view(torch.uint8).numpy())  # no copy on CPU
        except (RuntimeError, TypeError):
            pass  # sparse or quantized: counted by dtype and shape
    elif isinstance(value, Mapping):
        _feed_mapping(hasher, value)
    elif isinstance(value, (list, tuple)):
        if all(type(item) in _PLAIN for item in value):
            # A run of plain values (a random generator's state: 625 ints): the same
            # bytes as item by item, in one update.
            hasher.update(b"".join([b"[", *map(_plain_bytes, value), b"]"]))
            return
        hasher.update(b"[")
        for item in value:
            _feed(hasher, item)
        hasher.update(b"]")
    elif isinstance(value, (set, frozenset)):
        hasher.update(f"<set {sorted(repr(item) for item in value)}>".encode())
    elif value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        hasher.update(_plain_bytes(value))
    elif isinstance(value, (torch.dtype, torch.device)):
        hasher.update(f"<{value}>".encode())
    else:
        hasher.update(f"<{type(value).__qualname__}>".encode())


def _feed_mapping(hasher: Any, value: Mapping[Any, Any]) -> None:
    # Plain keys and values are gathered and hashed together (the same bytes as
    # one by one), the rest fed as they come.
    parts = [b"{"]
    for key, item in value.items():
        if type(key) in _PLAIN and type(item) in _PLAIN:
            parts += (_plain_bytes(key), _plain_bytes(item))
            continue
        hasher.update(b"".join(parts))
        parts.clear()
        _feed(hasher, key)
        _feed(hasher, item)
    parts.append(b"}")
    hasher.update(b"".join(parts))


#: The exact types whose values :func:`_feed` hashes by type name and repr.
_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes})


def _plain_bytes(value: Any) -> bytes:
    return f"<{type(value).__name__} {value!r}>".encode()


def _check_integrity(file: Path, checkpoint: dict[str, Any], source: Any, start: int) -> None:
    """Compare the file's stored digest with its contents; remove the entry.

    Contents that differ from the digest in a file that is itself whole (every record
    matches the CRC the zip format stores with it) were changed by a program that
    loaded the checkpoint and saved it again, as Lightning users edit checkpoints:
    loaded with a warning. Damage on disk breaks a record's CRC: an error.
    """
    integrity = checkpoint.pop(INTEGRITY_KEY, None)
    if not isinstance(integrity, Mapping):
        return  # written without one (Lightning, an older trainkit): nothing to check
    algorithm = str(integrity.get("algorithm", DIGEST_ALGORITHM))
    if algorithm not in hashlib.algorithms_available:
        warnings.warn(
            f"Checkpoint {file} has a {algorithm} digest, which this Python cannot compute; "
            "it is loaded unchecked.",
            stacklevel=3,
        )
        return
    matches = payload_digest(checkpoint, algorithm) == integrity.get("digest")
    if matches:
        # The digest counts a hyperparameter object as one, whatever it holds: the CRC
        # of the record that pickles it (data.pkl) covers what it holds.
        if not _holds_objects(checkpoint) or _intact_zip(source, start, "data.pkl"):
            return
    elif _intact_zip(source, start):
        if isinstance(source, io.BytesIO):
            # Bytes this process made: a program edited the checkpoint in memory and
            # passes it on (chemprop's load_from_checkpoint does, each run). No file
            # was changed, and nothing the warning would say applies.
            return
        warnings.warn(
            f"Checkpoint {file} was changed after trainkit wrote it: its contents do not "
            f"match the digest stored in it, and the file itself is whole (as when a "
            "program loads a checkpoint, edits it and saves it again). It is loaded as "
            f"edited; delete its '{INTEGRITY_KEY}' entry when you save it to silence this.",
            stacklevel=4,
        )
        return
    raise CheckpointError(
        f"Checkpoint {file} is corrupt: its contents do not match the {algorithm} digest "
        "trainkit stored when it wrote the file, or its bytes no longer match their "
        "checksums (damaged on disk or in a copy); use another checkpoint, such as the "
        "previous one in its folder."
    )


def _holds_objects(checkpoint: Mapping[str, Any]) -> bool:
    # Whether a hyperparameter entry holds a value that is not plain (an object).
    return any(
        not is_plain(value)
        for key in HPARAMS_ENTRIES
        if isinstance(checkpoint.get(key), Mapping)
        for value in checkpoint[key].values()
    )


def _intact_zip(source: Any, start: int, record: str = "") -> bool:
    """Whether the zip file ``source`` (a path, or a file object read from ``start``) reads
    back whole: every record's bytes (or those of the records whose names end with
    ``record``) match the CRC stored with them."""
    try:
        if not isinstance(source, Path):
            source.seek(start)
        with zipfile.ZipFile(source) as archive:
            if not record:
                return archive.testzip() is None
            for name in archive.namelist():
                if name.endswith(record):
                    archive.read(name)  # raises BadZipFile on a CRC mismatch
            return True
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return False


def link_atomic(source: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Make ``path`` an exact copy of ``source``, replacing it atomically.

    A hard link costs no second write; where the file system has none, the file
    is copied to a temporary name first. Either way ``path`` is never a dangling
    link nor a half-written file.

    Args:
        source: an existing checkpoint file.
        path: the file to create or replace (e.g. ``last.ckpt``).
    """
    if sharded.is_folder(source) or sharded.is_pending(source):
        sharded.link(source, path)
        return
    target = Path(path)
    temporary = target.parent / f"{temporary_prefix(target)}link"
    temporary.unlink(missing_ok=True)
    try:
        os.link(source, temporary)
    except OSError:
        with open(source, "rb") as reader, atomic_write(target, "wb") as writer:
            shutil.copyfileobj(reader, writer)
        return
    os.replace(temporary, target)
    fsync_folder(target.parent)


def read_url(url: str) -> IO[bytes]:
    """The file at ``url``, read into memory: ``http(s)://`` with the standard library,
    other stores (``s3://``, ``gs://``, ``memory://``, ...) with fsspec.

    Args:
        url: where the checkpoint is.

    Raises:
        CheckpointNotFoundError: there is no file at ``url``.
        CheckpointError: it cannot be read (the store's error is chained).
    """
    scheme = url.partition("://")[0].lower()
    try:
        if scheme in ("http", "https"):
            import urllib.request

            with urllib.request.urlopen(url) as response:
                data = response.read()
        else:
            import fsspec

            with fsspec.open(url, "rb") as remote:
                data = remote.read()
    except FileNotFoundError as error:
        raise CheckpointNotFoundError(f"Checkpoint {url} does not exist.") from error
    except OSError as error:  # urllib's HTTPError is one (a 404 among them)
        if getattr(error, "code", None) == 404:
            raise CheckpointNotFoundError(f"Checkpoint {url} does not exist (HTTP 404).") from error
        raise CheckpointError(f"Checkpoint {url} cannot be read: {first_line(error)}") from error
    except ImportError as error:  # an fsspec store whose package is not installed
        raise CheckpointError(
            f"Checkpoint {url} cannot be read: {first_line(error)} (reading {scheme}:// "
            "needs fsspec and its package for that store), or copy the file to a local folder."
        ) from error
    buffer = io.BytesIO(data)
    buffer.name = url  # the messages below name it
    return buffer


_TRUE = ("1", "y", "yes", "true")  # the values torch reads as set


def weights_only_load(weights_only: bool | None) -> bool:
    """Whether a load reads tensors and plain values only, as ``torch.load`` decides it.

    None (not passed) means True, unless torch's ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``
    is set (then False, with torch's warning); ``TORCH_FORCE_WEIGHTS_ONLY_LOAD``
    makes it True whatever is passed. So the variables a user sets for torch hold
    for trainkit's loads too.

    Raises:
        RuntimeError: both variables are set.

    Example:
        >>> weights_only_load(None), weights_only_load(False)
        (True, False)
    """
    force_safe = os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0").lower() in _TRUE
    force_unsafe = os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0").lower() in _TRUE
    if force_safe and force_unsafe:
        raise RuntimeError(
            "Both TORCH_FORCE_WEIGHTS_ONLY_LOAD and TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD are set; "
            "unset one of them (torch refuses the pair too)."
        )
    if force_safe:
        return True
    if weights_only is None and force_unsafe:
        warnings.warn(
            "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD is set and weights_only was not passed: the "
            "checkpoint is loaded with weights_only=False, which runs code stored in the file. "
            "Unset the variable to load tensors and plain values only.",
            UserWarning,
            stacklevel=3,
        )
        return False
    return weights_only is not False


def load(
    path: str | os.PathLike[str] | IO[bytes], map_location: Any = "cpu", weights_only: bool = True
) -> dict[str, Any]:
    """Load a trainkit or Lightning checkpoint, safely (``weights_only=True``) by default.

    A Lightning 2.x file (one with a ``pytorch-lightning_version`` entry) is
    returned as Lightning wrote it; :func:`is_lightning_checkpoint` tells the two
    apart. A sharded checkpoint folder (see :mod:`trainkit.checkpoint.sharded`) is read
    whole: every shard, checked against its digest, assembled into the dict one
    file would hold.

    Args:
        path: the checkpoint file (or folder), or a binary file object open on one (as
            Lightning takes: a checkpoint held in memory, ``io.BytesIO``).
        map_location: where tensors are loaded (CPU by default; the Trainer moves
            the state to the right devices when it restores it).
        weights_only: as for ``torch.load``: True reads tensors and plain values
            only, so no code stored in the file runs; False unpickles any object
            (hyperparameters that are objects, such as a loss), for files you trust.

    Returns:
        The checkpoint dict.

    Raises:
        CheckpointError: the file is missing, truncated or corrupt (its contents
            do not match the digest stored with it), or neither a trainkit nor a
            Lightning checkpoint. The message names the file and the problem.
    """
    sharded.settle()  # a save of it may still be under way in the background
    if isinstance(path, str) and "://" in path:  # a URL, as Lightning loads
        path = path.removeprefix("file://") if path.startswith("file://") else read_url(path)
    opened = not isinstance(path, (str, os.PathLike))
    file = Path(str(getattr(path, "name", "<file object>")) if opened else path)  # type: ignore[arg-type]
    if not opened and sharded.is_folder(file):
        meta = load_folder_meta(file, weights_only)
        check_shards(file, meta[sharded.SHARDED_KEY]["digests"])
        return sharded.join(meta, sharded.read_tensors(file))
    if not opened and not file.is_file():
        raise CheckpointNotFoundError(f"Checkpoint {file} does not exist (or is not a file).")
    source: Any = path if opened else file
    start = source.tell() if opened else 0
    try:
        checkpoint = (
            load_with_stand_ins(source, map_location)
            if weights_only
            else torch.load(source, map_location=map_location, weights_only=False)
        )
    except _READ_ERRORS as error:
        size = f"{source.seek(0, os.SEEK_END) - start}" if opened else file.stat().st_size
        reason = first_line(error).rstrip(".")
        if "WeightsUnpickler error" in reason:
            # Objects outside the hyperparameters, or of a kind no stand-in can take.
            raise RefusedObjectsError(
                f"Checkpoint {file} ({size} bytes) cannot be read: {reason}. It stores "
                "Python objects outside its hyperparameters (or a dict subclass of its own), "
                "and checkpoints load with weights_only=True unless asked "
                "otherwise, so that no code from the file runs. If you trust the file, pass "
                "weights_only=False, or allow the class it names with "
                "torch.serialization.add_safe_globals([...]) before loading."
            ) from error
        raise CheckpointError(
            f"Checkpoint {file} ({size} bytes) cannot be read: {reason}. The file "
            "is truncated or damaged (for example, copied while being written), or is not a "
            "checkpoint; use another checkpoint, such as the previous one in its folder."
        ) from error
    if isinstance(checkpoint, dict):
        _check_integrity(file, checkpoint, source, start)
    if is_lightning_checkpoint(checkpoint):
        if not isinstance(checkpoint.get("state_dict"), Mapping):
            raise CheckpointError(
                f"{file} is a Lightning checkpoint without the model's 'state_dict'; it "
                "cannot be loaded into a Module. Use a checkpoint written by ModelCheckpoint "
                "or Trainer.save_checkpoint."
            )
        return dict(checkpoint)
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        kind = type(checkpoint).__name__
        raise CheckpointError(
            f"{file} is not a trainkit checkpoint (it holds a {kind} without the "
            f"'format': '{FORMAT}' entry, and is not a Lightning checkpoint either: it has "
            f"no '{LIGHTNING_VERSION_KEY}' entry). To load plain weights, use "
            "module.load_state_dict(torch.load(path, weights_only=True))."
        )
    if checkpoint.get("format_version", 0) > FORMAT_VERSION:
        raise CheckpointError(
            f"{file} was written by a newer trainkit (format version "
            f"{checkpoint['format_version']}, this one reads up to {FORMAT_VERSION}); "
            "upgrade trainkit to load it."
        )
    return checkpoint


def load_folder_meta(folder: Path, weights_only: bool = True) -> dict[str, Any]:
    """The :data:`~trainkit.checkpoint.sharded.META_FILE` of a sharded folder (digest checked).

    Args:
        folder: a sharded checkpoint folder.
        weights_only: as for :func:`load`.

    Raises:
        CheckpointError: the folder's save never completed, or it is not trainkit's.
    """
    meta_file = folder / sharded.META_FILE
    if not meta_file.is_file():
        raise CheckpointError(
            f"{folder} is not a complete checkpoint: a sharded checkpoint folder holds "
            f"{sharded.META_FILE}, written after every shard, and this one has none (its save "
            "was interrupted, or it is another tool's folder); use another checkpoint, such as "
            "the previous one in its folder."
        )
    meta = load(meta_file, weights_only=weights_only)
    if sharded.SHARDED_KEY not in meta:
        raise CheckpointError(
            f"{meta_file} is not the index of a sharded checkpoint (no '{sharded.SHARDED_KEY}' "
            "entry); load the folder's checkpoint file itself, or another checkpoint."
        )
    return meta


def check_shards(folder: Path, digests: Mapping[str, str]) -> None:
    """Refuse a sharded checkpoint whose shard files (those in ``digests``) changed on disk.

    Args:
        folder: a sharded checkpoint folder.
        digests: file name -> SHA-256 recorded when the folder was written.
    """
    bad = sharded.damaged(folder, digests)
    if bad:
        raise CheckpointError(
            f"Checkpoint {folder} is corrupt: its shard file(s) {', '.join(clip_keys(bad))} are "
            "missing or do not match the SHA-256 digest trainkit recorded when it wrote them "
            "(damaged on disk or in a copy); use another checkpoint, such as the previous one "
            "in its folder."
        )


def consolidate_checkpoint(
    folder: str | os.PathLike[str],
    output: str | os.PathLike[str],
    overwrite: bool = False,
    weights_only: bool = True,
) -> Path:
    """Write a sharded checkpoint folder as one ordinary checkpoint file.

    The file holds the whole model and optimizer states (gathered from every
    shard in this one process) beside the folder's training state: it resumes
    ``fit`` under any strategy, and loads with ``Module.load_from_checkpoint``
    or ``torch.load``. Exported as ``trainkit.consolidate_checkpoint``; on the
    command line: ``trainkit consolidate FOLDER OUTPUT``.

    Args:
        folder: a sharded checkpoint folder (what ``FSDPStrategy`` saves).
        output: the file to write.
        overwrite: replace ``output`` if it exists (by default an existing file is
            never replaced).
        weights_only: as for :func:`load`. Hyperparameters that are objects are
            written again as they are, so they must be unpickled: pass False
            (``--trusted`` on the command line) for a folder you trust.

    Returns:
        The written file.

    Raises:
        CheckpointError: ``folder`` is not a complete, intact sharded checkpoint,
            ``output`` exists and ``overwrite`` is False, or hyperparameters that
            are objects would be lost (``weights_only`` True).
    """
    source, target = Path(folder), Path(output)
    if not sharded.is_folder(source):
        raise CheckpointError(
            f"{source} is not a sharded checkpoint folder (it is a file or does not exist); "
            "a checkpoint file needs no consolidating."
        )
    if target.exists() and not overwrite:
        raise CheckpointError(
            f"{target} exists already; choose another output file, or pass overwrite=True "
            "(--overwrite on the command line) to replace it."
        )
    checkpoint = load(source, weights_only=weights_only)
    objects = sorted(
        f"{key}[{name!r}]"
        for key in HPARAMS_ENTRIES
        if isinstance(checkpoint.get(key), Mapping)
        for name, value in checkpoint[key].items()
        if holds_stand_in(value)
    )
    if objects:
        raise CheckpointError(
            f"{source}'s hyperparameters {', '.join(objects)} are objects, read as stand-ins "
            "(weights_only=True runs no code from the folder); a file written from them would "
            "lose them. If you trust the folder, pass weights_only=False (--trusted on the "
            "command line) to write them again as they are."
        )
    save_atomic(checkpoint, target)
    return target


def clip_keys(keys: list[str], limit: int = 10) -> list[str]:
    return keys if len(keys) <= limit else [*keys[:limit], f"... ({len(keys) - limit} more)"]


def first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    # torch's weights-only refusal puts the actual reason on a later line.
    for line in lines:
        if "WeightsUnpickler error" in line:
            return line
    return lines[0] if lines else type(error).__name__


def is_lightning_checkpoint(checkpoint: object) -> bool:
    """Whether ``checkpoint`` was written by Lightning (not by trainkit).

    trainkit's own files carry Lightning's keys too; its ``format`` entry tells
    them apart.

    Args:
        checkpoint: a loaded checkpoint.

    Returns:
        True for a dict with a ``pytorch-lightning_version`` entry and no trainkit
        ``format`` entry.

    Example:
        >>> is_lightning_checkpoint({"pytorch-lightning_version": "2.4.0", "state_dict": {}})
        True
        >>> is_lightning_checkpoint({"format": FORMAT, "pytorch-lightning_version": "2.6.0"})
        False
    """
    return (
        isinstance(checkpoint, dict)
        and checkpoint.get("format") != FORMAT
        and LIGHTNING_VERSION_KEY in checkpoint
    )

"""Checkpoint files: atomic writes, safe loads, and clear errors.

A checkpoint is a dict of tensors and plain containers (see
:meth:`trainkit.Trainer.save_checkpoint` for its keys), so it loads with
``torch.load(weights_only=True)``: loading a checkpoint never runs code from it.

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

import dataclasses
import glob
import hashlib
import inspect
import math
import os
import pickle
import shutil
import warnings
import zipfile
from argparse import Namespace
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from trainkit.checkpoint import sharded
from trainkit.checkpoint.resume_check import OPTIONS_KEY, compare, run_settings
from trainkit.utilities.io import atomic_write, fsync_folder, no_space_error, temporary_prefix
from trainkit.utilities.rank_zero import rank_zero_print
from trainkit.utilities.seed import capture_rng_states, restore_rng_states
from trainkit.version import __version__

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer

#: Marks a dict as a trainkit checkpoint; bumped when the layout changes.
FORMAT = "trainkit-checkpoint"
FORMAT_VERSION = 1

#: Where a checkpoint keeps the Module's hyperparameters (the ``__init__`` arguments).
CHECKPOINT_HYPER_PARAMS_KEY = "hyper_parameters"
#: The name the hyperparameters were saved under ("kwargs" for ``save_hyperparameters()``).
CHECKPOINT_HYPER_PARAMS_NAME = "hparams_name"
#: The type of the saved hyperparameters, when they are not a plain dict.
CHECKPOINT_HYPER_PARAMS_TYPE = "hparams_type"
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
    values or containers count by their type only. The ``integrity`` entry
    itself is left out.

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
    _feed(hasher, {key: value for key, value in payload.items() if key != INTEGRITY_KEY})
    return hasher.hexdigest()


def _feed(hasher: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        hasher.update(f"<tensor {value.dtype} {tuple(value.shape)}>".encode())
        try:
            data = value.detach().cpu().resolve_conj().resolve_neg().contiguous()
            hasher.update(data.reshape(-1).view(torch.uint8).numpy())  # no copy on CPU
        except (RuntimeError, TypeError):
            pass  # sparse or quantized: counted by dtype and shape
    elif isinstance(value, Mapping):
        hasher.update(b"{")
        for key, item in value.items():
            _feed(hasher, key)
            _feed(hasher, item)
        hasher.update(b"}")
    elif isinstance(value, (list, tuple)):
        hasher.update(b"[")
        for item in value:
            _feed(hasher, item)
        hasher.update(b"]")
    elif isinstance(value, (set, frozenset)):
        hasher.update(f"<set {sorted(repr(item) for item in value)}>".encode())
    elif value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        hasher.update(f"<{type(value).__name__} {value!r}>".encode())
    elif isinstance(value, (torch.dtype, torch.device)):
        hasher.update(f"<{value}>".encode())
    else:
        hasher.update(f"<{type(value).__qualname__}>".encode())


def _check_integrity(file: Path, checkpoint: dict[str, Any]) -> None:
    """Compare the file's stored digest with its contents; remove the entry."""
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
    if payload_digest(checkpoint, algorithm) != integrity.get("digest"):
        raise CheckpointError(
            f"Checkpoint {file} is corrupt: its contents do not match the {algorithm} digest "
            "trainkit stored when it wrote the file (damaged on disk or in a copy, or edited "
            "afterwards); use another checkpoint, such as the previous one in its folder (if "
            f"you edited it on purpose, delete its '{INTEGRITY_KEY}' entry and save it again)."
        )


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


def load(path: str | os.PathLike[str], map_location: Any = "cpu") -> dict[str, Any]:
    """Load a trainkit or Lightning checkpoint safely (``weights_only=True``).

    A Lightning 2.x file (one with a ``pytorch-lightning_version`` entry) is
    returned as Lightning wrote it; :func:`is_lightning_checkpoint` tells the two
    apart. A sharded checkpoint folder (see :mod:`trainkit.checkpoint.sharded`) is read
    whole: every shard, checked against its digest, assembled into the dict one
    file would hold.

    Args:
        path: the checkpoint file (or folder).
        map_location: where tensors are loaded (CPU by default; the Trainer moves
            the state to the right devices when it restores it).

    Returns:
        The checkpoint dict.

    Raises:
        CheckpointError: the file is missing, truncated or corrupt (its contents
            do not match the digest stored with it), or neither a trainkit nor a
            Lightning checkpoint. The message names the file and the problem.
    """
    sharded.settle()  # a save of it may still be under way in the background
    file = Path(path)
    if sharded.is_folder(file):
        meta = load_folder_meta(file)
        check_shards(file, meta[sharded.SHARDED_KEY]["digests"])
        return sharded.join(meta, sharded.read_tensors(file))
    if not file.is_file():
        raise CheckpointError(f"Checkpoint {file} does not exist (or is not a file).")
    try:
        checkpoint = torch.load(file, map_location=map_location, weights_only=True)
    except _READ_ERRORS as error:
        size = file.stat().st_size
        reason = _first_line(error).rstrip(".")
        if "WeightsUnpickler error" in reason:
            # Lightning files may hold hyperparameters that are objects (a Namespace, ...).
            raise CheckpointError(
                f"Checkpoint {file} ({size} bytes) cannot be read: {reason}. It stores "
                "Python objects, and trainkit loads checkpoints with weights_only=True so that "
                "no code from the file runs. If you trust the file, allow the class it names "
                "with torch.serialization.add_safe_globals([...]) before loading, or re-save "
                "the checkpoint with plain hyperparameters (numbers, strings, lists, dicts)."
            ) from error
        raise CheckpointError(
            f"Checkpoint {file} ({size} bytes) cannot be read: {reason}. The file "
            "is truncated or damaged (for example, copied while being written), or is not a "
            "checkpoint; use another checkpoint, such as the previous one in its folder."
        ) from error
    if isinstance(checkpoint, dict):
        _check_integrity(file, checkpoint)
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


def load_folder_meta(folder: Path) -> dict[str, Any]:
    """The :data:`~trainkit.checkpoint.sharded.META_FILE` of a sharded folder (digest checked).

    Args:
        folder: a sharded checkpoint folder.

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
    meta = load(meta_file)
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
            f"Checkpoint {folder} is corrupt: its shard file(s) {', '.join(_clip(bad))} are "
            "missing or do not match the SHA-256 digest trainkit recorded when it wrote them "
            "(damaged on disk or in a copy); use another checkpoint, such as the previous one "
            "in its folder."
        )


def consolidate_checkpoint(
    folder: str | os.PathLike[str], output: str | os.PathLike[str], overwrite: bool = False
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

    Returns:
        The written file.

    Raises:
        CheckpointError: ``folder`` is not a complete, intact sharded checkpoint,
            or ``output`` exists and ``overwrite`` is False.
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
    save_atomic(load(source), target)
    return target


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


def resolve_path(
    ckpt_path: str | os.PathLike[str] | None, last_paths: list[Path], warn: Callable[[str], None]
) -> Path | None:
    """The checkpoint file ``ckpt_path`` names; ``"last"`` is the newest of ``last_paths``.

    For ``"last"`` the file picked is printed (rank 0), so a log shows which
    run a job resumed.

    Args:
        ckpt_path: a path, ``"last"``, or None (no checkpoint).
        last_paths: where ``last.ckpt`` may be (each ModelCheckpoint's newest run's).
        warn: prints a warning (rank 0): ``"last"`` with no such file starts fresh.
    """
    if ckpt_path is None:
        return None
    if os.fspath(ckpt_path) != "last":
        return Path(ckpt_path)
    sharded.settle()
    candidates = [path for path in last_paths if sharded.exists(path)]
    what = ""
    if not candidates:
        # No last.ckpt (ModelCheckpoint(save_last=None), Lightning's default):
        # the newest checkpoint file of those folders, said below.
        folders = {str(path.parent) for path in last_paths}
        candidates = [
            Path(name)
            for folder in folders
            for name in glob.glob(os.path.join(folder, "*.ckpt"))
            if sharded.exists(name)
        ]
        what = " (the newest checkpoint there: no last.ckpt was kept)"
    if not candidates:
        warn(
            "ckpt_path='last': no last.ckpt found (nor any other checkpoint) in "
            f"{sorted(str(p.parent) for p in last_paths)}; starting from scratch (keep a "
            "last.ckpt with ModelCheckpoint(save_last=True))."
        )
        return None
    picked = max(candidates, key=sharded.saved_at)
    rank_zero_print(f"trainkit: ckpt_path='last' resumes from {picked}{what}", flush=True)
    return picked


def peek(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The lineage and global step of a checkpoint file, or None if it is not one.

    Loads with ``mmap=True``, so tensors are not read from disk.

    Args:
        path: a file that may be a trainkit checkpoint.
    """
    if sharded.is_folder(path):
        path = Path(path) / sharded.META_FILE
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # any unreadable file is simply "not one of ours"
        return None
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        return None
    loop = checkpoint.get("loop", {})
    return {"lineage": checkpoint.get("lineage"), "global_step": loop.get("global_step", 0)}


def weights(checkpoint: Mapping[str, Any], source: str | os.PathLike[str]) -> Any:
    """The checkpoint's ``state_dict`` entry (the model's weights), or a CheckpointError.

    Args:
        checkpoint: a loaded checkpoint.
        source: its file, for the message.
    """
    if not isinstance(checkpoint, Mapping) or "state_dict" not in checkpoint:
        raise CheckpointError(
            f"The checkpoint {os.fspath(source)} has no 'state_dict' entry (the model's "
            "weights): it is not a checkpoint of a whole training run (a bare state dict, or "
            "written by another tool); load a file ModelCheckpoint or Trainer.save_checkpoint "
            "wrote, or load the weights yourself with module.load_state_dict(torch.load(path))."
        )
    return checkpoint["state_dict"]


def load_module_state(
    module: nn.Module, state: Mapping[str, torch.Tensor], source: str, strict: bool = True
) -> None:
    """Load ``state`` into ``module``, or explain every key that does not fit.

    Args:
        module: the model to load into.
        state: a state dict.
        source: where the state came from, for the message (a file name).
        strict: with False, missing and unexpected keys are allowed (a warning
            lists them) and the keys that match are loaded; mis-shaped keys are
            an error either way.

    Raises:
        CheckpointError: listing missing, unexpected and mis-shaped keys.
    """
    own = module.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    mis_shaped = sorted(
        f"{key}: checkpoint {tuple(state[key].shape)}, model {tuple(own[key].shape)}"
        for key in set(own) & set(state)
        if isinstance(state[key], torch.Tensor) and state[key].shape != own[key].shape
    )
    if mis_shaped or (strict and (missing or unexpected)):
        lines = [f"The checkpoint {source} does not fit {type(module).__name__}:"]
        for title, keys in (
            ("missing", missing),
            ("unexpected", unexpected),
            ("mis-shaped", mis_shaped),
        ):
            if keys:
                lines.append(f"  {title} keys ({len(keys)}): {', '.join(_clip(keys))}")
        lines.append(
            "Build the model with the same architecture and hyperparameters as the run that "
            "saved it (Module.load_from_checkpoint does this from the saved hparams)."
        )
        raise CheckpointError("\n".join(lines))
    for title, keys in (("missing from", missing), ("not in the model but in", unexpected)):
        if keys:
            warnings.warn(
                f"strict=False: keys {title} the checkpoint {source} were skipped: "
                f"{', '.join(_clip(keys))}.",
                stacklevel=2,
            )
    module.load_state_dict(state, strict=strict)


def plain_hparams(hparams: Mapping[str, Any]) -> dict[str, Any]:
    """Hyperparameters reduced to what a weights-only checkpoint can hold.

    Numbers, strings, booleans, None and containers of them are kept; anything
    else (a model passed to ``__init__``, a function) becomes its ``repr`` so the
    checkpoint stays loadable without running code.

    Args:
        hparams: the module's hyperparameters.
    """
    return {str(key): plain_value(value) for key, value in hparams.items()}


def plain_value(value: Any) -> Any:
    """``value`` with containers kept and anything but numbers, strings, booleans and
    None replaced by its ``repr`` (what YAML and weights-only checkpoints can hold).

    Args:
        value: any value.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    return repr(value)


#: Where Lightning versions before 1.0 kept the hyperparameters.
_PAST_HYPER_PARAMS_KEYS = ("hparams", "module_arguments")


def init_arguments(
    init: Callable[..., Any],
    checkpoint: Mapping[str, Any],
    overrides: Mapping[str, Any],
    hparams_file: str | os.PathLike[str] | None = None,
    prefix: str = "",
) -> dict[str, Any]:
    """The ``__init__`` arguments that rebuild a Module from ``checkpoint``.

    The saved hyperparameters (or those in ``hparams_file``), updated by
    ``overrides``. When they were saved under one argument's name
    (``hparams_name``, for a Module that takes a single config dict or
    Namespace), they become that argument. Unless ``__init__`` takes
    ``**kwargs``, only the names it accepts are kept.

    Args:
        init: the class's ``__init__``.
        checkpoint: a loaded checkpoint (trainkit's or Lightning's).
        overrides: keyword arguments that replace saved values.
        hparams_file: a YAML file whose hyperparameters replace the saved ones.
        prefix: ``"datamodule_"`` for a DataModule's hyperparameters (saved under
            ``datamodule_hyper_parameters`` and ``datamodule_hparams_name``).

    Returns:
        The keyword arguments to call the class with.

    Raises:
        ValueError: ``hparams_file`` is not a ``.yaml``/``.yml`` file.
    """
    saved: dict[str, Any] = {}
    past = () if prefix else _PAST_HYPER_PARAMS_KEYS
    for key in (*past, prefix + CHECKPOINT_HYPER_PARAMS_KEY):
        found = checkpoint.get(key) or {}
        saved.update(vars(found) if isinstance(found, Namespace) else found)
    if hparams_file is not None:
        saved = load_hparams_file(hparams_file)
    saved.update(overrides)
    parameters = list(inspect.signature(init).parameters.values())[1:]  # skip self
    names = [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters)
    arguments: dict[str, Any] = dict(saved)
    name = checkpoint.get(prefix + CHECKPOINT_HYPER_PARAMS_NAME)
    if name and name in names:
        kind = str(checkpoint.get(prefix + CHECKPOINT_HYPER_PARAMS_TYPE) or "")
        arguments = {
            **overrides,
            name: Namespace(**saved) if "namespace" in kind.lower() else saved,
        }
    if not takes_any:
        arguments = {key: value for key, value in arguments.items() if key in names}
    return arguments


def load_hparams_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Hyperparameters from a YAML file (as loggers write ``hparams.yaml``).

    Args:
        path: a ``.yaml`` or ``.yml`` file holding a mapping.

    Returns:
        The mapping.

    Raises:
        ValueError: the file is not YAML or does not hold a mapping.
    """
    file = Path(path)
    if file.suffix.lower() not in (".yaml", ".yml"):
        raise ValueError(
            f"hparams_file={str(file)!r}: trainkit reads hyperparameters from .yaml or .yml "
            "files (not .csv); convert the file to YAML, or pass the values as keyword "
            "arguments to load_from_checkpoint."
        )
    import yaml  # only here: importing trainkit does not load yaml

    loaded = yaml.safe_load(file.read_text()) or {}
    if not isinstance(loaded, dict):
        raise ValueError(
            f"hparams_file {file} holds a {type(loaded).__name__}, not a mapping of "
            "hyperparameter names to values."
        )
    return {str(key): value for key, value in loaded.items()}


def _clip(keys: list[str], limit: int = 10) -> list[str]:
    return keys if len(keys) <= limit else [*keys[:limit], f"... ({len(keys) - limit} more)"]


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    # torch's weights-only refusal puts the actual reason on a later line.
    for line in lines:
        if "WeightsUnpickler error" in line:
            return line
    return lines[0] if lines else type(error).__name__


# ------------------------------------------------------------ a run's state
def collect_state(trainer: Trainer, weights_only: bool = False) -> dict[str, Any]:
    """The full training state of ``trainer``'s run, as a weights-only-safe dict.

    Lightning's keys come first (so ``on_save_checkpoint`` hooks and tools that
    read Lightning checkpoints find them), then trainkit's own.

    Args:
        trainer: the running Trainer.
        weights_only: leave out what only resuming training needs (optimizer,
            LR scheduler and callback states, random states, logged metrics), as
            Lightning's ``save_checkpoint(..., weights_only=True)`` does. Such a
            file loads with ``load_from_checkpoint`` but cannot resume ``fit``.

    Returns:
        The checkpoint dict, after the Module's and the callbacks'
        ``on_save_checkpoint`` hooks have seen it.
    """
    module = trainer.module
    state = trainer.state
    finished = state.status != "running"
    # Imported here: trainkit.callbacks imports this module.
    from trainkit.callbacks.state import call_hook, callback_state, callback_state_key

    callback_states = {callback_state_key(cb): callback_state(cb) for cb in trainer.callbacks}
    checkpoint: dict[str, Any] = {
        # Lightning's layout (a Lightning 2.x tool reads these).
        "epoch": _lightning_epoch(state.epoch, state.batch_idx, finished),
        "global_step": state.global_step,
        LIGHTNING_VERSION_KEY: LIGHTNING_FORMAT_VERSION,
        "state_dict": module.state_dict(),
        "loops": lightning_loops(
            state.state_dict(), state.num_training_batches, module.automatic_optimization, finished
        ),
        "callbacks": callback_states,
        "optimizer_states": [optimizer.state_dict() for optimizer in trainer.optimizers],
        OPTIMIZER_TYPES_KEY: [type(_unwrapped(o)).__qualname__ for o in trainer.optimizers],
        "lr_schedulers": [c.scheduler.state_dict() for c in trainer.lr_scheduler_configs],
        # trainkit's own: what the exact resume needs beyond Lightning's keys.
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "versions": {"trainkit": __version__, "torch": str(torch.__version__)},
        "lineage": state.lineage,
        "loop": state.state_dict(),
        "rng": capture_rng_states(),
        **trainer.results.state_dict(),
        # Only rank 0 logs: reading a logger's version elsewhere would claim a folder.
        "loggers": [logger.state_dict() for logger in trainer.loggers]
        if trainer.is_global_zero
        else [],
        "config": None,  # the trainkit command's run config (its callback fills it in)
        OPTIONS_KEY: trainer_options(trainer),
    }
    scaler = callback_states.get(_PRECISION_KEY, {}).get("scaler")
    if scaler and not weights_only:
        # Where Lightning keeps the float16 loss scaler's state (its precision plugin's name).
        checkpoint[_PRECISION_KEY] = scaler
    if weights_only:
        for key in (*_RESUME_ONLY_KEYS, *trainer.results.state_dict()):
            checkpoint.pop(key, None)
    if module.hparams:
        # "kwargs": the hyperparameters are __init__'s keyword arguments; a Module that
        # saved one config dict records that argument's name (as Lightning does).
        checkpoint[CHECKPOINT_HYPER_PARAMS_NAME] = getattr(module, "_hparams_name", "kwargs")
    checkpoint[CHECKPOINT_HYPER_PARAMS_KEY] = plain_hparams(module.hparams)
    datamodule = trainer.datamodule
    if datamodule is not None:
        datamodule_state = datamodule.state_dict()
        if datamodule_state:  # under its class's name, as Lightning keeps it
            checkpoint[type(datamodule).__qualname__] = datamodule_state
        if datamodule.hparams:
            # Lightning's keys for a DataModule's hyperparameters (DataModule.load_from_checkpoint).
            name = getattr(datamodule, "_hparams_name", "kwargs")
            checkpoint[DATAMODULE_PREFIX + CHECKPOINT_HYPER_PARAMS_NAME] = name
            checkpoint[DATAMODULE_PREFIX + CHECKPOINT_HYPER_PARAMS_KEY] = plain_hparams(
                datamodule.hparams
            )
    module.on_save_checkpoint(checkpoint)
    if not weights_only:  # as in Lightning, callbacks add nothing to a weights-only file
        for callback in trainer.callbacks:
            call_hook(callback, "on_save_checkpoint", trainer, module, checkpoint)
    return checkpoint


#: What a weights-only checkpoint leaves out (see :func:`collect_state`).
_RESUME_ONLY_KEYS = (
    "callbacks",
    "optimizer_states",
    "lr_schedulers",
    "rng",
    "loggers",
    "optimizer_types",
)
#: Where a trainkit checkpoint names each optimizer's class (checked on resume).
OPTIMIZER_TYPES_KEY = "optimizer_types"


def restore_state(trainer: Trainer, checkpoint: dict[str, Any], source: str) -> None:
    """Put ``trainer``'s run back in the state ``checkpoint`` was saved in.

    A trainkit checkpoint resumes exactly (data position, random states, logged
    metrics, loggers). A Lightning checkpoint restores the weights, optimizers,
    LR schedulers, the callbacks whose ``state_key`` matches, the float16
    loss scaler, the DataModule's state and the counters; saved at an epoch's
    end it resumes at the next epoch, saved mid-epoch it continues at the next
    batch of a newly drawn order (with a warning: see :func:`lightning_progress`).

    Args:
        trainer: the Trainer, set up for fit (module, optimizers, callbacks).
        checkpoint: a loaded checkpoint.
        source: where it came from, for messages.

    Raises:
        CheckpointError: the checkpoint does not fit the model or the optimizers.
    """
    module = trainer.module
    if not isinstance(checkpoint.get("state_dict"), Mapping):
        raise CheckpointError(
            f"The checkpoint {source} has no 'state_dict' entry (the model's weights), so "
            "nothing can be resumed from it; use a checkpoint written by ModelCheckpoint or "
            "Trainer.save_checkpoint."
        )
    from trainkit.callbacks.state import call_hook  # trainkit.callbacks imports this module

    _check_settings(trainer, checkpoint, source)
    module.on_load_checkpoint(checkpoint)
    for callback in trainer.callbacks:
        call_hook(callback, "on_load_checkpoint", trainer, module, checkpoint)
    load_module_state(module, checkpoint["state_dict"], source)
    if "optimizer_states" not in checkpoint:
        raise CheckpointError(
            f"The checkpoint {source} holds only the model's weights (it was saved with "
            "save_weights_only=True), so training cannot resume from it. Load the weights "
            "with Module.load_from_checkpoint and call fit without ckpt_path, or resume from "
            "a full checkpoint."
        )
    saved_types = checkpoint.get(OPTIMIZER_TYPES_KEY)
    _load_each(
        "optimizer",
        trainer.optimizers,
        checkpoint["optimizer_states"],
        source,
        saved_types if isinstance(saved_types, list) else None,
    )
    schedulers = [config.scheduler for config in trainer.lr_scheduler_configs]
    _load_each("LR scheduler", schedulers, checkpoint.get("lr_schedulers", []), source)
    if is_lightning_checkpoint(checkpoint):
        _restore_lightning_state(trainer, checkpoint, source)
        return
    missing = [key for key in _RESUME_KEYS if key not in checkpoint]
    if missing:
        raise CheckpointError(
            f"The checkpoint {source} has no {' and no '.join(repr(k) for k in missing)} entry "
            f"({', '.join(_RESUME_KEYS[k] for k in missing)}), which resuming needs: it was "
            "written by another tool or edited; resume from a file ModelCheckpoint or "
            "Trainer.save_checkpoint wrote, or load only its weights with "
            "Module.load_from_checkpoint."
        )
    try:
        _restore_trainkit_state(trainer, checkpoint, source)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
        raise CheckpointError(
            f"The checkpoint {source} cannot be resumed: restoring it failed with "
            f"{type(error).__name__}: {error} (an entry is missing or has another layout than "
            "this trainkit writes); resume from a file this trainkit version wrote."
        ) from error


def trainer_options(trainer: Trainer) -> dict[str, Any]:
    """The Trainer's hardware, loop and step options as plain values (a checkpoint entry).

    Args:
        trainer: the Trainer whose options to record.
    """
    options: dict[str, Any] = {}
    for group in (trainer.hardware, trainer.options, trainer.step_options):
        options.update(dataclasses.asdict(group))
    return {key: plain_value(value) for key, value in options.items()}


def _check_settings(trainer: Trainer, checkpoint: dict[str, Any], source: str) -> None:
    # Before anything is restored: a refused resume changes nothing (see resume_check.py).
    saved_options = checkpoint.get(OPTIONS_KEY)
    if not isinstance(saved_options, Mapping):
        return  # another tool's file, or an older trainkit's: nothing to compare
    datamodule = trainer.datamodule
    error, warning = compare(
        trainer.options.resume_mismatch,
        source,
        run_settings(
            saved_options,
            checkpoint.get(CHECKPOINT_HYPER_PARAMS_KEY),
            checkpoint.get(DATAMODULE_PREFIX + CHECKPOINT_HYPER_PARAMS_KEY),
        ),
        run_settings(
            trainer_options(trainer),
            plain_hparams(trainer.module.hparams),
            plain_hparams(datamodule.hparams) if datamodule is not None else None,
        ),
        has_schedule=bool(checkpoint.get("lr_schedulers")),
    )
    if error:
        raise CheckpointError(error)
    if warning:
        trainer.warn(warning)


#: The entries a trainkit checkpoint needs beyond the weights and optimizers to resume.
_RESUME_KEYS = {"loop": "the loop's progress", "rng": "the random generators' states"}


def _restore_trainkit_state(trainer: Trainer, checkpoint: dict[str, Any], source: str) -> None:
    """The part of :func:`restore_state` that reads what only trainkit's files hold."""
    from trainkit.callbacks.state import callback_state_key, load_callback_state

    callback_states = checkpoint.get("callbacks", {})
    for callback in trainer.callbacks:
        key = callback_state_key(callback)
        if key in callback_states:
            load_callback_state(callback, callback_states[key])
    state = trainer.state
    loop_state = checkpoint["loop"]
    # The position is counted in this run's batches, which may hold another
    # number of samples than the saved run's.
    current_samples = state.samples_per_step
    batch_idx = _batches_to_skip(loop_state, current_samples, source)
    state.load_state_dict(loop_state)
    state.batch_idx = batch_idx
    state.samples_per_step = current_samples
    state.lineage = checkpoint.get("lineage") or state.lineage
    trainer.results.load_state_dict(checkpoint)
    for logger, saved in zip(trainer.loggers, checkpoint.get("loggers", []), strict=False):
        logger.load_state_dict(saved)
    datamodule = trainer.datamodule
    if datamodule is not None:
        # Lightning's key (the class's name); "datamodule" in files of older trainkit.
        for key in (type(datamodule).__qualname__, "datamodule"):
            if key in checkpoint:
                datamodule.load_state_dict(checkpoint[key])
                break
    restore_rng_states(checkpoint["rng"])


# ------------------------------------------------------- Lightning's layout
#: The key of the float16 loss scaler's state: trainkit's MixedPrecision callback's
#: ``state_key``, and where Lightning's precision plugin keeps it.
_PRECISION_KEY = "MixedPrecision"
#: Where Lightning 1.x kept the loss scaler's state.
_LEGACY_SCALER_KEY = "native_amp_scaling_state"


def _restore_lightning_state(trainer: Trainer, checkpoint: dict[str, Any], source: str) -> None:
    """The part of :func:`restore_state` that reads what only Lightning's files hold."""
    from trainkit.callbacks.state import callback_state_key, load_callback_state

    callback_states = dict(checkpoint.get("callbacks") or {})
    scaler = checkpoint.get(_PRECISION_KEY, checkpoint.get(_LEGACY_SCALER_KEY))
    if scaler:
        callback_states.setdefault(_PRECISION_KEY, {"scaler": scaler})
    restored: set[str] = set()
    for callback in trainer.callbacks:
        key = callback_state_key(callback)
        if key not in callback_states:
            continue
        restored.add(key)
        try:
            load_callback_state(callback, dict(callback_states[key]))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            trainer.warn(
                f"The Lightning checkpoint {source} holds a state for {key} that it cannot "
                f"read ({type(error).__name__}: {error}); that callback starts afresh."
            )
    ignored = sorted(set(callback_states) - restored)
    if ignored:
        trainer.warn(
            f"The Lightning checkpoint {source} holds the state of callbacks this Trainer "
            f"does not have: {ignored}; their state is ignored. To restore it, pass "
            "callbacks whose state_key matches (the same class and arguments)."
        )
    progress = lightning_progress(checkpoint)
    state = trainer.state
    for name in ("epoch", "global_step", "batch_idx", "batches_seen"):
        setattr(state, name, progress[name])
    state.should_stop = False
    state.epoch_start_rng = None  # a Lightning file has no record of the epoch's order
    if progress["batch_idx"] > 0:
        trainer.warn(
            f"The Lightning checkpoint {source} was saved {progress['batch_idx']} batches "
            f"into epoch {progress['epoch']}. trainkit continues that epoch at batch "
            f"{progress['batch_idx']} of a newly drawn order, so with a shuffling dataloader "
            "some samples of the epoch are seen twice and others not at all, and the random "
            "state is not the saved run's (Lightning files do not record the data order). "
            "For an exact resume, resume from a checkpoint saved at an epoch's end or from "
            "one written by trainkit."
        )
    elif "loops" not in checkpoint:
        trainer.warn(
            f"The Lightning checkpoint {source} has no 'loops' entry (loop progress); "
            f"assuming it was saved at the end of epoch {progress['epoch'] - 1}, training "
            f"continues at epoch {progress['epoch']}."
        )
    datamodule = trainer.datamodule
    if datamodule is not None and type(datamodule).__qualname__ in checkpoint:
        datamodule.load_state_dict(checkpoint[type(datamodule).__qualname__])


def lightning_progress(checkpoint: Mapping[str, Any]) -> dict[str, int]:
    """Where a Lightning checkpoint resumes, in trainkit's counters.

    Lightning's fit-loop progress says whether the file was saved at an epoch's
    end (training continues at the next epoch) or during one (it continues at
    the next batch). Without it, the file is taken as saved at an epoch's end,
    ModelCheckpoint's default.

    Args:
        checkpoint: a checkpoint written by Lightning.

    Returns:
        ``epoch``, ``batch_idx`` (batches of that epoch already run),
        ``global_step`` and ``batches_seen`` (training batches run in all).

    Example:
        >>> lightning_progress({"epoch": 3, "global_step": 40})
        {'epoch': 4, 'batch_idx': 0, 'global_step': 40, 'batches_seen': 40}
    """
    global_step = int(checkpoint.get("global_step", 0))
    fit = (checkpoint.get("loops") or {}).get("fit_loop")
    if not fit:
        epoch = int(checkpoint.get("epoch", 0)) + 1
        return {
            "epoch": epoch,
            "batch_idx": 0,
            "global_step": global_step,
            "batches_seen": global_step,
        }
    epochs = fit["epoch_progress"]["current"]
    batches = fit["epoch_loop.batch_progress"]
    epoch = int(epochs["processed"])
    batch_idx = 0
    mid_epoch = int(epochs["started"]) > epoch
    if mid_epoch and not batches.get("is_last_batch", False):
        batch_idx = int(batches["current"]["processed"])
    elif mid_epoch:
        epoch += 1  # saved after the epoch's last batch: the epoch is done
    return {
        "epoch": epoch,
        "batch_idx": batch_idx,
        "global_step": global_step,
        "batches_seen": int(batches["total"]["processed"]),
    }


def _lightning_epoch(epoch: int, batch_idx: int, finished: bool) -> int:
    # Lightning's "epoch" is its current_epoch: during fit, a file saved at an
    # epoch's end names that epoch (trainkit's counter already names the next).
    return epoch - 1 if epoch > 0 and batch_idx == 0 and not finished else epoch


def lightning_loops(
    loop_state: Mapping[str, Any], batches_per_epoch: float, automatic: bool, finished: bool
) -> dict[str, Any]:
    """Lightning's ``loops`` entry for a run at ``loop_state``, so Lightning resumes there.

    Lightning's fit-loop progress is rebuilt from trainkit's counters: the epoch,
    the batch position and the global step. Counters trainkit does not keep
    (optimizer steps within the current epoch, scheduler steps, validation
    batches) are derived from those or zero.

    Args:
        loop_state: a :class:`~trainkit.loops.state.RunState`'s ``state_dict()``.
        batches_per_epoch: training batches in an epoch (inf when unknown).
        automatic: whether the Module uses automatic optimization.
        finished: whether fit has ended (Lightning then counts the last epoch done).

    Returns:
        A dict shaped like the ``loops`` entry of a Lightning 2.x checkpoint.
    """
    epoch, batch = int(loop_state["epoch"]), int(loop_state["batch_idx"])
    seen, steps = int(loop_state["batches_seen"]), int(loop_state["global_step"])
    per_epoch = int(batches_per_epoch) if math.isfinite(batches_per_epoch) else batch
    if batch > 0:  # during an epoch, as Lightning saves at on_train_batch_end
        epochs = _counts(epoch + 1, epoch + 1, epoch, epoch)
        current = _counts(batch, batch, batch, batch - 1)
        total = _counts(seen, seen, seen, seen - 1)
    elif epoch > 0 and not finished:  # at an epoch's end, as Lightning saves at on_train_epoch_end
        epochs = _counts(epoch, epoch, epoch, epoch - 1)
        current, total = _counts(*[per_epoch] * 4), _counts(*[seen] * 4)
    else:  # before training, or after fit ended
        epochs = _counts(*[epoch] * 4)
        current, total = _counts(*[per_epoch if epoch > 0 else 0] * 4), _counts(*[seen] * 4)
    last = batch == 0 and epoch > 0
    zero = _counts(0, 0, 0, 0)
    automatic_steps, manual_steps = (steps, 0) if automatic else (0, steps)
    return {
        "fit_loop": {
            "state_dict": {},
            "epoch_progress": {"current": epochs, "total": dict(epochs)},
            "epoch_loop.state_dict": {"_batches_that_stepped": steps},
            "epoch_loop.batch_progress": {
                "current": current,
                "total": total,
                "is_last_batch": last,
            },
            "epoch_loop.scheduler_progress": _steps(0, 0),
            "epoch_loop.automatic_optimization.state_dict": {},
            "epoch_loop.automatic_optimization.optim_progress": {
                "optimizer": {
                    "step": _steps(0, automatic_steps),
                    "zero_grad": {
                        "current": {"ready": 0, "started": 0, "completed": 0},
                        "total": {
                            "ready": automatic_steps,
                            "started": automatic_steps,
                            "completed": automatic_steps,
                        },
                    },
                }
            },
            "epoch_loop.manual_optimization.state_dict": {},
            "epoch_loop.manual_optimization.optim_step_progress": _steps(0, manual_steps),
            "epoch_loop.val_loop.state_dict": {},
            "epoch_loop.val_loop.batch_progress": {
                "current": zero,
                "total": dict(zero),
                "is_last_batch": False,
            },
        },
        **{
            name: {
                "state_dict": {},
                "batch_progress": {
                    "current": dict(zero),
                    "total": dict(zero),
                    "is_last_batch": False,
                },
            }
            for name in ("validate_loop", "test_loop", "predict_loop")
        },
    }


def _counts(ready: int, started: int, processed: int, completed: int) -> dict[str, int]:
    return {"ready": ready, "started": started, "processed": processed, "completed": completed}


def _steps(current: int, total: int) -> dict[str, dict[str, int]]:
    return {
        "current": {"ready": current, "completed": current},
        "total": {"ready": total, "completed": total},
    }


def _batches_to_skip(loop_state: dict[str, Any], current: int | None, source: str) -> int:
    """The resumed epoch's position in batches of *this* run.

    A distributed sampler deals the epoch's permutation out in order: after k
    batches of b samples on each of W processes, exactly the first k*b*W are
    consumed, whatever W is. So a run with W' processes at b' samples continues
    the epoch exactly after k*b*W / (b'*W') batches, when that is whole.
    """
    batch_idx = int(loop_state["batch_idx"])
    saved = loop_state.get("samples_per_step")
    if batch_idx == 0 or saved is None or current is None or saved == current:
        return batch_idx
    consumed = batch_idx * int(saved)
    if consumed % current:
        raise CheckpointError(
            f"The checkpoint {source} was saved {batch_idx} batches into epoch "
            f"{loop_state['epoch']}, after {consumed} samples ({saved} per step); this run "
            f"takes {current} samples per step (batch size x data-parallel processes), and "
            f"{consumed} is not a whole number of such steps, so resuming would repeat or "
            "skip samples. Resume with a batch size and number of processes whose product "
            f"divides {consumed}, or from a checkpoint saved at an epoch's end."
        )
    return consumed // current


def _load_each(
    kind: str,
    targets: list[Any],
    states: list[Any],
    source: str,
    saved_types: list[str] | None = None,
) -> None:
    """``load_state_dict`` into each target, after checking that they fit."""
    if len(states) != len(targets):
        raise CheckpointError(
            f"The checkpoint {source} has {len(states)} {kind} states, but "
            f"configure_optimizers returned {len(targets)} {kind}s."
        )
    for index, (target, state) in enumerate(zip(targets, states, strict=True)):
        name = f"{kind} {index} ({type(_unwrapped(target)).__name__})"
        if kind == "optimizer":
            saved_type = saved_types[index] if saved_types and index < len(saved_types) else None
            _check_optimizer_state(target, state, name, saved_type, source)
        try:
            target.load_state_dict(state)
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as error:
            raise CheckpointError(
                f"The checkpoint {source} holds a state that {name} cannot load "
                f"({type(error).__name__}: {_first_line(error)}): configure_optimizers returns "
                f"another {kind} than the run that saved it did; resume with the same one, or "
                "load only the weights with Module.load_from_checkpoint."
            ) from error


def _unwrapped(target: Any) -> Any:
    # A strategy may wrap an optimizer (as Lightning's LightningOptimizer does).
    return getattr(target, "optimizer", target) if not hasattr(target, "param_groups") else target


def _check_optimizer_state(
    optimizer: Any, state: Any, name: str, saved_type: str | None, source: str
) -> None:
    """Refuse an optimizer state saved by another kind of optimizer, or for other parameters.

    torch loads such a state without a word and fails at the first step (an
    SGD state in AdamW: ``KeyError: 'step'``), or trains with the wrong state.
    trainkit's files name each optimizer's class (``optimizer_types``); files
    without it are checked for the number of groups and parameters only.
    """
    own_type = type(_unwrapped(optimizer)).__qualname__
    if saved_type is not None and saved_type != own_type:
        raise CheckpointError(
            f"The checkpoint {source} holds the state of a {saved_type} optimizer, but "
            f"configure_optimizers returns a {own_type} for optimizer {name.split()[1]}; resume "
            f"with the {saved_type} the run was saved with, or load only the weights with "
            "Module.load_from_checkpoint and start a new fit."
        )
    groups = getattr(optimizer, "param_groups", None)
    saved_groups = state.get("param_groups") if isinstance(state, Mapping) else None
    if not isinstance(groups, list) or not isinstance(saved_groups, list):
        return
    if len(groups) != len(saved_groups):
        raise CheckpointError(
            f"The checkpoint {source} holds {len(saved_groups)} parameter groups for {name}, "
            f"which has {len(groups)}: configure_optimizers builds another optimizer than the "
            "run that saved it did; resume with the same one, or load only the weights with "
            "Module.load_from_checkpoint."
        )
    for index, (group, saved) in enumerate(zip(groups, saved_groups, strict=True)):
        count, saved_count = len(group["params"]), len(saved.get("params", []))
        if count != saved_count:
            raise CheckpointError(
                f"The checkpoint {source} holds {saved_count} parameters in group {index} of "
                f"{name}, which has {count}: the model or configure_optimizers differs from the "
                "run that saved it; resume with the same model and optimizer."
            )

"""Sharded checkpoint folders: the layout, and the file operations that keep them whole.

A sharded checkpoint (what the FSDP strategy writes by default) is a folder
named like a checkpoint file (``epoch=0-step=10.ckpt/``) holding:

- the tensors of the model and the optimizers, written by
  ``torch.distributed.checkpoint`` (DCP): each process writes its own shards
  (``__<rank>_<n>.distcp``) and rank 0 the index (``.metadata``);
- :data:`META_FILE`, an ordinary trainkit checkpoint file written by rank 0
  with everything else (the loop's position, random states, callbacks,
  hyperparameters, ...), the SHA-256 digest of every shard file, and the
  names that map the optimizers' parameters to their tensors.

:data:`META_FILE` is written last, into a staging folder that is renamed to
the real name only after every process finished writing: a folder without it,
or a staging folder, is never taken for a checkpoint (a save killed at any
moment leaves the previous checkpoint and no folder under the real name).

Tensor keys in the DCP index are ``model/<state dict key>`` and
``optimizers/<i>/<parameter name>/<state name>``, so a checkpoint reloads under
any number of processes (DCP reshards) or, whole, in one process
(:func:`read_tensors` without a template).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import shutil
import threading
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from trainkit.utilities.io import fsync_folder, temporary_prefix

#: The file of a sharded checkpoint folder that holds everything but the tensors.
META_FILE = "trainkit.ckpt"
#: The entry of :data:`META_FILE` that describes the shards.
SHARDED_KEY = "sharded"
MODEL = "model/"
OPTIMIZERS = "optimizers/"
_DIGEST = "sha256"

#: Makes the template tensor that DCP loads one saved tensor into: (key, shape, dtype) -> tensor.
Template = Callable[[str, torch.Size, torch.dtype], torch.Tensor]


def is_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a sharded checkpoint folder (complete or not)."""
    return Path(path).is_dir()


def exists(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a checkpoint: a file, or a folder whose save completed."""
    target = Path(path)
    return target.is_file() or (target / META_FILE).is_file()


def saved_at(path: str | os.PathLike[str]) -> float:
    """When the checkpoint at ``path`` was completed (its modification time)."""
    target = Path(path)
    return (target / META_FILE if target.is_dir() else target).stat().st_mtime


# ------------------------------------------------------------------ layout
def split(
    checkpoint: Mapping[str, Any], parameter_names: list[list[str]]
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The tensors DCP writes (flat keys) and the rest of ``checkpoint`` (for :data:`META_FILE`).

    Args:
        checkpoint: a full checkpoint dict, with the model's (possibly sharded)
            ``state_dict`` and the optimizers' ``state_dict()``s.
        parameter_names: for each optimizer, the name of each parameter in the
            order its state numbers them.
    """
    meta = dict(checkpoint)
    tensors: dict[str, torch.Tensor] = {}
    model_extras: dict[str, Any] = {}
    state_dict = meta.pop("state_dict", {})
    for key, value in state_dict.items():
        if isinstance(value, torch.Tensor):
            tensors[MODEL + key] = value
        else:
            model_extras[key] = value
    optimizers = []
    if "optimizer_states" in meta:
        groups = []
        for index, (state, names) in enumerate(
            zip(meta["optimizer_states"], parameter_names, strict=True)
        ):
            extras: dict[int, dict[str, Any]] = {}
            for number, values in state["state"].items():
                for name, value in values.items():
                    if isinstance(value, torch.Tensor):
                        tensors[f"{OPTIMIZERS}{index}/{names[number]}/{name}"] = value
                    else:
                        extras.setdefault(number, {})[name] = value
            groups.append({"param_groups": state["param_groups"]})
            optimizers.append({"parameter_names": names, "extras": extras})
        meta["optimizer_states"] = groups
    meta[SHARDED_KEY] = {
        "model_keys": list(state_dict),
        "model_extras": model_extras,
        "optimizers": optimizers,
        "digests": {},
    }
    return tensors, meta


def join(meta: Mapping[str, Any], tensors: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """The checkpoint dict :func:`split` took apart, from its two halves."""
    checkpoint = dict(meta)
    info = checkpoint.pop(SHARDED_KEY)
    # Every saved key, in the saved order (keys this model lacks too: the error names them).
    state_dict = {key: tensors[MODEL + key] for key in info["model_keys"] if MODEL + key in tensors}
    state_dict.update(info["model_extras"])
    checkpoint["state_dict"] = state_dict
    if "optimizer_states" in checkpoint:
        states = []
        for index, (groups, saved) in enumerate(
            zip(checkpoint["optimizer_states"], info["optimizers"], strict=True)
        ):
            numbers = {name: number for number, name in enumerate(saved["parameter_names"])}
            state: dict[int, dict[str, Any]] = {}
            prefix = f"{OPTIMIZERS}{index}/"
            for key, value in tensors.items():
                if key.startswith(prefix):
                    parameter, name = key[len(prefix) :].rsplit("/", 1)
                    state.setdefault(numbers[parameter], {})[name] = value
            for number, values in saved["extras"].items():
                state.setdefault(number, {}).update(values)
            states.append({"state": dict(sorted(state.items())), **groups})
        checkpoint["optimizer_states"] = states
    return checkpoint


def parameter_of(key: str) -> str | None:
    """The parameter name in an optimizer tensor's key (None for a model key)."""
    if not key.startswith(OPTIMIZERS):
        return None
    return key.split("/", 2)[2].rsplit("/", 1)[0]


def read_tensors(
    folder: str | os.PathLike[str], template: Template | None = None, process_group: Any = None
) -> dict[str, torch.Tensor]:
    """Every tensor of a sharded checkpoint, read with DCP into ``template``'s tensors.

    Args:
        folder: the checkpoint folder.
        template: makes the tensor each saved tensor is read into (a DTensor
            reads only its shards, resharded as needed); None reads every tensor
            whole in this process alone.
        process_group: the processes reading together (with a template).
    """
    from torch.distributed.checkpoint.filesystem import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata
    from torch.distributed.checkpoint.state_dict_loader import load

    reader = FileSystemReader(os.fspath(folder))
    tensors: dict[str, torch.Tensor] = {}
    for key, saved in reader.read_metadata().state_dict_metadata.items():
        if isinstance(saved, TensorStorageMetadata):
            size, dtype = saved.size, saved.properties.dtype
            tensors[key] = (
                template(key, size, dtype) if template else torch.empty(size, dtype=dtype)
            )
    with warnings.catch_warnings():
        # Reading in one process is what no_dist asks for; torch warns about it anyway.
        warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
        load(tensors, storage_reader=reader, process_group=process_group, no_dist=template is None)
    return tensors


# ------------------------------------------------------------- digests
def shard_files(folder: str | os.PathLike[str]) -> list[str]:
    """The names of the files DCP wrote in ``folder`` (everything but :data:`META_FILE`)."""
    return sorted(entry.name for entry in os.scandir(folder) if entry.name != META_FILE)


def digest(file: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, read in chunks."""
    hasher = hashlib.new(_DIGEST)
    with open(file, "rb") as reader:
        while chunk := reader.read(1 << 22):
            hasher.update(chunk)
    return hasher.hexdigest()


def damaged(folder: str | os.PathLike[str], digests: Mapping[str, str]) -> list[str]:
    """The files of ``digests`` that are missing from ``folder`` or whose bytes changed."""
    bad = []
    for name, expected in digests.items():
        file = Path(folder) / name
        if not file.is_file() or digest(file) != expected:
            bad.append(name)
    return bad


# --------------------------------------------------------- file operations
def staging_folder(target: str | os.PathLike[str]) -> Path:
    """Where a sharded save of ``target`` is written before it is renamed into place.

    Its name is a temporary name (``.<name>.tmp-<pid>-<host>-shards``): never
    taken for a checkpoint, and removed by ``remove_stale_temporaries`` once
    its writer is gone.
    """
    path = Path(target)
    return path.parent / f"{temporary_prefix(path)}shards"


def commit(staging: Path, target: str | os.PathLike[str]) -> None:
    """Rename the complete ``staging`` folder to ``target``, replacing what is there."""
    path = Path(target)
    if os.path.lexists(path):
        # A folder cannot be renamed over another: the old one steps aside first.
        # A crash between the two renames leaves no checkpoint under this name
        # (its older siblings stay), never a damaged one.
        aside = path.parent / f"{temporary_prefix(path)}old"
        _remove(aside)
        os.replace(path, aside)
        os.replace(staging, path)
        _remove(aside)
    else:
        os.replace(staging, path)
    fsync_folder(path.parent)


def remove(path: str | os.PathLike[str]) -> None:
    """Remove a checkpoint file or folder (a folder is renamed first, so it is never half there).

    Behind any checkpoint work still under way in the background.
    """
    if busy():
        later(lambda: _remove(path))
    else:
        _remove(path)


def _remove(path: str | os.PathLike[str]) -> None:
    target = Path(path)
    if target.is_dir() and not target.is_symlink():
        doomed = target.parent / f"{temporary_prefix(target)}removed"
        with contextlib.suppress(FileNotFoundError):
            if doomed.exists():
                shutil.rmtree(doomed, ignore_errors=True)
            os.replace(target, doomed)
            shutil.rmtree(doomed, ignore_errors=True)
        return
    target.unlink(missing_ok=True)


def link(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Make ``target`` a copy of the checkpoint folder ``source`` (hard links where possible).

    Behind any checkpoint work still under way in the background (``source``'s save).
    """
    if busy():
        later(lambda: _link(source, target), target)
    else:
        _link(source, target)


def _link(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    staging = Path(target).parent / f"{temporary_prefix(Path(target))}link"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    for name in sorted(os.listdir(source), key=lambda n: n == META_FILE):  # META_FILE last
        try:
            os.link(Path(source) / name, staging / name)
        except OSError:
            shutil.copy2(Path(source) / name, staging / name)
    fsync_folder(staging)
    commit(staging, target)


# ---------------------------------------------------------- saves in the background
class _Background:
    """Rank 0's file work for checkpoints still being written: one thread, in order.

    An asynchronous save commits its folder when its shards are on disk; the
    links (``last.ckpt``) and removals (top-k) that follow it must come after,
    so they queue behind it. A daemon thread: a process that fails does not
    wait for it at exit (its staging folder is cleaned up later).
    """

    def __init__(self) -> None:
        self.jobs: queue.Queue[Callable[[], None]] = queue.Queue()
        self.pending: set[str] = set()
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        threading.Thread(target=self._run, name="trainkit-checkpoints", daemon=True).start()

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                if self.error is None:  # after a failure, nothing more is touched
                    job()
            except BaseException as error:  # reported to the training thread
                self.error = error
            finally:
                self.jobs.task_done()


_background: _Background | None = None


def later(job: Callable[[], None], target: str | os.PathLike[str] | None = None) -> None:
    """Run ``job`` in the background after the checkpoint work queued before it.

    Args:
        job: the work (rank 0's).
        target: the checkpoint the job writes: it is pending (see :func:`is_pending`)
            until the job ends.
    """
    global _background
    if _background is None:
        _background = _Background()
    work = _background
    if target is None:
        work.jobs.put(job)
        return
    name = os.fspath(target)
    with work.lock:
        work.pending.add(name)

    def write() -> None:
        try:
            job()
        finally:
            with work.lock:
                work.pending.discard(name)

    work.jobs.put(write)


def busy() -> bool:
    """Whether checkpoint work is queued in the background."""
    return _background is not None and _background.jobs.unfinished_tasks > 0


def is_pending(path: str | os.PathLike[str]) -> bool:
    """Whether a save of ``path`` is still being written in the background."""
    return _background is not None and os.fspath(path) in _background.pending


def settle() -> None:
    """Wait for the checkpoint work queued in the background; raise its error, if any."""
    if _background is None:
        return
    _background.jobs.join()
    error, _background.error = _background.error, None
    if error is not None:
        raise error

"""Checkpoint files: atomic writes, safe loads, and clear errors.

A checkpoint is a dict of tensors and plain containers (see
:meth:`trainkit.Trainer.save_checkpoint` for its keys), so it loads with
``torch.load(weights_only=True)``: loading a checkpoint never runs code from it.

Writes are atomic (``trainkit.io.atomic_write``): the file is written to a
temporary name in the same folder, flushed and fsynced, then renamed over the
target with ``os.replace``. A process killed mid-save leaves the previous file
intact and at most a stray temporary file (named ``.<name>.tmp-*``), never a
half-written checkpoint under the real name.
"""

from __future__ import annotations

import os
import pickle
import shutil
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from trainkit.io import atomic_write, fsync_folder
from trainkit.seed import capture_rng_states, restore_rng_states
from trainkit.version import __version__

if TYPE_CHECKING:
    from trainkit.trainer import Trainer

#: Marks a dict as a trainkit checkpoint; bumped when the layout changes.
FORMAT = "trainkit-checkpoint"
FORMAT_VERSION = 1


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
    """A checkpoint file is missing, damaged, foreign, or does not fit the model."""


def save_atomic(checkpoint: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Write ``checkpoint`` to ``path`` so that a crash never leaves a broken file there.

    Args:
        checkpoint: the dict to save.
        path: the destination; its folder is created if needed.
    """
    with atomic_write(path, "wb") as file:
        torch.save(dict(checkpoint), file)


def link_atomic(source: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Make ``path`` an exact copy of ``source``, replacing it atomically.

    A hard link costs no second write; where the file system has none, the file
    is copied to a temporary name first. Either way ``path`` is never a dangling
    link nor a half-written file.

    Args:
        source: an existing checkpoint file.
        path: the file to create or replace (e.g. ``last.ckpt``).
    """
    target = Path(path)
    temporary = target.parent / f".{target.name}.tmp-link-{os.getpid()}"
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
    """Load a trainkit checkpoint safely (``weights_only=True``).

    Args:
        path: the checkpoint file.
        map_location: where tensors are loaded (CPU by default; the Trainer moves
            the state to the right devices when it restores it).

    Raises:
        CheckpointError: the file is missing, truncated or corrupt, or not a
            trainkit checkpoint. The message names the file and the problem.
    """
    file = Path(path)
    if not file.is_file():
        raise CheckpointError(f"Checkpoint {file} does not exist (or is not a file).")
    try:
        checkpoint = torch.load(file, map_location=map_location, weights_only=True)
    except _READ_ERRORS as error:
        size = file.stat().st_size
        raise CheckpointError(
            f"Checkpoint {file} ({size} bytes) cannot be read: {_first_line(error)}. The file "
            "is truncated or damaged (for example, copied while being written), or is not a "
            "checkpoint; use another checkpoint, such as the previous one in its folder."
        ) from error
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        kind = type(checkpoint).__name__
        raise CheckpointError(
            f"{file} is not a trainkit checkpoint (it holds a {kind} without the "
            f"'format': '{FORMAT}' entry). To load plain weights, use "
            "module.load_state_dict(torch.load(path, weights_only=True))."
        )
    if checkpoint.get("format_version", 0) > FORMAT_VERSION:
        raise CheckpointError(
            f"{file} was written by a newer trainkit (format version "
            f"{checkpoint['format_version']}, this one reads up to {FORMAT_VERSION}); "
            "upgrade trainkit to load it."
        )
    return checkpoint


def resolve_path(
    ckpt_path: str | os.PathLike[str] | None, last_paths: list[Path], warn: Callable[[str], None]
) -> Path | None:
    """The checkpoint file ``ckpt_path`` names; ``"last"`` is the newest of ``last_paths``.

    Args:
        ckpt_path: a path, ``"last"``, or None (no checkpoint).
        last_paths: where ``last.ckpt`` may be (each ModelCheckpoint's folder).
        warn: prints a warning (rank 0): ``"last"`` with no such file starts fresh.
    """
    if ckpt_path is None:
        return None
    if os.fspath(ckpt_path) != "last":
        return Path(ckpt_path)
    candidates = [path for path in last_paths if path.is_file()]
    if not candidates:
        warn(
            "ckpt_path='last': no last.ckpt found in "
            f"{[str(p.parent) for p in last_paths]}; starting from scratch."
        )
        return None
    return max(candidates, key=lambda path: path.stat().st_mtime)


def peek(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The lineage and global step of a checkpoint file, or None if it is not one.

    Loads with ``mmap=True``, so tensors are not read from disk.

    Args:
        path: a file that may be a trainkit checkpoint.
    """
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # any unreadable file is simply "not one of ours"
        return None
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        return None
    loop = checkpoint.get("loop", {})
    return {"lineage": checkpoint.get("lineage"), "global_step": loop.get("global_step", 0)}


def load_module_state(module: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> None:
    """Load ``state`` into ``module``, or explain every key that does not fit.

    Args:
        module: the model to load into.
        state: a state dict.
        source: where the state came from, for the message (a file name).

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
    if missing or unexpected or mis_shaped:
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
    module.load_state_dict(state)


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
def collect_state(trainer: Trainer) -> dict[str, Any]:
    """The full training state of ``trainer``'s run, as a weights-only-safe dict.

    Args:
        trainer: the running Trainer.
    """
    module = trainer.module
    checkpoint: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "versions": {"trainkit": __version__, "torch": str(torch.__version__)},
        "lineage": trainer.state.lineage,
        "loop": trainer.state.state_dict(),
        "rng": capture_rng_states(),
        "state_dict": module.state_dict(),
        "optimizer_states": [optimizer.state_dict() for optimizer in trainer.optimizers],
        "lr_schedulers": [c.scheduler.state_dict() for c in trainer.lr_scheduler_configs],
        "callbacks": {cb.state_key: cb.state_dict() for cb in trainer.callbacks},
        **trainer.results.state_dict(),
        # Only rank 0 logs: reading a logger's version elsewhere would claim a folder.
        "loggers": [logger.state_dict() for logger in trainer.loggers]
        if trainer.is_global_zero
        else [],
        "hyper_parameters": plain_hparams(module.hparams),
        "config": None,  # the trainkit command's run config (its callback fills it in)
    }
    if trainer.datamodule is not None:
        checkpoint["datamodule"] = trainer.datamodule.state_dict()
    module.on_save_checkpoint(checkpoint)
    for callback in trainer.callbacks:
        callback.on_save_checkpoint(trainer, module, checkpoint)
    return checkpoint


def restore_state(trainer: Trainer, checkpoint: dict[str, Any], source: str) -> None:
    """Put ``trainer``'s run back in the state ``checkpoint`` was saved in.

    Args:
        trainer: the Trainer, set up for fit (module, optimizers, callbacks).
        checkpoint: a loaded checkpoint.
        source: where it came from, for messages.
    """
    module = trainer.module
    module.on_load_checkpoint(checkpoint)
    for callback in trainer.callbacks:
        callback.on_load_checkpoint(trainer, module, checkpoint)
    load_module_state(module, checkpoint["state_dict"], source)
    _load_each("optimizer", trainer.optimizers, checkpoint["optimizer_states"], source)
    schedulers = [config.scheduler for config in trainer.lr_scheduler_configs]
    _load_each("LR scheduler", schedulers, checkpoint["lr_schedulers"], source)
    callback_states = checkpoint.get("callbacks", {})
    for callback in trainer.callbacks:
        if callback.state_key in callback_states:
            callback.load_state_dict(callback_states[callback.state_key])
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
    if trainer.datamodule is not None and "datamodule" in checkpoint:
        trainer.datamodule.load_state_dict(checkpoint["datamodule"])
    restore_rng_states(checkpoint["rng"])


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


def _load_each(kind: str, targets: list[Any], states: list[Any], source: str) -> None:
    """``load_state_dict`` into each target, after checking that the counts match."""
    if len(states) != len(targets):
        raise CheckpointError(
            f"The checkpoint {source} has {len(states)} {kind} states, but "
            f"configure_optimizers returned {len(targets)} {kind}s."
        )
    for target, state in zip(targets, states, strict=True):
        target.load_state_dict(state)

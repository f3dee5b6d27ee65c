"""Lightning's checkpoint-IO plugins: trainkit writes its own checked checkpoint files.

``TorchCheckpointIO()`` is accepted (trainkit's files are ``torch.save`` files,
written atomically and fsynced); ``AsyncCheckpointIO()`` is accepted with a
warning (one-file checkpoints are written at once, not in the background); a
subclass (a writer to other storage) is refused, saying why. ``save_checkpoint``,
``load_checkpoint`` and ``remove_checkpoint`` work on their own too.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch

from trainkit.lightning._missing import submodule_or_missing
from trainkit.lightning.plugins._base import Plugin
from trainkit.utilities.io import atomic_write

__all__ = ["AsyncCheckpointIO", "CheckpointIO", "TorchCheckpointIO"]


class CheckpointIO(Plugin):
    """Lightning's base of the checkpoint writers."""

    def _option(self) -> str:
        return "no plugin: trainkit writes its own checked checkpoint files"

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None
    ) -> None:
        """Write ``checkpoint`` to ``path``."""
        raise NotImplementedError

    def load_checkpoint(
        self, path: Any, map_location: Any | None = None, weights_only: bool | None = None
    ) -> dict[str, Any]:
        """Read the checkpoint at ``path`` (``weights_only`` as for ``torch.load``)."""
        raise NotImplementedError

    def remove_checkpoint(self, path: Any) -> None:
        """Delete the checkpoint at ``path``."""
        raise NotImplementedError

    def teardown(self) -> None:
        """Release what the writer holds."""


class TorchCheckpointIO(CheckpointIO):
    """``torch.save`` files, written atomically and fsynced (trainkit writes its own so)."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None
    ) -> None:
        if storage_options is not None:
            raise TypeError(
                "TorchCheckpointIO.save_checkpoint takes no storage_options; save without them."
            )
        with atomic_write(path, "wb") as file:
            torch.save(checkpoint, file)

    def load_checkpoint(
        self, path: Any, map_location: Any | None = None, weights_only: bool | None = None
    ) -> dict[str, Any]:
        # By default tensors and plain containers only: no code from the file runs (None
        # is torch's default, which torch's TORCH_FORCE_* variables change, as in Lightning).
        loaded: dict[str, Any] = torch.load(
            path,
            map_location="cpu" if map_location is None else map_location,
            weights_only=weights_only,
        )
        return loaded

    def remove_checkpoint(self, path: Any) -> None:
        Path(path).unlink(missing_ok=True)


class AsyncCheckpointIO(TorchCheckpointIO):
    """Lightning's background writer; under trainkit the files are written at once."""

    def __init__(self, checkpoint_io: CheckpointIO | None = None) -> None:
        self.checkpoint_io = checkpoint_io

    def trainkit_plugin_refusal(self) -> str | None:
        if self.checkpoint_io is not None and type(self.checkpoint_io) is not TorchCheckpointIO:
            return (
                f"checkpoint_io={type(self.checkpoint_io).__name__}: trainkit writes its own "
                "checkpoint files; drop the plugin"
            )
        refusal = super().trainkit_plugin_refusal()
        if refusal is None:
            warnings.warn(
                "AsyncCheckpointIO: trainkit writes one-file checkpoints at once (atomically "
                "and fsynced), not in a background thread; FSDPStrategy(async_save=True) writes "
                "sharded ones in the background.",
                stacklevel=4,
            )
        return refusal


def __getattr__(name: str) -> Any:
    # Lightning's submodules reached as attributes, as after importing Lightning.
    return submodule_or_missing(__name__, name, __all__)

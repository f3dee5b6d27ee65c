"""A ModelCheckpoint whose hooks another callback calls, not the loop.

A Lightning project may wrap checkpoint callbacks in one of its own that forwards
Lightning's hooks to them (``on_train_epoch_end``, ``on_validation_end``,
``on_train_batch_end``). trainkit's loop saves a ModelCheckpoint's files at resume
points (``on_resume_point``), which such a wrapper does not forward, so the inner
callback would note its saves and never write them. One that the Trainer does not
hold therefore saves where Lightning's does: in the hook that finds a save due.
Such a file resumes at its epoch and step, as a Lightning checkpoint does, not
exactly mid-epoch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainkit.callbacks.checkpoint import ModelCheckpoint


def save_if_forwarded(callback: ModelCheckpoint, trainer: Any) -> None:
    """Save now if a save is due and ``trainer`` does not hold ``callback`` itself.

    Args:
        callback: the ModelCheckpoint whose hook ran.
        trainer: the Trainer passed to that hook.
    """
    if not callback._due or any(held is callback for held in getattr(trainer, "callbacks", ())):
        return
    if callback.dirpath is None:  # fixed at fit start, which the wrapper did not forward
        callback.dirpath = callback._logger_folder(trainer)
    callback.on_resume_point(trainer, trainer.lightning_module)

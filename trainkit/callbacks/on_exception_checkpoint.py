"""OnExceptionCheckpoint: save a checkpoint when fit raises, to resume from later.

As Lightning's: the file is ``dirpath/filename.ckpt``; an exception during fit
writes it (replacing an earlier one, atomically: a crash while writing leaves
the previous file whole); a fit that finishes removes it, since it is older
than the run's own end. ``ckpt_path="last"`` considers it along with
ModelCheckpoint's ``last.ckpt`` and picks the newest.

Where trainkit differs: Lightning also resumes from this file when ``fit`` is
called with ``ckpt_path=None``; trainkit starts a fresh run then, as a plain
``fit`` always does; pass ``ckpt_path="last"`` (or the file's path) to resume.
And only a ``fit`` that finishes removes the file: a ``validate`` or ``test``
run leaves it for the fit it belongs to (Lightning removes it after any run).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from trainkit.callbacks.base import Checkpoint

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer


class OnExceptionCheckpoint(Checkpoint):
    """Save the training state to ``dirpath/filename.ckpt`` when ``fit`` raises.

    The checkpoint is a full one (``Trainer.save_checkpoint``): ``fit(...,
    ckpt_path=...)`` resumes from it. Raised in the middle of an epoch, the run
    resumes at the batch after the last one completed; one raised inside an
    accumulation window or an optimizer step resumes from the state the
    exception left (as in Lightning), so it is not an exact resume point.

    Args:
        dirpath: the folder of the checkpoint (created when needed).
        filename: the file's name, without the ``.ckpt`` extension.

    Raises:
        ValueError: ``filename`` is empty.

    Example:
        >>> callback = OnExceptionCheckpoint("checkpoints")
        >>> callback.ckpt_path
        'checkpoints/on_exception.ckpt'
    """

    FILE_EXTENSION = ".ckpt"

    def __init__(self, dirpath: str | os.PathLike[str], filename: str = "on_exception") -> None:
        if not filename:
            raise ValueError(
                "OnExceptionCheckpoint(filename=''): the filename cannot be empty; pass a "
                "name without extension, e.g. filename='on_exception'."
            )
        # Known from the start: an exception may come before setup.
        self.dirpath = dirpath
        self.filename = filename
        self._raised = False

    @property
    def ckpt_path(self) -> str:
        """Where the checkpoint is written."""
        return os.path.join(self.dirpath, self.filename + self.FILE_EXTENSION)

    @property
    def state_key(self) -> str:
        """Distinct per file, so two of these callbacks can coexist."""
        return self._generate_state_key(dirpath=os.fspath(self.dirpath), filename=self.filename)

    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Forget an earlier run's exception."""
        super().setup(trainer, module, stage)
        self._raised = False

    def on_exception(self, trainer: Trainer, *_: Any) -> None:
        """Save the checkpoint (fit only: other runs change no training state)."""
        self._raised = True
        if trainer.state.fn != "fit":
            return
        # Replaces an earlier exception's file, as Lightning does; atomically.
        trainer.save_checkpoint(self.ckpt_path)

    def teardown(
        self, trainer: Trainer, module: Module | None = None, stage: str | None = None
    ) -> None:
        """After a fit that finished, remove the file: it is older than the run's end."""
        if stage is None:  # called as Lightning declares it, teardown(trainer)
            stage = trainer.state.fn
        if stage != "fit" or self._raised:
            return
        if trainer.is_global_zero and os.path.isfile(self.ckpt_path):
            os.remove(self.ckpt_path)

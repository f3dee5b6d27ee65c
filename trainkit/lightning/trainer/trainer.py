"""Lightning's ``lightning.pytorch.trainer.trainer``: the Trainer ported code builds.

``trainkit.lightning.Trainer`` is trainkit's :class:`~trainkit.Trainer` with one
default of Lightning's: its default logger writes to ``lightning_logs/version_N``
under ``default_root_dir`` (``trainkit.Trainer`` writes to ``logs/version_N``), so
a ported project finds its logs and checkpoints where its code and tests look.
Everything else is the same class.
"""

from __future__ import annotations

from trainkit.trainer.trainer import Trainer as _Trainer

__all__ = ["Trainer"]


class Trainer(_Trainer):
    """trainkit's Trainer, logging by default to ``lightning_logs/`` as Lightning's does.

    Example:
        >>> import tempfile, trainkit.lightning as L
        >>> root = tempfile.mkdtemp()
        >>> L.Trainer(default_root_dir=root).logger.log_dir == f"{root}/lightning_logs/version_0"
        True
    """

    _default_logger_name = "lightning_logs"

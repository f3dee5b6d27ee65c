"""Lightning's ``lightning.pytorch.loggers.csv_logs``: trainkit's CSV logger with
Lightning's default folder name."""

from __future__ import annotations

import os

from trainkit.lightning.fabric.utilities.logger import _convert_params
from trainkit.lightning.loggers._folder import _LightningLogs
from trainkit.loggers import csv
from trainkit.loggers.csv import ExperimentWriter

__all__ = ["CSVLogger", "ExperimentWriter", "_convert_params"]


class CSVLogger(csv.CSVLogger, _LightningLogs):
    """trainkit's :class:`~trainkit.loggers.CSVLogger`, named ``lightning_logs`` by default
    as Lightning's is (``<save_dir>/lightning_logs/version_N``); the arguments are the same.

    Example:
        >>> import tempfile
        >>> root = tempfile.mkdtemp()
        >>> CSVLogger(root).log_dir == os.path.join(root, "lightning_logs", "version_0")
        True
    """

    def __init__(
        self,
        save_dir: str | os.PathLike[str],
        name: str | None = "lightning_logs",
        version: int | str | None = None,
        prefix: str = "",
        flush_logs_every_n_steps: int = 100,
    ) -> None:
        super().__init__(
            save_dir,
            name=name,
            version=version,
            prefix=prefix,
            flush_logs_every_n_steps=flush_logs_every_n_steps,
        )

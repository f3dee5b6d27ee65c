"""CSVLogger: metrics in a plain ``metrics.csv``, hyperparameters in ``hparams.yaml``."""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping
from typing import Any

from trainkit.loggers._files import _write_hparams_yaml
from trainkit.loggers._tracking import with_prefix
from trainkit.loggers.base import FolderLogger
from trainkit.utilities.io import atomic_write

METRICS_FILE = "metrics.csv"


class CSVLogger(FolderLogger):
    """Write metrics to ``<log_dir>/metrics.csv``: a ``step`` column, then one per metric.

    Each ``log_metrics`` call becomes one row. Rows are kept in memory and
    written every ``flush_logs_every_n_steps`` steps and at ``save()`` (the end
    of every fit, validate and test); columns appear in the order metric names are first
    seen, and a metric that first shows up later widens the file (earlier rows
    get empty cells). Folders and versions follow the same rules as
    :class:`~trainkit.loggers.TensorBoardLogger`.

    Args:
        save_dir: root folder for all experiments.
        name: experiment name, the folder under ``save_dir`` (None or "": none).
        version: ``None`` claims the next free ``version_N``, never sharing or
            overwriting an existing folder, even with concurrent processes. An
            explicit version is reused if it exists, and a resumed run appends
            to its ``metrics.csv``.
        prefix: put ``<prefix>-`` in front of every metric name.
        flush_logs_every_n_steps: write the rows kept so far after each step ``s``
            with ``(s + 1) % flush_logs_every_n_steps == 0`` (Lightning's rule).
    """

    def __init__(
        self,
        save_dir: str | os.PathLike[str],
        name: str | None = "logs",
        version: int | str | None = None,
        prefix: str = "",
        flush_logs_every_n_steps: int = 100,
    ) -> None:
        if flush_logs_every_n_steps < 1:
            raise ValueError(
                f"CSVLogger(flush_logs_every_n_steps={flush_logs_every_n_steps}) must be at "
                "least 1 (1 writes the file at every logged step)."
            )
        super().__init__(save_dir, name, version)
        self._prefix = prefix
        self._flush_every = flush_logs_every_n_steps
        self._pending: list[dict[str, float]] = []
        # The header of metrics.csv as it is on disk; None until first read.
        self._file_columns: list[str] | None = None

    @property
    def experiment(self) -> CSVExperiment:
        """The writer of this run's files, as Lightning's ``CSVLogger.experiment`` offers it."""
        return CSVExperiment(self)

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Keep one row; rows go to the file every ``flush_logs_every_n_steps`` steps and at save.

        Args:
            metrics: metric name to value.
            step: the global step the values belong to.
        """
        # Every value as a float (the epoch arrives as an int), one format per column.
        self._pending.append(
            {"step": step, **with_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR)}
        )
        if (step + 1) % self._flush_every == 0:
            self.save()

    def log_hyperparams(self, params: Mapping[str, Any]) -> None:
        """Write ``params`` to ``<log_dir>/hparams.yaml``.

        Args:
            params: hyperparameter name to value (nested mappings allowed).
        """
        _write_hparams_yaml(self.log_dir, params)

    def save(self) -> None:
        """Write buffered rows: append them, or rewrite the file if the header must widen."""
        if not self._pending:
            return
        path = os.path.join(self.log_dir, METRICS_FILE)
        if self._file_columns is None:
            # A resumed run (explicit version) may find the file of its earlier part.
            self._file_columns = _read_header(path)
        columns = list(self._file_columns) or ["step"]
        for row in self._pending:
            columns.extend(key for key in row if key not in columns)

        if columns == self._file_columns:
            with open(path, "a", newline="", encoding="utf-8") as file:
                csv.DictWriter(file, fieldnames=columns, restval="").writerows(self._pending)
        else:
            # Widening the header means rewriting every row; do it atomically so a
            # crash leaves the old file, not a truncated one.
            old_rows = _read_rows(path)
            with atomic_write(path) as file:
                writer = csv.DictWriter(file, fieldnames=columns, restval="")
                writer.writeheader()
                writer.writerows(old_rows)
                writer.writerows(self._pending)
        self._file_columns = columns
        self._pending.clear()


def _read_header(path: str) -> list[str]:
    """Return the column names of the CSV file at ``path``, or ``[]`` if it does not exist."""
    try:
        with open(path, newline="", encoding="utf-8") as file:
            return next(csv.reader(file), [])
    except FileNotFoundError:
        return []


def _read_rows(path: str) -> list[dict[str, str]]:
    """Return the rows of the CSV file at ``path``, or ``[]`` if it does not exist."""
    try:
        with open(path, newline="", encoding="utf-8") as file:
            return list(csv.DictReader(file))
    except FileNotFoundError:
        return []


class CSVExperiment:
    """What ``CSVLogger.experiment`` returns: the run's files, under Lightning's names.

    ``log_metrics`` and ``log_hparams`` write through the logger (rows kept until
    ``save()`` or the next flush; ``hparams.yaml`` at once).

    Args:
        logger: the logger whose run this is.
    """

    #: The metrics file's name.
    NAME_METRICS_FILE = METRICS_FILE
    #: The hyperparameters file's name.
    NAME_HPARAMS_FILE = "hparams.yaml"

    def __init__(self, logger: CSVLogger) -> None:
        self._logger = logger

    @property
    def log_dir(self) -> str:
        """The run's folder (``<save_dir>/<name>/version_<N>``)."""
        return self._logger.log_dir

    @property
    def metrics_file_path(self) -> str:
        """The path of ``metrics.csv``."""
        return os.path.join(self.log_dir, METRICS_FILE)

    @property
    def metrics(self) -> list[dict[str, float]]:
        """The rows logged and not yet written to the file."""
        return self._logger._pending

    def log_metrics(self, metrics_dict: Mapping[str, float], step: int | None = None) -> None:
        """Keep one row (``step``: the number of rows waiting, when None).

        Args:
            metrics_dict: metric name to value.
            step: the row's step.
        """
        self._logger.log_metrics(metrics_dict, len(self.metrics) if step is None else step)

    def log_hparams(self, params: Mapping[str, Any]) -> None:
        """Write ``params`` to ``hparams.yaml``.

        Args:
            params: hyperparameter name to value.
        """
        self._logger.log_hyperparams(params)

    def save(self) -> None:
        """Write the waiting rows to ``metrics.csv``."""
        self._logger.save()

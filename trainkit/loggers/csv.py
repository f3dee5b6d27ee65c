"""CSVLogger: metrics in a plain ``metrics.csv``, hyperparameters in ``hparams.yaml``."""

from __future__ import annotations

import csv
import os
from argparse import Namespace
from collections.abc import Mapping
from typing import Any

import torch

from trainkit.loggers._files import _write_hparams_yaml
from trainkit.loggers._tracking import with_prefix
from trainkit.loggers.base import FolderLogger, hyperparameters
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
        self._experiment: ExperimentWriter | None = None

    @property
    def experiment(self) -> ExperimentWriter:
        """The writer of this run's files (made at the first use); every write goes through it.

        A subclass may return a writer of its own (an :class:`ExperimentWriter` subclass).
        """
        if self._experiment is None:
            self._experiment = ExperimentWriter(self.log_dir)
        return self._experiment

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Keep one row; rows go to the file every ``flush_logs_every_n_steps`` steps and at save.

        Args:
            metrics: metric name to value.
            step: the global step the values belong to (None, as Lightning allows: the
                number of rows waiting to be written).
        """
        writer = self.experiment
        if step is None:
            step = len(writer.metrics)
        writer.log_metrics(with_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR), step)
        if (step + 1) % self._flush_every == 0:
            self.save()

    def log_hyperparams(self, params: Mapping[str, Any] | Namespace) -> None:
        """Write ``params`` (with those logged before) to ``<log_dir>/hparams.yaml``.

        Args:
            params: hyperparameter name to value (nested mappings allowed), or an
                ``argparse.Namespace``.
        """
        self.experiment.log_hparams(hyperparameters(params))

    def save(self) -> None:
        """Write the rows kept so far to ``metrics.csv``."""
        if self._experiment is not None:  # nothing logged: no writer, and no folder claimed
            self._experiment.save()


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


class ExperimentWriter:
    """The writer of one run's ``metrics.csv`` and ``hparams.yaml`` in ``log_dir``.

    What ``CSVLogger.experiment`` returns, under Lightning's name, and usable alone.
    Rows are kept until :meth:`save`, which appends them to ``metrics.csv``: a
    file already there (a resumed run's) is continued, never replaced; the columns
    are in alphabetical order, as Lightning writes them, and a column first seen
    later widens the file, rewritten atomically. ``hparams.yaml`` is written at
    each :meth:`log_hparams`. Nothing is created before the first write.

    Args:
        log_dir: the run's folder.

    Example:
        >>> import tempfile
        >>> writer = ExperimentWriter(tempfile.mkdtemp())
        >>> writer.log_metrics({"loss": 0.5}, step=0)
        >>> writer.save()
        >>> open(writer.metrics_file_path).read().splitlines()
        ['loss,step', '0.5,0']
    """

    #: The metrics file's name.
    NAME_METRICS_FILE = METRICS_FILE
    #: The hyperparameters file's name.
    NAME_HPARAMS_FILE = "hparams.yaml"

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        #: The run's folder.
        self.log_dir = os.fspath(log_dir)
        #: The path of ``metrics.csv``.
        self.metrics_file_path = os.path.join(self.log_dir, METRICS_FILE)
        #: The hyperparameters logged so far.
        self.hparams: dict[str, Any] = {}
        #: The rows logged and not yet written to the file.
        self.metrics: list[dict[str, Any]] = []
        # The header of metrics.csv as it is on disk; None until first read.
        self._file_columns: list[str] | None = None

    @property
    def metrics_keys(self) -> list[str]:
        """The file's columns once the rows kept are written, in alphabetical order (as
        Lightning's): those on disk, ``step``, and every name of the rows kept."""
        columns = {"step", *self._on_disk()}
        for row in self.metrics:
            columns.update(row)
        return sorted(columns)

    def log_metrics(self, metrics_dict: Mapping[str, Any], step: int | None = None) -> None:
        """Keep one row (tensors as numbers).

        Args:
            metrics_dict: metric name to value.
            step: the row's step (None: the number of rows waiting).
        """
        row: dict[str, Any] = {"step": len(self.metrics) if step is None else step}
        for name, value in metrics_dict.items():
            row[name] = value.item() if isinstance(value, torch.Tensor) else value
        self.metrics.append(row)

    def log_hparams(self, params: Mapping[str, Any]) -> None:
        """Add ``params`` to the hyperparameters and write them all to ``hparams.yaml``.

        Args:
            params: hyperparameter name to value (nested mappings allowed).
        """
        self.hparams.update(params)
        _write_hparams_yaml(self.log_dir, self.hparams)

    def save(self) -> None:
        """Write the rows kept: append them, or rewrite the file if its header must widen."""
        if not self.metrics:
            return
        columns = self.metrics_keys
        path = self.metrics_file_path
        if columns == self._on_disk():
            with open(path, "a", newline="", encoding="utf-8") as file:
                csv.DictWriter(file, fieldnames=columns, restval="").writerows(self.metrics)
        else:
            # Widening the header means rewriting every row; do it atomically so a
            # crash leaves the old file, not a truncated one.
            old_rows = _read_rows(path)
            with atomic_write(path) as file:
                writer = csv.DictWriter(file, fieldnames=columns, restval="")
                writer.writeheader()
                writer.writerows(old_rows)
                writer.writerows(self.metrics)
        self._file_columns = columns
        self.metrics.clear()

    def _on_disk(self) -> list[str]:
        if self._file_columns is None:
            # A resumed run (explicit version) may find the file of its earlier part.
            self._file_columns = _read_header(self.metrics_file_path)
        return self._file_columns

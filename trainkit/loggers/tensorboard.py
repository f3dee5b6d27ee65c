"""TensorBoardLogger: scalars and hyperparameters in TensorBoard event files."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trainkit.loggers._event_file import EventFile
from trainkit.loggers._files import _write_hparams_yaml
from trainkit.loggers.base import FolderLogger

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter


class TensorBoardLogger(FolderLogger):
    """Write metrics and hyperparameters for TensorBoard.

    Each run writes to ``<save_dir>/<name>/version_<N>/`` (or
    ``<save_dir>/<name>/<version>`` when ``version`` is a string). Nothing is
    created until the logger is first used, so a Trainer that never logs
    leaves no empty folders behind.

    Args:
        save_dir: root folder for all experiments.
        name: experiment name, the folder under ``save_dir``.
        version: ``None`` claims the next free ``version_N``, never sharing or
            overwriting an existing folder, even with concurrent processes. An
            explicit version is reused if it exists, which is how a resumed run
            keeps appending to the same run.
        default_hp_metric: when hyperparameters are logged without metrics, log
            ``hp_metric=-1`` with them, so that TensorBoard's HParams tab lists the
            run (log the real value under "hp_metric" to replace it), as Lightning does.
    """

    def __init__(
        self,
        save_dir: str | os.PathLike[str],
        name: str = "logs",
        version: int | str | None = None,
        default_hp_metric: bool = True,
    ) -> None:
        super().__init__(save_dir, name, version)
        self.default_hp_metric = default_hp_metric
        self._writer: SummaryWriter | None = None
        # Scalars and hparams go through our own event file (see _event_file.py);
        # the SummaryWriter exists only when a user asks for `experiment`.
        self._events: EventFile | None = None

    @property
    def experiment(self) -> SummaryWriter:
        """The underlying ``SummaryWriter``, e.g. for ``logger.experiment.add_image``.

        Opened on first use; after ``finalize`` a new one is opened on the same folder.
        """
        if self._writer is None:
            # Lazy: importing tensorboard costs about a second.
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=self.log_dir)
        return self._writer

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Write each metric as a scalar at ``step``.

        Args:
            metrics: metric name to value.
            step: the global step the values belong to.
        """
        self._event_file().add_scalars(metrics, step)

    def log_hyperparams(
        self, params: Mapping[str, Any], metrics: Mapping[str, float] | None = None
    ) -> None:
        """Write ``hparams.yaml`` and the HParams-tab summary.

        Nested mappings become ``/``-joined names (``{"optim": {"lr": 0.1}}`` is
        shown as ``optim/lr``); values TensorBoard cannot show are written as strings.

        Args:
            params: hyperparameter name to value (nested mappings allowed).
            metrics: values to show beside them in the HParams tab (default:
                ``{"hp_metric": -1}`` with ``default_hp_metric=True``).
        """
        from torch.utils.tensorboard.summary import hparams

        _write_hparams_yaml(self.log_dir, params)
        if metrics is None and self.default_hp_metric:
            metrics = {"hp_metric": -1}
        if metrics:
            self.log_metrics(metrics, 0)
        # SummaryWriter.add_hparams would write to a new sub-folder (a separate run
        # in TensorBoard); writing the protos ourselves keeps them with the scalars.
        summaries = hparams(_flatten_for_tensorboard(params), metric_dict=dict(metrics or {}))  # type: ignore[no-untyped-call]
        events = self._event_file()
        for summary in summaries:
            events.add_summary(summary)

    def _event_file(self) -> EventFile:
        if self._events is None:
            self._events = EventFile(self.log_dir)
        return self._events

    def save(self) -> None:
        """Flush pending events to disk."""
        if self._events is not None:
            self._events.flush()
        if self._writer is not None:
            self._writer.flush()

    def finalize(self, status: str) -> None:
        """Flush and close the event file; safe to call more than once.

        Args:
            status: "success", "failed" or "interrupted".
        """
        if self._events is not None:
            self._events.close()
            self._events = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _flatten_for_tensorboard(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested mappings to ``a/b`` keys; keep numbers and strings, stringify the rest."""
    flat: dict[str, Any] = {}
    for key, value in params.items():
        full_key = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten_for_tensorboard(value, prefix=f"{full_key}/"))
        elif isinstance(value, (bool, int, float, str)):
            flat[full_key] = value
        else:
            # None, lists and arbitrary objects: torch's hparams() drops or rejects them.
            flat[full_key] = str(value)
    return flat

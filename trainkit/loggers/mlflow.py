"""MLflowLogger: hyperparameters, metrics and checkpoints in an MLflow run.

MLflow is optional (``pip install "trainkit[mlflow]"``); it is imported when the
logger first writes, not at ``import trainkit``.
"""

from __future__ import annotations

import os
import time
import warnings
from argparse import Namespace
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote, urlparse

from trainkit.loggers._tracking import (
    CheckpointFiles,
    flatten,
    on_rank_zero,
    other_ranks_experiment,
    require_package,
    with_prefix,
)
from trainkit.loggers.base import Logger, hyperparameters

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

# MLflow's limits (mlflow.utils.validation): parameter values, and entries per log_batch call.
_MAX_PARAM_LENGTH = 6000
_PARAMS_PER_BATCH = 100
_METRICS_PER_BATCH = 1000
# finalize()'s status as MLflow's run status.
_RUN_STATUS = {"success": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}
_UNSET: Any = object()


class MLflowLogger(Logger):
    """Write hyperparameters (params), metrics (by step) and checkpoints to an MLflow run.

    The constructor takes Lightning's ``MLFlowLogger`` names. Where the run lives:
    ``tracking_uri`` if given, else the ``MLFLOW_TRACKING_URI`` environment
    variable, else MLflow's local file store in ``save_dir`` (``./mlruns``), which
    ``mlflow ui --backend-store-uri ./mlruns`` shows.

    MLflow 3 refuses its file store unless ``MLFLOW_ALLOW_FILE_STORE=true``;
    with a ``file:`` store this logger sets that variable for its process when
    you have not set it yourself, because the file store needs no server and no
    database and works with ``mlflow-skinny``. For MLflow's database store pass
    ``tracking_uri="sqlite:///mlflow.db"`` (it needs the full ``mlflow``
    package, which brings SQLAlchemy); for a server, ``http://host:5000``.

    The experiment and run are created on first use, on global rank 0 only
    (the Trainer calls loggers there; ``experiment`` raises on another rank).
    Checkpoints of a run go to ``<save_dir>/<experiment id>/<run id>/checkpoints``
    (the run's folder in a file store), as with Lightning.

    Where trainkit differs from Lightning: ``name`` is the experiment *name*
    (Lightning: its id), readable on every rank without contacting MLflow;
    a run that is resumed from a checkpoint continues the MLflow run the
    checkpoint names.

    Args:
        experiment_name: the MLflow experiment; created if it does not exist.
        run_name: the run's name (MLflow picks one when None).
        tracking_uri: where MLflow stores runs (see above).
        tags: tags set on a new run.
        save_dir: the file store's folder when no tracking URI is set; with a
            remote one, the local folder that holds the runs' checkpoints.
        log_model: upload checkpoints as artifacts under ``checkpoints/``: True
            uploads the run's checkpoint files when the run ends, "all" also
            each checkpoint when ``ModelCheckpoint`` reports it saved, False none.
        prefix: put ``<prefix>-`` in front of every metric name.
        artifact_location: where a new experiment keeps artifacts (MLflow's default when None).
        run_id: continue this existing run instead of starting a new one.
        synchronous: False queues each write and returns at once (MLflow's
            asynchronous logging); the queued writes are waited for when the run
            ends (``finalize``), and one that failed raises there. True or None
            (MLflow's default, synchronous) waits for each write.
    """

    _assigned_uri: Any = _UNSET  # a tracking_uri a subclass assigned (see the property)

    def __init__(
        self,
        experiment_name: str = "trainkit_logs",
        run_name: str | None = None,
        tracking_uri: str | None = None,
        tags: Mapping[str, Any] | None = None,
        save_dir: str | os.PathLike[str] = "./mlruns",
        log_model: bool | Literal["all"] = False,
        prefix: str = "",
        artifact_location: str | None = None,
        run_id: str | None = None,
        synchronous: bool | None = None,
    ) -> None:
        require_package("mlflow", "mlflow", "MLflowLogger")
        if log_model not in (True, False, "all"):
            raise ValueError(
                f'MLflowLogger(log_model=...) must be True, False or "all", got {log_model!r}'
            )
        self._experiment_name = experiment_name
        self._run_name = run_name
        self._tags = dict(tags or {})
        uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if uri is None:
            uri = "file:" + os.path.abspath(os.fspath(save_dir))
        self._tracking_uri = uri
        # A file store's folder is the save_dir; otherwise checkpoints still need a local one.
        file_store = _file_store_path(uri)
        self._save_dir = file_store or os.fspath(save_dir)
        self._log_model = log_model
        self._prefix = prefix
        self._artifact_location = artifact_location
        self._run_id = run_id
        self._synchronous = synchronous
        # The queued writes (synchronous=False) not yet waited for: MLflow's RunOperations.
        self._queued: list[Any] = []
        # synchronous=False with a file store: the (kind, name)s written so far. MLflow's
        # queue writes batches from several threads, and its file store makes a
        # name's folder with a check, then a makedirs that fails ("File exists")
        # when another thread made it in between; so a batch with a new name is
        # written at once, and only writes to existing names are queued.
        self._written: set[tuple[str, str]] | None = (
            set() if synchronous is False and file_store is not None else None
        )
        self._experiment_id: str | None = None
        self._client: MlflowClient | None = None
        self._checkpoints = CheckpointFiles()

    # ----------------------------------------------------------------- identity
    @property
    def name(self) -> str:
        """The experiment's name."""
        return self._experiment_name

    @property
    def version(self) -> str:
        """The run's id; the first access starts the run (on rank 0)."""
        self.experiment  # noqa: B018 (creates the run)
        if self._run_id is None:
            raise _rank_zero_only("version (the run id)")
        return self._run_id

    @property
    def save_dir(self) -> str:
        """The file store's folder, or the local folder for checkpoints with another store."""
        return self._save_dir

    @property
    def log_dir(self) -> str:
        """The run's local folder: ``<save_dir>/<experiment id>/<run id>``."""
        run_id = self.version
        assert self._experiment_id is not None
        return os.path.join(self._save_dir, self._experiment_id, run_id)

    @property
    def tracking_uri(self) -> str | None:
        """Where the runs are stored: the URI ``__init__`` resolved.

        Lightning's logger has no such attribute, so a subclass written for it may
        assign one of its own (``None`` for offline, before calling ``__init__``):
        reading it then gives the value assigned, which does not move the runs (pass
        ``tracking_uri=`` to ``__init__`` for that).
        """
        return self._tracking_uri if self._assigned_uri is _UNSET else self._assigned_uri

    @tracking_uri.setter
    def tracking_uri(self, uri: str | None) -> None:
        self._assigned_uri = uri

    @property
    def run_id(self) -> str:
        """The MLflow run's id (starts the run on first use)."""
        return self.version

    @property
    def experiment_id(self) -> str:
        """The MLflow experiment's id (creates it on first use)."""
        self.experiment  # noqa: B018 (creates the experiment)
        if self._experiment_id is None:
            raise _rank_zero_only("experiment_id")
        return self._experiment_id

    @property
    def experiment(self) -> MlflowClient:
        """The ``MlflowClient``, with the run started, e.g. ``logger.experiment.log_text(
        logger.run_id, text, "notes.txt")``.

        On a global rank other than 0: a stand-in that takes any call and does nothing,
        as Lightning's ``rank_zero_experiment`` gives.
        """
        if self._client is not None:
            return self._client
        if not on_rank_zero():
            return other_ranks_experiment()  # type: ignore[no-any-return]
        client = self._new_client()
        if self._run_id is not None:
            run = client.get_run(self._run_id)  # raises when no such run exists
            self._experiment_id = run.info.experiment_id
            client.update_run(self._run_id, status="RUNNING")
        else:
            found = client.get_experiment_by_name(self._experiment_name)
            if found is not None:
                self._experiment_id = found.experiment_id
            else:
                self._experiment_id = client.create_experiment(
                    self._experiment_name, artifact_location=self._artifact_location
                )
            run = client.create_run(
                self._experiment_id,
                run_name=self._run_name,
                tags={key: str(value) for key, value in self._tags.items()},
            )
            self._run_id = run.info.run_id
        self._client = client
        return client

    @property
    def _mlflow_client(self) -> MlflowClient:
        """The ``MlflowClient`` (private in Lightning, but read by projects): the
        run's client once it has started, else one for the store ``__init__`` resolved."""
        if self._client is not None:
            return self._client
        return self._new_client()

    def _new_client(self) -> MlflowClient:
        # A client for the store __init__ resolved (a file store allowed: see the class).
        if self._tracking_uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self._tracking_uri)

    # ------------------------------------------------------------------ writing
    def log_hyperparams(self, params: Mapping[str, Any] | Namespace) -> None:
        """Write the hyperparameters as the run's params.

        Nested mappings become ``/``-joined names; values are written as strings,
        cut to MLflow's 6000 characters.

        Args:
            params: hyperparameter name to value (nested mappings allowed), or an
                ``argparse.Namespace``.
        """
        if not on_rank_zero():
            return
        from mlflow.entities import Param

        values = [
            Param(key, str(value)[:_MAX_PARAM_LENGTH])
            for key, value in flatten(hyperparameters(params)).items()
        ]
        for start in range(0, len(values), _PARAMS_PER_BATCH):
            self._log_batch(params=values[start : start + _PARAMS_PER_BATCH])

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Write each metric at ``step``.

        Args:
            metrics: metric name to value.
            step: the global step the values belong to (None, as Lightning allows: 0).
        """
        if not on_rank_zero() or not metrics:
            return
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        named = with_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR)
        if texts := sorted(key for key, value in named.items() if isinstance(value, str)):
            warnings.warn(
                f"MLFlowLogger discards the metrics whose values are strings ({', '.join(texts)}),"
                " as Lightning's does: MLflow metrics are numbers. Log text with log_hyperparams.",
                stacklevel=2,
            )
        values = [
            Metric(key, value, now, step or 0)
            for key, value in named.items()
            if not isinstance(value, str)
        ]
        for start in range(0, len(values), _METRICS_PER_BATCH):
            self._log_batch(metrics=values[start : start + _METRICS_PER_BATCH])

    def _log_batch(self, **values: Any) -> None:
        client = self.experiment
        if self._synchronous is None:  # MLflow's default, and any MLflow version
            client.log_batch(self.run_id, **values)
            return
        if self._written is not None:
            names = {(kind, entry.key) for kind, entries in values.items() for entry in entries}
            if not names <= self._written:
                client.log_batch(self.run_id, synchronous=True, **values)
                self._written |= names
                return
        queued = client.log_batch(self.run_id, synchronous=self._synchronous, **values)
        if queued is not None:
            self._queued.append(queued)

    def _wait_for_queued(self) -> None:
        # Every queued write has reached the store (or raises its error) after this.
        queued, self._queued = self._queued, []
        for operations in queued:
            operations.wait()

    def after_save_checkpoint(self, checkpoint_callback: Any) -> None:
        """Note a saved checkpoint; with ``log_model="all"`` upload it now.

        Args:
            checkpoint_callback: the ``ModelCheckpoint`` that saved.
        """
        if not on_rank_zero() or not self._log_model:
            return
        saved = self._checkpoints.note(checkpoint_callback)
        if self._log_model == "all":
            self._upload(self._checkpoints.due(saved))

    def finalize(self, status: str) -> None:
        """Upload checkpoints (``log_model``) and set the run's status.

        ``success`` ends the run as FINISHED, ``failed`` as FAILED,
        ``interrupted`` as KILLED; a later fit, validate or test with the same
        logger writes to the same run again. With ``synchronous=False`` the queued
        writes are waited for first; if one failed, the run ends as FAILED and its
        error is raised.

        Args:
            status: "success", "failed" or "interrupted".
        """
        if not on_rank_zero() or self._client is None:
            return
        try:
            self._wait_for_queued()
        except Exception:
            self._client.set_terminated(self.run_id, status="FAILED")
            raise
        if self._log_model:
            folder = os.path.join(self.log_dir, "checkpoints")
            self._upload(self._checkpoints.due(folder=folder))
        self._client.set_terminated(self.run_id, status=_RUN_STATUS.get(status, "FINISHED"))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the checkpoint's MLflow run (a resumed fit logs to the same run).

        Args:
            state: what ``state_dict`` returned when the checkpoint was saved.
        """
        if self._client is None and self._run_id is None:
            self._run_id = str(state["version"])

    def _upload(self, paths: Any) -> None:
        client = self.experiment
        for path in paths:
            # The path as saved (last.ckpt may be a link): the artifact keeps its name.
            if os.path.isdir(path):  # a sharded checkpoint: the folder, under its name
                name = os.path.basename(path)
                client.log_artifacts(self.run_id, path, artifact_path=f"checkpoints/{name}")
            else:
                client.log_artifact(self.run_id, path, artifact_path="checkpoints")


def _rank_zero_only(what: str) -> RuntimeError:
    # Another rank's logger has no run: rank 0 starts it (and only rank 0 writes).
    return RuntimeError(
        f"MLflowLogger.{what} was read on a global rank other than 0, where no run is "
        "started (only rank 0 writes to MLflow); read it on rank 0, or broadcast it."
    )


def _file_store_path(uri: str) -> str | None:
    """The folder of a ``file:`` tracking URI, or None for any other store."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return unquote(parsed.path)

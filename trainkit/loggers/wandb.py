"""WandbLogger: hyperparameters, metrics and checkpoints in a Weights & Biases run.

wandb is optional (``pip install "trainkit[wandb]"``); it is imported when the
logger first writes, not at ``import trainkit``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from trainkit.loggers._tracking import (
    CheckpointFiles,
    flatten,
    not_on_rank_zero,
    on_rank_zero,
    require_package,
    with_prefix,
)
from trainkit.loggers.base import Logger, versioned_folder

if TYPE_CHECKING:
    from wandb.sdk.wandb_run import Run

_MODES = ("online", "offline", "disabled")
#: The history column that holds the Trainer's global step (Lightning's name).
STEP_METRIC = "trainer/global_step"


class WandbLogger(Logger):
    """Write hyperparameters (the run's config), metrics and checkpoints to a W&B run.

    The constructor takes Lightning's ``WandbLogger`` names; other keywords go
    to ``wandb.init``. ``offline=True`` (or ``mode="offline"``) keeps the run
    on disk under ``<save_dir>/wandb/offline-run-*`` without contacting any
    server; ``wandb sync`` uploads it later.

    Metrics are logged with their global step in the ``trainer/global_step``
    column, which W&B charts use as their x axis (as with Lightning): W&B's own
    step only grows, and a validation logged at the step training reached must
    not be dropped.

    The run starts on first use, on global rank 0 only (the Trainer calls
    loggers there; ``experiment`` raises on another rank). It stays open after a
    successful ``fit`` so that ``validate`` and ``test`` add to it, and ends
    when the process exits or you call ``logger.experiment.finish()``; a failed
    or interrupted run is finished at once, marked failed. Each WandbLogger has
    its own run, even with several in one process. A fit resumed from a
    checkpoint continues the run the checkpoint names.

    Args:
        name: the run's display name (W&B picks one when None).
        save_dir: the folder W&B writes its ``wandb/`` files under.
        version: the run's id, to continue an existing run (same as ``id``).
        offline: keep the run on disk only (``mode="offline"``).
        dir: another name for ``save_dir`` (wandb's own).
        id: the run's id, to continue an existing run.
        anonymous: log anonymously (``wandb.init(anonymous="allow")``).
        project: the W&B project (``trainkit_logs`` when None).
        log_model: upload checkpoints as a ``model`` artifact: True uploads the
            run's checkpoint files when fit ends successfully, "all" also each
            checkpoint when ``ModelCheckpoint`` reports it saved, False none.
        prefix: put ``<prefix>-`` in front of every metric name.
        checkpoint_name: the artifact's name (``model-<run id>`` when None).
        mode: "online", "offline" or "disabled" (wandb's ``mode``; None: W&B's default,
            which the ``WANDB_MODE`` environment variable sets).
        **kwargs: more arguments for ``wandb.init`` (``entity``, ``group``, ``tags``, ...).
    """

    def __init__(
        self,
        name: str | None = None,
        save_dir: str | os.PathLike[str] = ".",
        version: str | None = None,
        offline: bool = False,
        dir: str | os.PathLike[str] | None = None,
        id: str | None = None,
        anonymous: bool | None = None,
        project: str | None = None,
        log_model: bool | Literal["all"] = False,
        prefix: str = "",
        checkpoint_name: str | None = None,
        mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        require_package("wandb", "wandb", "WandbLogger")
        if mode is not None and mode not in _MODES:
            raise ValueError(f"WandbLogger(mode={mode!r}) must be one of {', '.join(_MODES)}")
        if offline and mode not in (None, "offline"):
            raise ValueError(
                f'WandbLogger(offline=True, mode="{mode}") contradict each other '
                '(pass one of them: offline=True or mode="offline")'
            )
        if log_model not in (True, False, "all"):
            raise ValueError(
                f'WandbLogger(log_model=...) must be True, False or "all", got {log_model!r}'
            )
        self._mode = "offline" if offline else mode
        self._save_dir = os.fspath(dir if dir is not None else save_dir)
        self._name = name
        self._project = project or "trainkit_logs"
        self._id = id or version
        self._anonymous = anonymous
        self._log_model = log_model
        self._prefix = prefix
        self._checkpoint_name = checkpoint_name
        self._init_kwargs = kwargs
        self._run: Run | None = None
        self._checkpoints = CheckpointFiles()

    # ----------------------------------------------------------------- identity
    @property
    def name(self) -> str:
        """The W&B project (Lightning's ``WandbLogger.name`` is the project too)."""
        return self._project

    @property
    def version(self) -> str:
        """The run's id; the first access starts the run (on rank 0)."""
        return str(self.experiment.id)

    @property
    def save_dir(self) -> str:
        """The folder W&B writes under."""
        return self._save_dir

    @property
    def experiment(self) -> Run:
        """The ``wandb`` run, e.g. for ``logger.experiment.log({"samples": wandb.Image(x)})``.

        Raises:
            RuntimeError: used on a global rank other than 0.
        """
        if self._run is not None:
            return self._run
        if not on_rank_zero():
            raise not_on_rank_zero("WandbLogger")
        import wandb

        os.makedirs(self._save_dir, exist_ok=True)
        options: dict[str, Any] = {
            "project": self._project,
            "name": self._name,
            "dir": self._save_dir,
            "id": self._id,
            "resume": "allow" if self._id else None,
            "mode": self._mode,
            "anonymous": "allow" if self._anonymous else None,
            # Every logger its own run, even beside another in this process.
            "reinit": "create_new",
            **self._init_kwargs,
        }
        run = wandb.init(**{key: value for key, value in options.items() if value is not None})
        run.define_metric(STEP_METRIC)
        run.define_metric("*", step_metric=STEP_METRIC, step_sync=True)
        self._id = run.id
        self._run = run
        return run

    # ------------------------------------------------------------------ writing
    def log_hyperparams(self, params: Mapping[str, Any]) -> None:
        """Write the hyperparameters to the run's config (nested names ``/``-joined).

        Args:
            params: hyperparameter name to value (nested mappings allowed).
        """
        if on_rank_zero():
            config: Any = self.experiment.config  # wandb's Config.update is untyped
            config.update(flatten(params), allow_val_change=True)

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Write the metrics as one history row, with ``trainer/global_step`` = ``step``.

        Args:
            metrics: metric name to value.
            step: the global step the values belong to.
        """
        if on_rank_zero() and metrics:
            self.experiment.log(
                {**with_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR), STEP_METRIC: step}
            )

    def after_save_checkpoint(self, checkpoint_callback: Any) -> None:
        """Note a saved checkpoint; with ``log_model="all"`` upload it now.

        Args:
            checkpoint_callback: the ``ModelCheckpoint`` that saved.
        """
        if not on_rank_zero() or not self._log_model:
            return
        saved = self._checkpoints.note(checkpoint_callback)
        if self._log_model == "all":
            self._upload(list(self._checkpoints.due(saved)))

    def finalize(self, status: str) -> None:
        """Upload checkpoints (``log_model``); end a failed or interrupted run.

        Args:
            status: "success", "failed" or "interrupted".
        """
        if not on_rank_zero() or self._run is None:
            return
        if status == "success":
            if self._log_model:
                folder = os.path.join(
                    versioned_folder(self.save_dir, self.name, self.version), "checkpoints"
                )
                self._upload(list(self._checkpoints.due(folder=folder)))
            return
        self._run.finish(exit_code=1)
        self._run = None  # a later use resumes the same run id

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the checkpoint's W&B run (a resumed fit logs to the same run).

        Args:
            state: what ``state_dict`` returned when the checkpoint was saved.
        """
        if self._run is None and self._id is None:
            self._id = str(state["version"])

    def _upload(self, paths: list[str]) -> None:
        if not paths:
            return
        import wandb

        run = self.experiment
        artifact = wandb.Artifact(self._checkpoint_name or f"model-{run.id}", type="model")
        for path in paths:
            real, name = os.path.realpath(path), os.path.basename(path)
            if os.path.isdir(real):  # a sharded checkpoint: the folder, under its name
                artifact.add_dir(real, name=name)
            else:
                artifact.add_file(real, name=name)
        run.log_artifact(artifact, aliases=["latest"])

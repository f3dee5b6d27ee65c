"""WandbLogger: hyperparameters, metrics and checkpoints in a Weights & Biases run.

wandb is optional (``pip install "trainkit[wandb]"``); it is imported when the
logger first writes, not at ``import trainkit``.
"""

from __future__ import annotations

import os
from argparse import Namespace
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from trainkit.loggers._tracking import (
    CheckpointFiles,
    flatten,
    on_rank_zero,
    other_ranks_experiment,
    prefixed,
    require_package,
    with_prefix,
)
from trainkit.loggers.base import Logger, hyperparameters, versioned_folder

if TYPE_CHECKING:
    import torch
    from wandb import Artifact
    from wandb.sdk.wandb_run import Run

_MODES = ("online", "offline", "disabled")
_FILE_POLICIES = ("mutable", "immutable")
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

    ``experiment=run`` logs to a run you started yourself with ``wandb.init``
    instead: the logger defines its ``trainer/global_step`` column on it when
    first used, its id is the logger's ``version``, and it is yours to finish
    (a failed fit leaves it open).

    Besides metrics, the logger writes media and tables as Lightning documents:
    ``log_image``, ``log_audio``, ``log_video`` (a list of items, with per-item
    lists such as ``caption=[...]``), ``log_table`` and ``log_text`` (a
    ``wandb.Table``), each as one history row, with ``trainer/global_step`` =
    ``step`` when a step is given. ``watch`` tracks a model's gradients;
    ``use_artifact`` and ``download_artifact`` read artifacts. Only global
    rank 0 writes to the run (the other ranks have none): there the media and
    table methods and ``watch`` do nothing, and ``use_artifact`` returns None.

    Example:
        >>> logger = WandbLogger(project="mnist", offline=True)  # doctest: +SKIP
        >>> logger.log_image("samples", [img1, img2], caption=["a", "b"])  # doctest: +SKIP
        >>> logger.log_table("preds", ["id", "label"], [[0, "cat"]], step=10)  # doctest: +SKIP
        >>> path = WandbLogger.download_artifact("team/mnist/model-1a2b:v3")  # doctest: +SKIP

    Args:
        name: the run's display name (W&B picks one when None).
        save_dir: the folder W&B writes its ``wandb/`` files under.
        version: the run's id, to continue an existing run (same as ``id``).
        offline: keep the run on disk only (``mode="offline"``).
        dir: another name for ``save_dir`` (wandb's own).
        id: the run's id, to continue an existing run.
        anonymous: log anonymously (``wandb.init(anonymous="allow")``).
        project: the W&B project (when None: ``$WANDB_PROJECT``, else ``trainkit_logs``).
        log_model: upload checkpoints as a ``model`` artifact: True uploads the
            run's checkpoint files when fit ends successfully, "all" also each
            checkpoint when ``ModelCheckpoint`` reports it saved, False none.
        experiment: a run started with ``wandb.init`` to log to instead of
            starting one (the arguments that describe a new run are then unused);
            its project is the logger's ``name`` when ``project`` is None.
        prefix: put ``<prefix>-`` in front of every metric, media and table name.
        checkpoint_name: the artifact's name (``model-<run id>`` when None).
        add_file_policy: how checkpoint files are added to the artifact (wandb's
            ``Artifact.add_file(policy=...)``): "mutable" copies each file to a
            staging folder first, so that a file rewritten during the upload is
            uploaded as it was; "immutable" uploads the file in place, without
            the copy (faster, and no extra disk space), so it must not change
            until the upload ends.
        mode: "online", "offline" or "disabled" (wandb's ``mode``; None: W&B's default,
            which the ``WANDB_MODE`` environment variable sets).
        **kwargs: more arguments for ``wandb.init`` (``entity``, ``group``, ``tags``, ...).

    Raises:
        ModuleNotFoundError: wandb is not installed.
        ValueError: ``mode``, ``log_model`` or ``add_file_policy`` is not one of
            its values, or ``offline=True`` contradicts ``mode``.
    """

    #: The project when neither ``project`` nor ``WANDB_PROJECT`` names one.
    _default_project = "trainkit_logs"

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
        experiment: Run | None = None,
        prefix: str = "",
        checkpoint_name: str | None = None,
        add_file_policy: Literal["mutable", "immutable"] = "mutable",
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
        if add_file_policy not in _FILE_POLICIES:
            raise ValueError(
                f'WandbLogger(add_file_policy={add_file_policy!r}) must be "mutable" or "immutable"'
            )
        self._mode = "offline" if offline else mode
        self._save_dir = os.fspath(dir if dir is not None else save_dir)
        self._name = name
        given_project = getattr(experiment, "project", None) if experiment is not None else None
        self._project = (
            project or given_project or os.environ.get("WANDB_PROJECT") or self._default_project
        )
        self._id = str(experiment.id) if experiment is not None else id or version
        self._anonymous = anonymous
        self._log_model = log_model
        self._prefix = prefix
        self._checkpoint_name = checkpoint_name
        self._add_file_policy: Literal["mutable", "immutable"] = add_file_policy
        self._init_kwargs = kwargs
        self._given_run = experiment
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

        On a global rank other than 0: a stand-in that takes any call and does nothing,
        as Lightning's gives (a run passed as ``experiment`` is returned on any rank).
        """
        if self._run is not None:
            return self._run
        if self._given_run is not None:  # the caller's run: set up once, on first use
            self._run = self._given_run
            self._define_step(self._run)
            return self._run
        if not on_rank_zero():
            return other_ranks_experiment()  # type: ignore[no-any-return]
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
        self._define_step(run)
        self._id = run.id
        self._run = run
        return run

    @staticmethod
    def _define_step(run: Run) -> None:
        # Charts plot every column against the Trainer's step, not W&B's own (a run
        # without define_metric, a test's stand-in or an old wandb's, plots by its own).
        define = getattr(run, "define_metric", None)
        if define is None:
            return
        define(STEP_METRIC)
        define("*", step_metric=STEP_METRIC, step_sync=True)

    # ------------------------------------------------------------------ writing
    def log_hyperparams(self, params: Mapping[str, Any] | Namespace) -> None:
        """Write the hyperparameters to the run's config (nested names ``/``-joined).

        Args:
            params: hyperparameter name to value (nested mappings allowed), or an
                ``argparse.Namespace``.
        """
        if on_rank_zero():
            config: Any = self.experiment.config  # wandb's Config.update is untyped
            config.update(flatten(hyperparameters(params)), allow_val_change=True)

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Write the metrics as one history row, with ``trainer/global_step`` = ``step``.

        Args:
            metrics: metric name to value.
            step: the global step the values belong to (None, as Lightning allows: the
                row has no ``trainer/global_step``).
        """
        if on_rank_zero() and metrics:
            row = dict(with_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR))
            if step is not None:
                row[STEP_METRIC] = step
            self.experiment.log(row)

    def log_table(
        self,
        key: str,
        columns: list[str] | None = None,
        data: list[list[Any]] | None = None,
        dataframe: Any = None,
        step: int | None = None,
    ) -> None:
        """Write a ``wandb.Table`` of any cell type (text, ``wandb.Image``, numbers, ...).

        Give the table as ``columns`` and ``data`` (a list of rows), or as a
        pandas ``dataframe``.

        Args:
            key: the table's name in the run (after the logger's ``prefix``).
            columns: the column names.
            data: the rows, each a list with one value per column.
            dataframe: a pandas DataFrame instead of ``columns`` and ``data``.
            step: the global step, written as ``trainer/global_step`` (none when None).

        Example:
            >>> logger.log_table(key="preds", columns=["x", "y"], data=[[1, "a"]])  # doctest: +SKIP
        """
        if not on_rank_zero():
            return
        import wandb

        names: Any = columns  # wandb types them list[str | int]
        self._log_row({key: wandb.Table(columns=names, data=data, dataframe=dataframe)}, step)

    def log_text(
        self,
        key: str,
        columns: list[str] | None = None,
        data: list[list[str]] | None = None,
        dataframe: Any = None,
        step: int | None = None,
    ) -> None:
        """Write text as a ``wandb.Table`` (as ``log_table`` does).

        Args:
            key: the table's name in the run (after the logger's ``prefix``).
            columns: the column names.
            data: the rows of text, each a list with one string per column.
            dataframe: a pandas DataFrame instead of ``columns`` and ``data``.
            step: the global step, written as ``trainer/global_step`` (none when None).

        Example:
            >>> logger.log_text(key="samples", columns=["input", "output"],
            ...                 data=[["2+2", "4"]])  # doctest: +SKIP
        """
        self.log_table(key, columns=columns, data=data, dataframe=dataframe, step=step)

    def log_image(
        self, key: str, images: list[Any], step: int | None = None, **kwargs: Any
    ) -> None:
        """Write images (tensors, numpy arrays, PIL images or file paths) as one history entry.

        Args:
            key: the images' name in the run (after the logger's ``prefix``).
            images: the images, each one ``wandb.Image``.
            step: the global step, written as ``trainer/global_step`` (none when None).
            **kwargs: ``wandb.Image`` arguments, each a list with one value per
                image (``caption=[...]``, ``masks=[...]``, ``boxes=[...]``).

        Raises:
            TypeError: ``images`` is not a list.
            ValueError: a keyword's list does not have one value per image.

        Example:
            >>> logger.log_image(key="samples", images=[img1, img2],
            ...                  caption=["tree", "person"], step=5)  # doctest: +SKIP
        """
        per_item = _per_item("log_image", key, "images", images, kwargs)
        if not on_rank_zero():
            return
        import wandb

        self._log_row({key: [wandb.Image(image, **extra) for image, extra in per_item]}, step)

    def log_audio(
        self, key: str, audios: list[Any], step: int | None = None, **kwargs: Any
    ) -> None:
        """Write audio clips (numpy arrays or file paths) as one history entry.

        Args:
            key: the clips' name in the run (after the logger's ``prefix``).
            audios: the clips, each one ``wandb.Audio``.
            step: the global step, written as ``trainer/global_step`` (none when None).
            **kwargs: ``wandb.Audio`` arguments, each a list with one value per
                clip (``caption=[...]``, ``sample_rate=[...]``, which an array needs).

        Raises:
            TypeError: ``audios`` is not a list.
            ValueError: a keyword's list does not have one value per clip.
        """
        per_item = _per_item("log_audio", key, "audios", audios, kwargs)
        if not on_rank_zero():
            return
        import wandb

        self._log_row({key: [wandb.Audio(audio, **extra) for audio, extra in per_item]}, step)

    def log_video(
        self, key: str, videos: list[Any], step: int | None = None, **kwargs: Any
    ) -> None:
        """Write videos (numpy arrays or file paths) as one history entry.

        Args:
            key: the videos' name in the run (after the logger's ``prefix``).
            videos: the videos, each one ``wandb.Video``.
            step: the global step, written as ``trainer/global_step`` (none when None).
            **kwargs: ``wandb.Video`` arguments, each a list with one value per
                video (``caption=[...]``, ``fps=[...]``, ``format=[...]``).

        Raises:
            TypeError: ``videos`` is not a list.
            ValueError: a keyword's list does not have one value per video.
        """
        per_item = _per_item("log_video", key, "videos", videos, kwargs)
        if not on_rank_zero():
            return
        import wandb

        self._log_row({key: [wandb.Video(video, **extra) for video, extra in per_item]}, step)

    def watch(
        self,
        model: torch.nn.Module,
        log: str | None = "gradients",
        log_freq: int = 100,
        log_graph: bool = True,
    ) -> None:
        """Track the model's gradients, parameters and graph in the run (wandb's ``watch``).

        The hooks stay until ``logger.experiment.unwatch(model)``.

        Args:
            model: the model to track.
            log: "gradients", "parameters", "all", or None for neither.
            log_freq: log them every this many batches.
            log_graph: also log the model's graph.
        """
        if on_rank_zero():
            run: Any = self.experiment  # wandb types `log` as a Literal
            run.watch(model, log=log, log_freq=log_freq, log_graph=log_graph)

    def use_artifact(self, artifact: str, artifact_type: str | None = None) -> Artifact | None:
        """Record that the run uses an artifact, and return it (``.download()`` fetches it).

        Args:
            artifact: the artifact's name, ``[entity/project/]name:version_or_alias``.
            artifact_type: the artifact's type (``model``, ``dataset``, ...); any when None.

        Returns:
            The artifact on global rank 0; None on the other ranks, which have no run.
        """
        if not on_rank_zero():
            return None
        return self.experiment.use_artifact(artifact, type=artifact_type)

    @staticmethod
    def download_artifact(
        artifact: str,
        save_dir: str | os.PathLike[str] | None = None,
        artifact_type: str | None = None,
        use_artifact: bool = True,
    ) -> str:
        """Download an artifact and return the folder it is in.

        With ``use_artifact`` and a current ``wandb.run`` (a run started with
        ``wandb.init`` in this process), the use is recorded on that run; else
        the artifact is read through ``wandb.Api``, with no run. To record the
        use on a logger's own run, call ``logger.use_artifact(name).download()``.

        Args:
            artifact: the artifact's name, ``[entity/project/]name:version_or_alias``.
            save_dir: the folder to download into (wandb's ``./artifacts/...`` when None).
            artifact_type: the artifact's type (``model``, ``dataset``, ...); any when None.
            use_artifact: record the use on ``wandb.run``, when there is one.

        Returns:
            The folder the artifact's files were downloaded to.

        Example:
            >>> path = WandbLogger.download_artifact("team/mnist/model-1a2b:best")  # doctest: +SKIP
        """
        import wandb

        if use_artifact and wandb.run is not None:
            found = wandb.run.use_artifact(artifact, type=artifact_type)
        else:
            found = wandb.Api().artifact(artifact, type=artifact_type)
        return str(found.download(root=None if save_dir is None else os.fspath(save_dir)))

    def _log_row(self, row: Mapping[str, Any], step: int | None) -> None:
        """One history row of ``row`` (names prefixed), with the step column when given."""
        entry = prefixed(row, self._prefix, self.LOGGER_JOIN_CHAR)
        if step is not None:
            entry[STEP_METRIC] = step
        self.experiment.log(entry)

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

        A run passed as ``experiment`` is left open: its owner finishes it.

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
        if self._run is self._given_run:
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
        # As Lightning's: one version of the model artifact per checkpoint, oldest first,
        # the file named model.ckpt, aliased "latest" (and "best" for the best one), with
        # its score, its file name and the ModelCheckpoint's settings as metadata.
        if not paths:
            return
        import wandb

        run, files = self.experiment, self._checkpoints
        uploaded: set[str] = set()
        for path in sorted(paths, key=_modified):
            real = os.path.realpath(path)  # last.ckpt may link to a file uploaded already
            if real in uploaded:
                continue
            uploaded.add(real)
            artifact = wandb.Artifact(  # by keyword, as Lightning's (a test's mock checks)
                name=self._checkpoint_name or f"model-{run.id}",
                type="model",
                metadata=files.metadata(path),
            )
            if os.path.isdir(real):  # a sharded checkpoint: the whole folder
                artifact.add_dir(real, name="model.ckpt", policy=self._add_file_policy)
            else:
                artifact.add_file(real, name="model.ckpt", policy=self._add_file_policy)
            aliases = ["latest", "best"] if files.is_best(path) else ["latest"]
            run.log_artifact(artifact, aliases=aliases)


def _modified(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0


def _per_item(
    method: str, key: str, name: str, items: list[Any], kwargs: Mapping[str, Any]
) -> list[tuple[Any, dict[str, Any]]]:
    """Pair each media item with its own value of each keyword (``caption=[...]``).

    Args:
        method: the logger method, for messages.
        key: the media's name, for messages.
        name: the items' argument name (``images``).
        items: the media items.
        kwargs: keyword to a list with one value per item.

    Raises:
        TypeError: ``items`` is not a list (or tuple).
        ValueError: a keyword's value is not a list of ``len(items)`` values.
    """
    if not isinstance(items, (list, tuple)):
        raise TypeError(
            f"WandbLogger.{method}(key={key!r}): {name} must be a list, got {type(items).__name__}"
        )
    for keyword, values in kwargs.items():
        if not isinstance(values, (list, tuple)) or len(values) != len(items):
            got = f"{len(values)} values" if isinstance(values, (list, tuple)) else repr(values)
            raise ValueError(
                f"WandbLogger.{method}(key={key!r}): {keyword}= needs a list with one value "
                f"per item of {name} ({len(items)}), got {got}"
            )
    return [
        (item, {keyword: values[index] for keyword, values in kwargs.items()})
        for index, item in enumerate(items)
    ]

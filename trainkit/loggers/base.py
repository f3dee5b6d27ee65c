"""The Logger interface: where scalar metrics and hyperparameters are written.

The Trainer calls loggers from global rank 0 only; a logger never needs to ask
which rank it is on. Values arrive as plain Python floats: the Trainer reads
device tensors once, when a logger is due to write, never per step.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from argparse import Namespace
from collections.abc import Mapping
from typing import Any

from trainkit.utilities.io import local_path


def versioned_folder(save_dir: str, name: str, version: int | str) -> str:
    """``<save_dir>/<name>/version_<N>`` (a string version is the folder's name).

    Args:
        save_dir: the root folder.
        name: the experiment's name.
        version: the run's version.

    Example:
        >>> versioned_folder("runs", "logs", 3) == os.path.join("runs", "logs", "version_3")
        True
    """
    folder = version if isinstance(version, str) else f"version_{version}"
    return os.path.join(save_dir, str(name), folder)  # (None: "None", as in Lightning)


class BaseLogger(ABC):
    """What every logger implements: where metrics and hyperparameters go.

    :class:`Logger`, the class to subclass, adds what the Trainer's checkpointing
    reads (``save_dir``, ``after_save_checkpoint``). Everything else is defined here,
    so that a logger class built from ``Logger`` and an implementation of this
    interface (``class MyLogger(Logger, MyMetricsLogger)``) takes the
    implementation's methods, as it would with Lightning's two logger classes.
    """

    #: What a ``prefix`` is joined to metric names with (Lightning's attribute).
    LOGGER_JOIN_CHAR = "-"

    @property
    def group_separator(self) -> str:
        """The character that groups metric names in a logger's UI ("/", as in Lightning)."""
        return "/"

    @property
    @abstractmethod
    def name(self) -> str:
        """The experiment name: the folder under ``save_dir`` that holds the versions."""

    @property
    @abstractmethod
    def version(self) -> int | str:
        """The run's version (``N`` of ``version_N``), assigned on first use."""

    @property
    def root_dir(self) -> str | None:
        """The folder that holds every version of this experiment (None, the default:
        the logger keeps no local folder of versions)."""
        return None

    @property
    def log_dir(self) -> str | None:
        """The folder this run writes to: ``<save_dir>/<name>/version_<version>``.

        None for a logger without a ``save_dir``.
        """
        save_dir = getattr(self, "save_dir", None)
        return None if save_dir is None else versioned_folder(save_dir, self.name, self.version)

    @abstractmethod
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Record scalar metrics at a global step.

        Args:
            metrics: metric name to value.
            step: the global step the values belong to (the Trainer always passes it;
                code of yours may leave it out, as Lightning's loggers allow).
        """

    @abstractmethod
    def log_hyperparams(self, params: Mapping[str, Any] | Namespace) -> None:
        """Record the run's hyperparameters.

        Args:
            params: hyperparameter name to value (nested mappings allowed), or an
                ``argparse.Namespace`` (its attributes), as Lightning's loggers take.
        """

    def log_graph(self, model: Any, input_array: Any = None) -> None:
        """Record the model's computational graph; the default does nothing.

        Called on global rank 0 at the start of every ``fit`` (after ``on_fit_start``),
        ``validate``, ``test`` and ``predict``, right after :meth:`log_hyperparams`
        (with ``Trainer(enable_autolog_hparams=True)``, the default), as Lightning calls it.

        Args:
            model: the Module being trained.
            input_array: an input for the model (None: ``model.example_input_array``).
        """

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of this logger: its version."""
        return {"version": self.version}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue writing to the saved run (the default logger cannot, and ignores it).

        Args:
            state: what :meth:`state_dict` returned.
        """

    def save(self) -> None:
        """Flush buffered records to disk."""

    def finalize(self, status: str) -> None:
        """Flush and close at the end of a run.

        Args:
            status: "success", "failed" or "interrupted".
        """
        self.save()


class Logger(BaseLogger):
    """Base class for experiment loggers: subclass it to send metrics anywhere.

    A logger implements two properties (``name``, ``version``) and two methods
    (``log_metrics``, ``log_hyperparams``); the others have defaults (a logger
    that writes files also gives its ``save_dir``). What the Trainer promises a logger:

    - it is called from global rank 0 only, so a logger never checks the rank;
    - ``log_hyperparams`` is called once when ``fit`` starts, if the Module
      called ``save_hyperparameters()``;
    - ``log_metrics`` receives plain floats (and ``epoch`` as an int) with the
      global step, every ``log_every_n_steps`` optimizer steps and at the end
      of each epoch and evaluation (a value the Module logged as ``"step"`` is
      the step instead, sent without ``epoch``, as in Lightning);
    - ``finalize`` is called when each ``fit``, ``validate``, ``test`` or
      ``predict`` ends, also after a failure, and the same logger may be used
      again afterwards (reopen what ``finalize`` closed);
    - ``state_dict`` is saved in checkpoints and ``load_state_dict`` called
      before ``fit`` resumes, so a resumed run can continue the same record;
    - ``log_dir`` (``<save_dir>/<name>/<version>``) is where the first
      logger's run keeps its checkpoints (``<log_dir>/checkpoints``; for a
      bundled logger ``<run_dir>/checkpoints``, as ``TensorBoardLogger(sub_dir=...)``
      puts its ``log_dir`` inside ``run_dir``).

    Example (a logger that keeps metrics in a list):
        >>> class ListLogger(Logger):
        ...     def __init__(self) -> None:
        ...         self.rows = []
        ...     name = "memory"
        ...     version = 0
        ...     save_dir = "."
        ...     def log_metrics(self, metrics, step):
        ...         self.rows.append((step, dict(metrics)))
        ...     def log_hyperparams(self, params):
        ...         pass
        >>> logger = ListLogger()
        >>> logger.log_metrics({"loss": 0.5}, step=10)
        >>> logger.rows
        [(10, {'loss': 0.5})]
    """

    @property
    def save_dir(self) -> str | None:
        """The root folder passed by the user (None, the default: the logger writes no files)."""
        return None

    def after_save_checkpoint(self, checkpoint_callback: Any) -> None:
        """Called after ``checkpoint_callback`` (a ``ModelCheckpoint``) saved a file.

        Lightning's hook of the same name; trackers use it to upload checkpoints.
        The default does nothing.

        Args:
            checkpoint_callback: the callback that saved; its ``dirpath``,
                ``best_model_path``, ``last_model_path`` and ``best_k_models``
                say which files exist.
        """


class FolderLogger(Logger):
    """A logger that writes to ``<save_dir>/<name>/version_<N>/`` (the bundled ones do).

    The version folder is claimed on first use, not at construction, so a
    Trainer that never logs leaves no empty folders; ``None`` claims the next
    free ``version_N`` without ever sharing or overwriting an existing folder,
    even with concurrent processes; an explicit version is reused if it exists.

    Args:
        save_dir: root folder for all experiments.
        name: experiment name, the folder under ``save_dir`` (None or "": the
            versions go straight into ``save_dir``, as in Lightning).
        version: the version to write to (``None``: the next free one).
    """

    def __init__(
        self,
        save_dir: str | os.PathLike[str],
        name: str | None = "logs",
        version: int | str | None = None,
    ) -> None:
        self._save_dir = local_path(
            os.fspath(save_dir),
            f"{type(self).__name__}(save_dir=...)",
            ", or log with MLflowLogger or WandbLogger, which upload",
        )
        self._name = "" if name is None else name
        self._requested_version = version
        self._version: int | str | None = None

    @property
    def name(self) -> str:
        """The experiment name: the folder under ``save_dir`` that holds the versions."""
        return self._name

    @property
    def save_dir(self) -> str:
        """The root folder passed by the user."""
        return self._save_dir

    @property
    def log_dir(self) -> str:
        """The folder this run writes to: ``<save_dir>/<name>/version_<version>``."""
        return self.run_dir

    @property
    def root_dir(self) -> str:
        """The folder of all this experiment's versions: ``<save_dir>/<name>``
        (``save_dir`` itself without a name)."""
        return os.path.join(self._save_dir, self._name) if self._name else self._save_dir

    @property
    def run_dir(self) -> str:
        """The run's own folder, ``<save_dir>/<name>/version_<version>``; it holds the
        run's checkpoints (and its logs, unless a logger puts them in a sub-folder)."""
        return versioned_folder(self._save_dir, self.name, self.version)

    @property
    def version(self) -> int | str:
        """The run's version; the first access claims and creates its folder."""
        if self._version is None:
            from trainkit.loggers._files import _claim_version_dir

            root = os.path.join(self._save_dir, self._name)
            self._version, _ = _claim_version_dir(root, self._requested_version)
        return self._version

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Keep writing to the checkpoint's version folder (a resumed run's logs continue).

        Args:
            state: what ``state_dict`` returned when the checkpoint was saved.
        """
        if self._version is None:
            self._requested_version = state["version"]


def hyperparameters(params: Mapping[str, Any] | Namespace) -> Mapping[str, Any]:
    """``params`` as a mapping: an ``argparse.Namespace`` becomes its attributes.

    Args:
        params: what ``log_hyperparams`` was given.

    Example:
        >>> hyperparameters(Namespace(lr=0.1))
        {'lr': 0.1}
    """
    return vars(params) if isinstance(params, Namespace) else params

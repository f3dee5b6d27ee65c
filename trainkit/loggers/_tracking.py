"""Helpers shared by the experiment-tracker loggers (MLflow, Weights & Biases).

Kept free of the trackers' packages: they are optional and imported only by
the logger that uses them, when it first writes.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from trainkit.checkpoint.sharded import META_FILE
from trainkit.utilities.rank_zero import global_rank

T = TypeVar("T")


def require_package(module: str, extra: str, logger: str) -> None:
    """Fail with the install command when an optional package is missing.

    Only looks the package up (cheap); importing it is left to first use.

    Args:
        module: the import name (``mlflow``).
        extra: trainkit's extra that installs it (``mlflow``).
        logger: the logger's class name, for the message.

    Raises:
        ModuleNotFoundError: the package is not installed.
    """
    if sys.modules.get(module) is not None:
        return  # imported already (or a test's stand-in, which may have no spec)
    if importlib.util.find_spec(module) is None:
        raise ModuleNotFoundError(
            f"{logger} needs the '{module}' package, which is not installed "
            f'(install it with: pip install "trainkit[{extra}]")',
            name=module,
        )


def on_rank_zero() -> bool:
    """Whether this process is global rank 0, the one that writes to trackers."""
    return global_rank() == 0


def other_ranks_experiment() -> Any:
    """What ``logger.experiment`` is on a rank other than 0, as in Lightning: a stand-in
    that takes any call and does nothing (only rank 0 writes to the tracker), so code that
    logs images or tables from every rank runs unchanged."""
    from trainkit.loggers.dummy import DummyExperiment  # here: dummy imports the base

    return DummyExperiment()


def flatten(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as ``a/b`` keys (Lightning's form), values kept as they are.

    Args:
        params: hyperparameters, possibly nested.
        prefix: the key of the mapping ``params`` sits under.

    Example:
        >>> flatten({"optim": {"lr": 0.1}, "layers": 3})
        {'optim/lr': 0.1, 'layers': 3}
    """
    flat: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, Mapping):
            flat.update(flatten(value, prefix=f"{prefix}{key}/"))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def prefixed(row: Mapping[str, T], prefix: str, join: str) -> dict[str, T]:
    """The names of ``row`` with ``<prefix><join>`` in front, the values as they are.

    Args:
        row: name to value (a metric, an image, a table...).
        prefix: the logger's prefix; empty for none.
        join: what joins them, the logger's ``LOGGER_JOIN_CHAR``.

    Example:
        >>> prefixed({"loss": 0.5}, "train", "-")
        {'train-loss': 0.5}
    """
    if not prefix:
        return dict(row)
    return {f"{prefix}{join}{name}": value for name, value in row.items()}


def with_prefix(metrics: Mapping[str, float], prefix: str, join: str) -> dict[str, float]:
    """:func:`prefixed`, with the values as numbers (what the loggers write as metrics).

    Tensors and other numbers become floats; an int stays an int (the ``epoch`` the
    Trainer writes beside the values: ``metrics.csv`` has ``0``, not ``0.0``, there),
    and so does a string (``metrics.csv`` writes it as it is, as Lightning's does; a
    logger that takes only numbers refuses it).

    Args:
        metrics: metric name to value.
        prefix: the logger's prefix; empty for none.
        join: what joins them, the logger's ``LOGGER_JOIN_CHAR``.

    Example:
        >>> with_prefix({"loss": 0.5, "epoch": 2, "note": "ok"}, "train", "-")
        {'train-loss': 0.5, 'train-epoch': 2, 'train-note': 'ok'}
    """
    values = {
        name: value if type(value) in (int, str) else float(value)
        for name, value in metrics.items()
    }
    return prefixed(values, prefix, join) if prefix else values


#: The ModelCheckpoint settings an uploaded checkpoint's metadata records (Lightning's).
_CHECKPOINT_SETTINGS = (
    "monitor",
    "mode",
    "save_last",
    "save_top_k",
    "save_weights_only",
    "_every_n_train_steps",
)


class CheckpointFiles:
    """The checkpoint files a tracker logger uploads, each once per version on disk.

    Files come from ``ModelCheckpoint`` (through ``after_save_checkpoint``) and
    from the run's own checkpoint folder; a file is offered again only when it
    changed (``last.ckpt`` is rewritten in place). A sharded checkpoint (a
    folder, see ``trainkit.checkpoint.sharded``) counts as one file.
    """

    def __init__(self) -> None:
        self._folders: set[str] = set()
        self._uploaded: dict[str, tuple[int, int]] = {}
        self._best: str | None = None  # the real path of the best file, as last reported
        self._scores: dict[str, Any] = {}  # real path: score, as last reported
        self._settings: dict[str, Any] = {}  # the reporting callback's, by its class name

    def note(self, checkpoint_callback: Any) -> list[str]:
        """Remember the folder of a ``ModelCheckpoint`` and return its saved files.

        Args:
            checkpoint_callback: the callback that saved (its ``dirpath``,
                ``best_model_path``, ``last_model_path``, ``best_k_models`` and
                settings are read).
        """
        best = getattr(checkpoint_callback, "best_model_path", "") or ""
        scores = dict(getattr(checkpoint_callback, "best_k_models", {}) or {})
        paths = [best, getattr(checkpoint_callback, "last_model_path", "") or "", *scores]
        folder = getattr(checkpoint_callback, "dirpath", None)
        if folder:
            self._folders.add(os.fspath(folder))
        self._best = os.path.realpath(best) if best else None
        self._scores = {os.path.realpath(path): score for path, score in scores.items()}
        self._settings = {
            type(checkpoint_callback).__name__: {
                name: getattr(checkpoint_callback, name)
                for name in _CHECKPOINT_SETTINGS
                if hasattr(checkpoint_callback, name)
            }
        }
        return sorted({os.fspath(path) for path in paths if path})

    def is_best(self, path: str) -> bool:
        """Whether ``path`` is (or links to) the best file the last report named."""
        return self._best is not None and os.path.realpath(path) == self._best

    def metadata(self, path: str) -> dict[str, Any]:
        """What an uploaded file records, as Lightning's loggers do: its score (None when
        not among the kept best), its file name, and the reporting ``ModelCheckpoint``'s
        settings (none before one reported a save)."""
        score = self._scores.get(os.path.realpath(path))
        if score is not None and hasattr(score, "item"):  # a tensor
            score = score.item()
        return {"score": score, "original_filename": os.path.basename(path), **self._settings}

    def due(self, paths: list[str] | None = None, folder: str | None = None) -> Iterator[str]:
        """Yield the files not yet uploaded in their current form, and mark them uploaded.

        Args:
            paths: files to offer; None for every ``*.ckpt`` in the noted folders
                and ``folder``.
            folder: one more folder to look in (the run's ``checkpoints``).
        """
        if paths is None:
            folders = self._folders | ({folder} if folder else set())
            paths = sorted(p for f in folders for p in glob.glob(os.path.join(f, "*.ckpt")))
        for path in paths:
            real = os.path.realpath(path)  # last.ckpt may be a link
            if os.path.isdir(real):  # a sharded checkpoint: its index is written last
                real = os.path.join(real, META_FILE)
            try:
                stat = os.stat(real)
            except FileNotFoundError:  # removed since (a top-k file replaced)
                continue
            key = (stat.st_size, stat.st_mtime_ns)
            if self._uploaded.get(path) != key:
                self._uploaded[path] = key
                yield path

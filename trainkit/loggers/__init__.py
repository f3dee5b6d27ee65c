"""Loggers: where the Trainer writes scalar metrics and hyperparameters.

Importing this package is cheap: tensorboard, yaml, mlflow and wandb are
imported only when a logger first writes. MLflow and Weights & Biases are
optional: ``pip install "trainkit[mlflow]"`` / ``"trainkit[wandb]"``.
"""

import os
from collections.abc import Iterable
from typing import Any

from trainkit.core.hyperparameters import CLASS_PATH_KEY
from trainkit.loggers.base import BaseLogger, FolderLogger, Logger, versioned_folder
from trainkit.loggers.csv import CSVLogger
from trainkit.loggers.dummy import DummyLogger
from trainkit.loggers.mlflow import MLflowLogger
from trainkit.loggers.tensorboard import TensorBoardLogger
from trainkit.loggers.wandb import WandbLogger

__all__ = [
    "BaseLogger",
    "CSVLogger",
    "DummyLogger",
    "Logger",
    "MLflowLogger",
    "TensorBoardLogger",
    "WandbLogger",
    "build_loggers",
    "run_folder",
    "run_hyperparameters",
]


def build_loggers(
    logger: bool | Logger | list[Logger] | None,
    root_dir: str,
    dry_run: bool = False,
    default: tuple[type[TensorBoardLogger], str] = (TensorBoardLogger, "logs"),
) -> list[Logger]:
    """The loggers ``Trainer(logger=...)`` asks for.

    Args:
        logger: True or None (the default, as in Lightning) for a TensorBoard logger
            under ``root_dir``, False for none, or a Logger / list of Loggers.
        root_dir: the Trainer's ``default_root_dir``.
        dry_run: a fast dev run: any loggers become one :class:`DummyLogger`, which
            writes nothing and accepts every call (as in Lightning).
        default: the default logger's class and its folder under ``root_dir``.
    """
    if logger is False or logger == []:
        return []
    if dry_run:
        return [DummyLogger()]
    if logger is True or logger is None:
        kind, name = default
        return [kind(root_dir, name=name)]
    # Not list() of any object: one with __getitem__ but no __iter__ never ends it.
    iterable = isinstance(logger, Iterable) and not isinstance(logger, (str, bytes))
    loggers: list[Any] = list(logger) if iterable and not isinstance(logger, Logger) else [logger]
    for item in loggers:
        # As Lightning, an object with a logger's methods is one too (a test's Mock).
        if not isinstance(item, Logger) and not callable(getattr(item, "log_metrics", None)):
            raise TypeError(
                f"logger must be a trainkit Logger, got {type(item).__name__}. Pass one of "
                "trainkit.loggers (or their trainkit.lightning.loggers names), a subclass of "
                "trainkit.loggers.Logger (or an object with its methods), a list of them, True "
                "for the default or False."
            )
    return loggers


def run_folder(loggers: list[Logger], default_root_dir: str) -> str:
    """The folder that holds this run's own files (its config, checkpoints, predictions).

    The first logger's versioned folder, so that runs never share one: a
    TensorBoard or CSV logger's ``run_dir`` (without its ``sub_dir``), another
    trainkit logger's ``log_dir`` (MLflow's ``<save_dir>/<experiment id>/<run id>``),
    and for a logger class of one's own ``<save_dir>/<name>/<version>`` as
    Lightning's ModelCheckpoint makes it (``default_root_dir`` for a logger without a
    ``save_dir``; the name as ``str``, so a logger named None has a ``None`` folder,
    as there); ``default_root_dir`` without loggers.

    Args:
        loggers: the Trainer's loggers.
        default_root_dir: the Trainer's ``default_root_dir``.
    """
    if not loggers:
        return default_root_dir
    first = loggers[0]
    if isinstance(first, FolderLogger):
        return first.run_dir  # not a sub-folder its logs may go to
    folder = first.log_dir if _trainkits_log_dir(first) else None
    if folder is not None:  # trainkit's loggers know their run's folder (MLflow's: by id)
        return folder
    save_dir = first.save_dir
    root = default_root_dir if save_dir is None else os.fspath(save_dir)
    return versioned_folder(root, first.name, first.version)  # (the name as str there)


def _trainkits_log_dir(logger: Logger) -> bool:
    # Whether trainkit defines the logger's log_dir (a class of one's own that defines
    # it gets Lightning's folder instead, as its ModelCheckpoint would use).
    owner = next((c for c in type(logger).__mro__ if "log_dir" in vars(c)), None)
    return owner is not None and owner.__module__.startswith("trainkit.")


def run_hyperparameters(*owners: Any) -> dict[str, Any] | None:
    """The hyperparameters fit writes to the loggers: the Module's and the DataModule's.

    As Lightning merges them: each owner (a Module, a DataModule or None) counts
    when it recorded hyperparameters and did not pass ``logger=False``. None when
    none counts. ``_class_path``, which LightningCLI records for a class given by its
    path (the model's differs from the data's), is left out, as Lightning leaves it.

    Args:
        *owners: the Module, then the DataModule (or None).

    Raises:
        ValueError: the two give one name different values.
    """
    counted = [owner for owner in owners if owner is not None and owner.logs_hyperparams]
    if not counted:
        return None
    merged: dict[str, Any] = {}
    for owner in counted:
        for key, value in owner.hparams_initial.items():  # as given, not as changed since
            if key == CLASS_PATH_KEY:
                continue
            if key in merged and not _same(merged[key], value):
                raise ValueError(
                    f"The Module and the DataModule both save the hyperparameter {key!r}, with "
                    f"different values ({merged[key]!r} and {value!r}), and the loggers get "
                    "one set of hyperparameters. Rename one, or pass logger=False to one "
                    "save_hyperparameters() call."
                )
            merged[key] = value
    return merged


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except (RuntimeError, TypeError, ValueError):  # a tensor of several values, say
        return a is b

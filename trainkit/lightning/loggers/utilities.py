"""Lightning's ``lightning.pytorch.loggers.utilities``: the private helpers logger libraries
import, served by trainkit."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["_scan_checkpoints", "_version"]


def _scan_checkpoints(
    checkpoint_callback: Any, logged_model_time: dict[str, float]
) -> list[tuple[float, str, Any, str]]:
    """The files a ``ModelCheckpoint`` holds that a logger has not uploaded as they are now.

    Each file as ``(modification time, path, score, tag)``, oldest first: the last
    file ("latest", with ``current_score``), the best ("best", with
    ``best_model_score``) and the top k ("best_k", each with its score). A file is
    left out when it does not exist, or when ``logged_model_time`` (path -> the
    modification time it had when uploaded) says it was uploaded since it last changed.

    Args:
        checkpoint_callback: the callback that saved.
        logged_model_time: what the logger uploaded, and when the file had last changed.
    """
    found: dict[str, tuple[Any, str]] = {}
    last = getattr(checkpoint_callback, "last_model_path", "")
    if last and hasattr(checkpoint_callback, "current_score"):
        found[last] = (checkpoint_callback.current_score, "latest")
    best = getattr(checkpoint_callback, "best_model_path", "")
    if best and hasattr(checkpoint_callback, "best_model_score"):
        found[best] = (checkpoint_callback.best_model_score, "best")
    for path, score in dict(getattr(checkpoint_callback, "best_k_models", {}) or {}).items():
        found[path] = (score, "best_k")
    files = sorted(
        (os.path.getmtime(path), path, score, tag)
        for path, (score, tag) in found.items()
        if os.path.isfile(path)
    )
    return [f for f in files if f[1] not in logged_model_time or logged_model_time[f[1]] < f[0]]


def _version(loggers: list[Any], separator: str = "_") -> int | str:
    """The loggers' version: the one logger's, or the distinct versions joined by ``separator``.

    Example:
        >>> from types import SimpleNamespace as Logger
        >>> _version([Logger(version=1), Logger(version="a"), Logger(version=1)])
        '1_a'
    """
    if len(loggers) == 1:
        return loggers[0].version  # type: ignore[no-any-return]
    return separator.join(dict.fromkeys(str(logger.version) for logger in loggers))

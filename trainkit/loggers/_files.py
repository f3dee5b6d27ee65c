"""File helpers shared by the loggers: version folders and the hparams file.

Kept free of heavy imports (``yaml`` is imported inside the function that
writes it) so that ``import trainkit.loggers`` stays cheap.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from trainkit.checkpoint.weights import plain_value
from trainkit.utilities.io import atomic_write

_VERSION_FOLDER = re.compile(r"version_(\d+)")


def _claim_version_dir(root: str, version: int | str | None) -> tuple[int | str, str]:
    """Create (or reuse) the folder a run writes to, and return its version and path.

    With ``version=None`` the next free ``version_N`` is claimed: the scan of
    existing folders only gives a starting guess, and ``os.makedirs`` with
    ``exist_ok=False`` is the actual claim. Creating a folder is atomic, so
    when two processes race for the same ``N`` exactly one wins and the other
    moves on to ``N + 1``; a folder that already exists (and whatever a user
    saved in it) is never taken over.

    An explicit version is reused when it exists: that is how a resumed run
    keeps writing to the same folder.

    Args:
        root: the experiment folder, ``<save_dir>/<name>``.
        version: ``N`` for ``version_N``, a folder name, or None for the next free ``N``.

    Returns:
        The version and the path of its folder under ``root``.
    """
    if version is not None:
        folder = version if isinstance(version, str) else f"version_{version}"
        path = os.path.join(root, folder)
        os.makedirs(path, exist_ok=True)
        return version, path

    os.makedirs(root, exist_ok=True)
    taken = [int(m.group(1)) for m in map(_VERSION_FOLDER.fullmatch, os.listdir(root)) if m]
    candidate = max(taken, default=-1) + 1
    while True:
        path = os.path.join(root, f"version_{candidate}")
        try:
            os.makedirs(path, exist_ok=False)
        except FileExistsError:
            # Another process (or a stray file) got there first; try the next number.
            candidate += 1
            continue
        return candidate, path


def _write_hparams_yaml(log_dir: str, params: Mapping[str, Any]) -> None:
    """Write ``params`` (nesting kept) to ``<log_dir>/hparams.yaml``, atomically.

    Args:
        log_dir: the run's folder; it must exist.
        params: hyperparameters; values YAML cannot hold are written as strings.
    """
    import yaml  # Lazy: keeps `import trainkit` cheap.

    with atomic_write(os.path.join(log_dir, "hparams.yaml")) as file:
        yaml.safe_dump(plain_value(params), file, sort_keys=False)

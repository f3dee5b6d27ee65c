"""Collection rules for the whole suite: ``tests/`` and the doctests of ``trainkit/``.

A newcomer's ``pip install -e ".[dev]"`` leaves trainkit's extras out: the tests
of an extra skip without it (``tests.helpers.needs_rich``, ``pytest.importorskip``),
and so do the doctests of the modules that use one, here. CI installs every extra
so that all of them run; a run with ``CI=true`` where one is missing stops at once
instead of skipping its tests.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

#: The packages behind trainkit's extras (pyproject.toml), by import name.
EXTRA_PACKAGES = {
    "rich": "rich",
    "psutil": "psutil",
    "mlflow": "mlflow",
    "wandb": "wandb",
    "cli": "jsonargparse",
    "dev": "torchmetrics",
}

#: Modules of trainkit whose doctests need an extra, by the extra's name.
_DOCTESTS_NEEDING = {
    "trainkit/callbacks/rich_progress.py": "rich",
    "trainkit/callbacks/rich_model_summary.py": "rich",
}

_ROOT = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
        return
    missing = {
        extra: package
        for extra, package in EXTRA_PACKAGES.items()
        if importlib.util.find_spec(package) is None
    }
    if missing:
        extras = ",".join(sorted(missing))
        raise pytest.UsageError(
            f"CI runs every extra's tests, but {', '.join(sorted(missing.values()))} "
            f"cannot be imported here, so they would be skipped. Install the extras: "
            f"pip install -e '.[{extras}]' (.ci/run installs them all)."
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            relative = Path(item.path).resolve().relative_to(_ROOT).as_posix()
        except ValueError:
            continue
        extra = _DOCTESTS_NEEDING.get(relative)
        package = EXTRA_PACKAGES[extra] if extra is not None else None
        if package is not None and importlib.util.find_spec(package) is None:
            item.add_marker(
                pytest.mark.skip(reason=f"needs {package}: pip install 'trainkit[{extra}]'")
            )

"""Callbacks that installed packages register through an entry-point group."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import trainkit
import trainkit.lightning as L
from trainkit.callbacks import defaults


def _install(site: Path, group: str, module: str, body: str) -> None:
    # A package's metadata as pip leaves it: its entry points name a factory.
    info = site / f"{module}-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\nfactory = {module}:factory\n")
    (site / f"{module}.py").write_text(body)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))  # a new sys.path: the entry points are read again
    return tmp_path


def test_factories_of_the_groups_each_trainer_reads_add_their_callbacks(site: Path) -> None:
    made = "import trainkit\nclass Made(trainkit.Callback):\n    pass\n"
    trainkit_made = made + "def factory():\n    return Made()\n"
    _install(site, "trainkit.callbacks_factory", "tk_made", trainkit_made)
    lightning_made = made + "def factory():\n    return [Made(), Made()]\n"
    _install(site, "lightning.pytorch.callbacks_factory", "lt_made", lightning_made)

    def names(trainer: trainkit.Trainer) -> list[str]:
        return [type(c).__module__ for c in trainer.callbacks if type(c).__name__ == "Made"]

    assert names(trainkit.Trainer(logger=False)) == ["tk_made"]
    # The ported Trainer reads Lightning's group too, as Lightning's Trainer does.
    assert names(L.Trainer(logger=False)) == ["tk_made", "lt_made", "lt_made"]
    sys.modules.pop("tk_made"), sys.modules.pop("lt_made")


def test_a_factory_that_cannot_be_imported_is_skipped_with_a_warning(site: Path) -> None:
    body = "import lightning_not_installed\n\ndef factory():\n    return []\n"
    _install(site, "trainkit.callbacks_factory", "needs_more", body)
    with pytest.warns(UserWarning, match=r"factory = needs_more:factory .* cannot be imported"):
        callbacks = defaults.external_callbacks([defaults.CALLBACKS_FACTORY])
    assert callbacks == []

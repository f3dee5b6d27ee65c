"""Fixtures of the command-line tests."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def at_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the test from the repository root, where ``tests.helpers`` class paths import."""
    monkeypatch.chdir(ROOT)

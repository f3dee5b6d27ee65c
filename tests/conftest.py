"""Fixtures for every test: no test's settings leak into the next."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Variables trainkit sets (seed_everything) or reads (the launch environment).
_WATCHED = ("TRAINKIT_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture(autouse=True)
def _restore_environment() -> Iterator[None]:
    before = {k: v for k, v in os.environ.items() if k.startswith(_WATCHED)}
    yield
    for key in [k for k in os.environ if k.startswith(_WATCHED)]:
        if key not in before:
            del os.environ[key]
    os.environ.update(before)

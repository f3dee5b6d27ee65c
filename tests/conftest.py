"""Fixtures for every test: no test's settings leak into the next."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from trainkit.utilities.rank_zero import rank_zero_only

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
    # A Trainer fixes the process's rank when it sets up; the next test reads the
    # environment again (and so does lightning_utilities', which follows it).
    rank_zero_only.rank = None

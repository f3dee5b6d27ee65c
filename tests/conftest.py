"""Fixtures for every test: no test's settings leak into the next."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator

import pytest

from trainkit.utilities.rank_zero import rank_zero_only

if os.environ.get("PYTEST_XDIST_WORKER"):
    # The suite runs in three worker processes (pyproject.toml's addopts) on a
    # machine of two cores: one compute thread per process, the jobs the tests start
    # included (they inherit the variable), keeps them from running more compute
    # threads than the cores hold (threads spinning on a busy core). Set before
    # torch is imported.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # The Ctrl-C tests play a terminal's foreground job, where Ctrl-C is not ignored.
    # pytest started in the background of a non-interactive shell (`pytest &`, nohup)
    # inherits SIGINT ignored, and so would every job the tests start; trainkit leaves
    # an ignored Ctrl-C ignored, so those tests would wait out their patience and fail.
    # A handler (unlike SIG_IGN) is not inherited across exec: the jobs get the default.
    signal.signal(signal.SIGINT, signal.default_int_handler)

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


@pytest.fixture
def started_as_a_script(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process was started as ``python train.py``, so a launcher can re-run it.

    The test process itself may not have been (a pytest worker is started by
    ``python -c``, which a launcher refuses to re-run).
    """
    monkeypatch.setattr(sys, "argv", ["train.py"])
    monkeypatch.setattr(sys, "orig_argv", [sys.executable, "train.py"])

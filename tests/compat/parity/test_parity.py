"""Run each probe under trainkit and compare with what Lightning records for it: what
differs must be a deliberate, documented difference.

Lightning's records (``lightning-2.6.6/<probe>.json``) were made by running the
probes under Lightning 2.6.6, so the comparison runs everywhere. Where Lightning
is installed, the probes also run under it live; ``PARITY_RECORD=1`` then writes
its records anew (for a new probe or Lightning version)::

    pip install --target /tmp/lt --no-deps lightning==2.6.6
    PYTHONPATH=/tmp/lt PARITY_RECORD=1 pytest tests/compat/parity

Numbers are compared to a relative 1e-3 (another CPU model may round a trained
weight's fourth digit differently); everything else exactly.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.compat.parity._probe import MARKER
from tests.helpers import ROOT, repo_env

HAS_LIGHTNING = importlib.util.find_spec("lightning") is not None
HERE = Path(__file__).parent
PROBES = sorted(path.stem for path in HERE.glob("p_*.py"))
#: Lightning's records of the probes, by probe.
RECORDS = HERE / "lightning-2.6.6"

#: The keys each probe may record differently under Lightning, and why: the row of
#: docs/porting.md that says so (its first words, before any parenthesis). Any other
#: difference fails the comparison.
DELIBERATE: dict[str, dict[str, str]] = {
    "p_training": {
        "accumulate_short_window": "The last accumulation window of an epoch",
    },
    "p_checkpoint": {
        "wrong_width": "Weights that do not fit the module (a CheckpointError, a RuntimeError)",
    },
    "p_optimizers": {
        "two_in_automatic": "Errors from `self.log` and the Trainer (a ValueError naming the "
        "fix, where Lightning raises RuntimeError)",
    },
    "p_precision": {
        "bf16-true": '`precision="bf16-true"` / `"16-true"` (autocast, batches as they come: '
        "the step sees the batch in float32)",
    },
    "p_rich": {
        "callbacks": "`trainer.callbacks` (also NonFiniteLoss and RunSummary)",
    },
    "p_callbacks": {
        "slash_auto": "`/` in a checkpoint file name (a metric `val/loss`)",
        "last_link": '`ModelCheckpoint(save_last=True)` and `save_last="link"`',
    },
}


def run(probe: str, framework: str, folder: Path) -> dict[str, Any]:
    """The record ``probe`` prints when run under ``framework``, in ``folder``."""
    env = repo_env()
    result = subprocess.run(
        [sys.executable, "-m", f"tests.compat.parity.{probe}", framework, str(folder)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith(MARKER)]
    assert result.returncode == 0 and lines, f"{probe} under {framework}:\n{result.stderr[-3000:]}"
    return json.loads(lines[-1][len(MARKER) :])  # type: ignore[no-any-return]


def same(ours: Any, theirs: Any) -> bool:
    """Whether two records' values agree: numbers to a relative 1e-3, the rest exactly."""
    if isinstance(ours, bool) or isinstance(theirs, bool):
        return ours is theirs
    if isinstance(ours, (int, float)) and isinstance(theirs, (int, float)):
        return math.isclose(ours, theirs, rel_tol=1e-3, abs_tol=1e-4)
    if isinstance(ours, list) and isinstance(theirs, list):
        return len(ours) == len(theirs) and all(map(same, ours, theirs))
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return ours.keys() == theirs.keys() and all(same(ours[k], theirs[k]) for k in ours)
    return bool(ours == theirs)


def unexplained(probe: str, ours: dict[str, Any], theirs: dict[str, Any]) -> str:
    """The keys that differ without a documented reason, with both values."""
    keys = sorted(set(ours) | set(theirs))
    differing = [key for key in keys if not same(ours.get(key), theirs.get(key))]
    return "\n".join(
        f"{key}:\n  lightning {theirs.get(key)}\n  trainkit  {ours.get(key)}"
        for key in differing
        if key not in DELIBERATE.get(probe, {})
    )


def test_each_allowed_difference_is_a_row_of_the_porting_table() -> None:
    table = (ROOT / "docs" / "porting.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    for probe, reasons in DELIBERATE.items():
        assert probe in PROBES, probe
        for key, reason in reasons.items():
            row = reason.split(" (")[0]
            assert any(line.startswith(f"| {row}") for line in rows), f"{probe}.{key}: {row}"


def test_same_compares_numbers_within_a_tolerance_and_the_rest_exactly() -> None:
    assert same({"w": [0.12345, 2]}, {"w": [0.12349, 2]})
    assert not same({"w": [0.123, 2]}, {"w": [0.124, 2]})
    assert not same([1, 2], [1, 2, 3]) and not same({"a": 1}, {"b": 1})
    assert not same(True, 1) and not same("ERR ValueError", "ERR TypeError")


@pytest.mark.parametrize("probe", PROBES)
def test_probe_matches_lightnings_record_but_for_documented_differences(
    probe: str, tmp_path: Path
) -> None:
    ours = run(probe, "trainkit", tmp_path)
    theirs = json.loads((RECORDS / f"{probe}.json").read_text())
    difference = unexplained(probe, ours, theirs)
    assert not difference, f"{probe} differs from Lightning's record:\n{difference}"


@pytest.mark.skipif(not HAS_LIGHTNING, reason="compares with Lightning, not installed")
@pytest.mark.parametrize("probe", PROBES)
def test_probe_matches_lightning_run_live(probe: str, tmp_path: Path) -> None:
    theirs = run(probe, "lightning", tmp_path / "lightning")
    if os.environ.get("PARITY_RECORD") == "1":
        RECORDS.mkdir(exist_ok=True)
        (RECORDS / f"{probe}.json").write_text(json.dumps(theirs, indent=1, sort_keys=True) + "\n")
    ours = run(probe, "trainkit", tmp_path / "trainkit")
    difference = unexplained(probe, ours, theirs)
    assert not difference, f"{probe} differs from Lightning:\n{difference}"

"""trainkit's control traffic: a value synced on some ranks only is named, and no rank exits 0."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import torch

from tests.distributed.spawn import free_port
from tests.launch.running import run_whole
from trainkit.distributed.control import CollectiveMismatchError, ControlChannel, _decode, _encode

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "tests" / "distributed" / "mismatch_script.py")


def test_a_record_carries_its_label_and_payload() -> None:
    _, text, payload = _decode(_encode("the stop decision after validation", [1, -7]))
    assert text == "the stop decision after validation"
    assert payload == [1, -7]
    # Labels longer than a record are shortened in the message but still compared whole.
    long_a, long_b = "x" * 600 + "a", "x" * 600 + "b"
    assert _decode(_encode(long_a, []))[0] != _decode(_encode(long_b, []))[0]
    assert _decode(_encode(long_a, []))[1].endswith("...")


def test_records_with_different_labels_name_every_process() -> None:
    channel = ControlChannel(group=None, rank=0, world_size=2)
    records = [
        _encode("a step of training, reducing the values logged with sync_dist=True: 'x'", []),
        _encode("the preemption vote at a resume point", [0, -1]),
    ]
    with pytest.raises(CollectiveMismatchError) as caught:
        channel._check("a step of training", records)
    message = str(caught.value)
    expected = "process 0 at a step of training, reducing the values logged with sync_dist=True"
    assert expected + ": 'x'" in message
    assert "process 1 at the preemption vote" in message
    assert "rank_zero_only=True" in message  # the way out is named
    same = [_encode("the stop decision", [1]), _encode("the stop decision", [0])]
    assert channel._check("the stop decision", same) == [[1], [0]]
    assert torch.equal(same[0], _encode("the stop decision", [1]))


@pytest.mark.parametrize(
    ("where", "sanity"),
    [("validation", 2), ("validation", 0), ("training", 0)],
    ids=["validation-with-sanity-check", "validation-without-sanity-check", "training-step"],
)
def test_a_sync_dist_value_logged_on_one_rank_only_ends_every_rank_with_its_name(
    tmp_path: Path, where: str, sanity: int
) -> None:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(free_port()),
        SCRIPT,
        "--where",
        where,
        "--sanity",
        str(sanity),
        "--root",
        str(tmp_path),
    ]
    start = time.monotonic()
    result = run_whole(command, timeout=240)
    output = result.stdout + result.stderr
    elapsed = time.monotonic() - start
    assert result.returncode != 0
    assert "CollectiveMismatchError" in output
    assert "'only_on_rank_zero'" in output and "sync_dist=True" in output
    # No rank took the mismatch for the end of training.
    assert not list(tmp_path.glob("exit*.txt"))
    # The script's process-group timeout is 20 s; a mismatch is named well before.
    assert elapsed < 120, f"took {elapsed:.0f} s"

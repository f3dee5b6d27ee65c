"""``strategy="ddp_spawn"``: a failing rank ends the job within seconds; Ctrl-C reaches every rank.

The calling process starts two gloo ranks from inside ``fit`` (see
``trainkit.launch.spawn``); a rank raises at step 5 while the other waits for
it in the step's gradient all-reduce.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.launch.running import Job, alive, rank_pids
from trainkit.checkpoint.preemption import SAME_INTERRUPT_S

ENDS_WITHIN_S = 10.0


@pytest.mark.parametrize("failing_rank", [0, 1])
def test_a_failing_spawned_rank_ends_every_rank_within_seconds(
    tmp_path: Path, failing_rank: int
) -> None:
    job = Job.python(tmp_path, "--strategy", "ddp_spawn", "--fail-rank", str(failing_rank))
    failed_at = job.wait_for(f"rank {failing_rank} failing")
    code, ended_at = job.wait()
    output = job.output
    assert code != 0
    assert ended_at - failed_at < ENDS_WITHIN_S, f"ended {ended_at - failed_at:.1f} s after"
    other = 1 - failing_rank
    assert f"trainkit: rank {failing_rank} failed (exit code 1); ending rank {other}" in output
    # The failing rank's traceback, raised in the calling process.
    assert f"Rank {failing_rank} of the ddp_spawn job failed with this error" in output
    assert f"deliberate failure on rank {failing_rank} at step 5" in output
    assert not any(alive(pid) for pid in rank_pids(tmp_path))


def test_ctrl_c_to_the_caller_reaches_every_rank_once(tmp_path: Path) -> None:
    # The ranks run in a process group of their own: the caller passes the
    # Ctrl-C on (once each; twice would be a second Ctrl-C).
    job = Job.python(tmp_path, "--strategy", "ddp_spawn", "--delay", "0.05", "--max-steps", "2000")
    job.wait_for("rank 0 step 5")
    job.signal_group(signal.SIGINT)  # the terminal's: reaches the caller only
    code, _ = job.wait()
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert code == 130, job.output[-3000:]
    assert f"trainkit: stopped by signal SIGINT after saving {last};" in job.output
    assert last.is_file()
    assert "Traceback" not in job.output
    assert not (tmp_path / "done.txt").exists()


def test_ctrl_c_twice_ends_the_spawned_ranks_at_once(tmp_path: Path) -> None:
    job = Job.python(tmp_path, "--strategy", "ddp_spawn", "--hang-rank", "1")
    job.wait_for("rank 1 hanging")
    job.signal_group(signal.SIGINT)
    time.sleep(SAME_INTERRUPT_S + 0.5)
    sent = time.monotonic()
    job.signal_group(signal.SIGINT)
    code, ended_at = job.wait()
    assert code == 130, job.output[-3000:]
    assert ended_at - sent < ENDS_WITHIN_S
    assert "trainkit: interrupted again: stopping the ranks now without saving" in job.output
    assert "Traceback" not in job.output
    assert not any(alive(pid) for pid in rank_pids(tmp_path))

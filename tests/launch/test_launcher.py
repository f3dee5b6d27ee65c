"""A failing rank ends the whole job within seconds, under every launcher, saying which.

Real jobs of two gloo processes: ``python script.py`` with ``strategy="ddp"``
(trainkit starts rank 1, see ``trainkit.launch.launcher.ScriptLauncher``) and
``torchrun --nproc-per-node 2`` (trainkit starts nothing). A rank raises at step
5 while the other is in the step's gradient all-reduce, waiting for it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.distributed.spawn import free_port
from tests.launch.running import Job, alive, rank_pids
from trainkit.launch.launcher import describe_exit, name_ranks

#: The promise: every process of the job gone within this long of the failure.
ENDS_WITHIN_S = 10.0


def _assert_ended_promptly(job: Job, failing_rank: int, failed_at: float) -> str:
    code, ended_at = job.wait()
    output = job.output
    assert code != 0, output[-3000:]
    assert ended_at - failed_at < ENDS_WITHIN_S, f"ended {ended_at - failed_at:.1f} s after"
    # The failing rank's own traceback is shown.
    assert f"deliberate failure on rank {failing_rank} at step 5" in output
    assert "Traceback" in output
    return output


@pytest.mark.parametrize("failing_rank", [0, 1])
def test_plain_python_a_failing_rank_ends_every_rank_within_seconds(
    tmp_path: Path, failing_rank: int
) -> None:
    job = Job.python(tmp_path, "--fail-rank", str(failing_rank))
    failed_at = job.wait_for(f"rank {failing_rank} failing")
    output = _assert_ended_promptly(job, failing_rank, failed_at)
    # One line says which rank failed and that the others are being ended.
    if failing_rank == 0:
        assert "trainkit: rank 0 failed (RuntimeError); ending rank 1 of the job." in output
    else:
        assert "trainkit: rank 1 failed (exit code 1; its traceback is above); ending rank 0" in (
            output
        )
    assert len(rank_pids(tmp_path)) == 2
    assert not any(alive(pid) for pid in rank_pids(tmp_path))
    assert not (tmp_path / "done.txt").exists()


@pytest.mark.parametrize("failing_rank", [0, 1])
def test_torchrun_a_failing_rank_ends_every_rank_within_seconds(
    tmp_path: Path, failing_rank: int
) -> None:
    # trainkit launches nothing here: torchrun's agent ends the other rank. What
    # trainkit must not do is keep it alive (its exit handlers) or hide the error.
    job = Job.torchrun(tmp_path, free_port(), "--fail-rank", str(failing_rank))
    failed_at = job.wait_for(f"rank {failing_rank} failing")
    _assert_ended_promptly(job, failing_rank, failed_at)
    assert not any(alive(pid) for pid in rank_pids(tmp_path))


def test_a_blocked_rank_0_is_ended_when_its_worker_dies_without_closing_the_collective(
    tmp_path: Path,
) -> None:
    # Rank 1 hangs in its step: rank 0 waits in the all-reduce. Killing rank 1
    # (as the kernel's out-of-memory killer would) ends the job, saying so.
    job = Job.python(tmp_path, "--hang-rank", "1")
    job.wait_for("rank 1 hanging")
    pids = rank_pids(tmp_path)
    worker = next(pid for pid in pids if pid != job.process.pid)
    killed_at = time.monotonic()
    os.kill(worker, signal.SIGKILL)
    code, ended_at = job.wait()
    assert code != 0
    assert ended_at - killed_at < ENDS_WITHIN_S, f"ended {ended_at - killed_at:.1f} s after"
    assert "trainkit: rank 1 failed (ended by signal SIGKILL" in job.output


def test_messages_name_exits_and_ranks() -> None:
    assert describe_exit(1) == "exit code 1"
    assert describe_exit(130) == "exit code 130: interrupted"
    assert describe_exit(-signal.SIGKILL) == "ended by signal SIGKILL"
    assert name_ranks([1]) == "rank 1"
    assert name_ranks([0, 2]) == "ranks 0, 2"

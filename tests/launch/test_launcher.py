"""A failing rank ends the whole job within seconds, under every launcher, saying which.

Real jobs of two gloo processes: ``python script.py`` with ``strategy="ddp"``
(trainkit starts rank 1, see ``trainkit.launch.launcher.ScriptLauncher``) and
``torchrun --nproc-per-node 2`` (trainkit starts nothing). A rank raises at step
5 while the other is in the step's gradient all-reduce, waiting for it.
"""

from __future__ import annotations

import importlib.util
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.distributed.spawn import free_port
from tests.helpers import repo_env
from tests.launch.running import ROOT, Job, alive, rank_pids, still_alive
from trainkit.checkpoint.preemption import SAME_INTERRUPT_S
from trainkit.launch import launcher
from trainkit.launch.launcher import FAILURE_GRACE_S, describe_exit, name_ranks

#: The promise: every process of the job gone within this long of the failure.
ENDS_WITHIN_S = 10.0

#: What the other rank says when a rank failed with its own error first.
_FAILED_FIRST = "failed first: rank {rank} with RuntimeError: deliberate failure on rank {rank}"


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
def test_slurm_tasks_a_failing_rank_ends_every_rank_within_seconds(
    tmp_path: Path, failing_rank: int
) -> None:
    # Under srun trainkit launches nothing either, and srun without --kill-on-bad-exit
    # ends no task: the other rank must end by itself (its collective fails when the
    # failed rank's connections close), not wait out the process-group timeout.
    job = Job.slurm(tmp_path, free_port(), "--fail-rank", str(failing_rank))
    failed_at = job.wait_for(f"rank {failing_rank} failing")
    output = _assert_ended_promptly(job, failing_rank, failed_at)
    if failing_rank == 1:  # (rank 0 holds the job's store: when it fails, the store goes too)
        assert _FAILED_FIRST.format(rank=1) in output
    assert len(rank_pids(tmp_path)) == 2
    if importlib.util.find_spec("lightning_utilities") is not None:
        # Each task told lightning_utilities its global rank (SLURM_PROCID) at set-up.
        assert [(tmp_path / f"ranks{rank}.txt").read_text() for rank in (0, 1)] == ["0", "1"]
    assert not any(alive(pid) for pid in rank_pids(tmp_path))


def test_plain_python_a_full_disk_on_rank_0_ends_every_rank_saying_so(tmp_path: Path) -> None:
    job = Job.python(tmp_path, "--disk-full-rank", "0")
    code, ended_at = job.wait()
    output = job.output
    assert code != 0, output[-3000:]
    said = [line for line in output.splitlines() if "No space left on device while saving" in line]
    assert said, output[-3000:]
    assert str(tmp_path / "ckpt") in said[0]
    failed_at = next(at for at, line in job.lines if "No space left on device" in line)
    assert ended_at - failed_at < ENDS_WITHIN_S, f"ended {ended_at - failed_at:.1f} s after"
    assert "trainkit: rank 0 failed (CheckpointError); ending rank 1 of the job." in output
    assert not any(alive(pid) for pid in rank_pids(tmp_path))
    assert not (tmp_path / "done.txt").exists()
    # Nothing half-written is left where the checkpoints go.
    assert not [p for p in (tmp_path / "ckpt").glob("*") if p.is_file()]


@pytest.mark.parametrize("failing_rank", [0, 1])
def test_torchrun_a_failing_rank_ends_every_rank_within_seconds(
    tmp_path: Path, failing_rank: int
) -> None:
    # trainkit launches nothing here: torchrun's agent ends the other rank. What
    # trainkit must not do is keep it alive (its exit handlers) or hide the error.
    job = Job.torchrun(tmp_path, free_port(), "--fail-rank", str(failing_rank))
    failed_at = job.wait_for(f"rank {failing_rank} failing")
    output = _assert_ended_promptly(job, failing_rank, failed_at)
    # The other rank's collective failed: it names the rank that failed first, with its
    # error, at once (the failing rank said so in the job's store before it ended).
    assert _FAILED_FIRST.format(rank=failing_rank) in output
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


def test_free_ports_are_drawn_below_the_ephemeral_range_whatever_the_seed() -> None:
    """The rendezvous port is one no outgoing connection can take between the draw and
    rank 0's listen (those get ephemeral ports), and jobs seeded alike draw apart."""
    low, _ = launcher._ephemeral_range()
    if low - launcher._LOWEST_DRAWN < 1000:
        pytest.skip(f"this machine's ephemeral range starts at {low}")
    ports = []
    for _ in range(8):
        random.seed(0)  # seed_everything in every job: the draws must still differ
        ports.append(free_port())
    assert all(launcher._LOWEST_DRAWN <= port < low for port in ports), ports
    assert len(set(ports)) > 1, ports


def test_a_port_in_use_is_never_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        draws = iter([busy, busy, 12345])
        monkeypatch.setattr(launcher, "_ephemeral_range", lambda: (32768, 60999))
        monkeypatch.setattr(random.SystemRandom, "randrange", lambda self, a, b: next(draws))
        monkeypatch.setattr(launcher, "_bindable", _bindable_unless(busy))
        assert free_port() == 12345


def _bindable_unless(busy: int) -> object:
    real = launcher._bindable

    def bindable(port: int) -> bool:
        # The real check for the busy port (it must say no); any other drawn port is
        # taken as free, so the test does not depend on 12345 being free here.
        return real(port) if port == busy else True

    return bindable


def test_messages_name_exits_and_ranks() -> None:
    assert describe_exit(1) == "exit code 1"
    assert describe_exit(130) == "exit code 130: interrupted"
    assert describe_exit(-signal.SIGKILL) == "ended by signal SIGKILL"
    assert name_ranks([1]) == "rank 1"
    assert name_ranks([0, 2]) == "ranks 0, 2"


# ------------------------------------------------------------------ signals
def test_ctrl_c_reaching_every_rank_saves_once_and_every_rank_exits_130(tmp_path: Path) -> None:
    job = Job.python(tmp_path, "--delay", "0.05", "--max-steps", "2000")
    job.wait_for("rank 0 step 5")
    job.signal_group(signal.SIGINT)  # a terminal's Ctrl-C reaches the whole job
    code, _ = job.wait()
    output = job.output
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert code == 130, output[-3000:]
    assert output.count("trainkit: stopped by signal SIGINT after saving") == 1
    assert f"after saving {last};" in output and last.is_file()
    assert "Traceback" not in output and "failed" not in output
    assert not any(alive(pid) for pid in rank_pids(tmp_path))


def test_ctrl_c_twice_ends_a_job_blocked_in_a_collective_at_once(tmp_path: Path) -> None:
    # Rank 1 hangs: rank 0's main thread is blocked in the all-reduce, where
    # Python runs no signal handler. The second Ctrl-C still ends the job.
    job = Job.python(tmp_path, "--hang-rank", "1")
    job.wait_for("rank 1 hanging")
    job.signal_group(signal.SIGINT)
    job.wait_for("trainkit: interrupted: saving a checkpoint")  # said even while blocked
    time.sleep(SAME_INTERRUPT_S + 0.5)
    sent = time.monotonic()
    job.signal_group(signal.SIGINT)
    code, ended_at = job.wait()
    assert code == 130, job.output[-3000:]
    assert ended_at - sent < ENDS_WITHIN_S
    assert "trainkit: interrupted again: stopping now without saving" in job.output
    assert "Traceback" not in job.output
    assert not any(alive(pid) for pid in rank_pids(tmp_path))


def test_a_signal_to_one_worker_is_named_by_rank_0(tmp_path: Path) -> None:
    # Only rank 1 gets SIGTERM; the ranks agree to stop, and rank 0's line names
    # the signal (it used to say "signal None"). Preemption exits 0.
    job = Job.python(tmp_path, "--delay", "0.05", "--max-steps", "2000")
    job.wait_for("rank 0 step 5")
    worker = next(pid for pid in rank_pids(tmp_path) if pid != job.process.pid)
    os.kill(worker, signal.SIGTERM)
    code, _ = job.wait()
    assert code == 0, job.output[-3000:]
    assert "trainkit: stopped by signal SIGTERM after saving" in job.output
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.parametrize("terminal", [False, True], ids=["sigterm-to-agent", "ctrl-c-to-all"])
def test_torchrun_agent_signalled_the_ranks_save_and_the_agent_exits_1(
    tmp_path: Path, terminal: bool
) -> None:
    # What docs/fault-tolerance.md says of torchrun: its agent passes the signal
    # on to the ranks, which save and stop; the agent itself then exits with
    # status 1 (its SignalException), which trainkit does not control. A
    # terminal's Ctrl-C reaches each rank twice (directly, and from the agent):
    # still one stop with a checkpoint, not an abort.
    job = Job.torchrun(tmp_path, free_port(), "--delay", "0.05", "--max-steps", "2000")
    job.wait_for("rank 0 step 5")
    if terminal:
        job.signal_group(signal.SIGINT)
    else:
        job.signal(signal.SIGTERM)
    code, _ = job.wait()
    assert code == 1, job.output[-3000:]
    name = "SIGINT" if terminal else "SIGTERM"
    assert f"trainkit: stopped by signal {name} after saving" in job.output
    assert "interrupted again" not in job.output
    assert "SignalException" in job.output
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()


def test_workers_end_with_rank_0_even_when_it_is_killed(tmp_path: Path) -> None:
    # SIGKILL (the out-of-memory killer) runs no handler of rank 0's; the
    # kernel ends the workers with it.
    job = Job.python(tmp_path, "--delay", "0.05", "--max-steps", "2000")
    job.wait_for("rank 1 step 3")
    killed_at = time.monotonic()
    job.signal(signal.SIGKILL)
    code, ended_at = job.wait()
    assert code == -signal.SIGKILL
    assert ended_at - killed_at < ENDS_WITHIN_S
    left = ENDS_WITHIN_S - (time.monotonic() - killed_at)
    assert still_alive(rank_pids(tmp_path), within_s=left) == []


WATCH_SCRIPT = """
import subprocess, sys, time
from trainkit.launch.launcher import WorkerWatch
failing = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1); exit(3)"])
waiting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print(waiting.pid, flush=True)
# Rank 0's entry point waits on, as in a collective that never fails by itself.
WorkerWatch([failing, waiting]).run(time.sleep, 120)
"""


def _run_python(script: str) -> subprocess.CompletedProcess[str]:
    """``python -c script`` with trainkit importable; its output captured."""
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=repo_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_rank_0_waiting_on_after_a_worker_failed_is_ended(tmp_path: Path) -> None:
    started = time.monotonic()
    result = _run_python(WATCH_SCRIPT)
    assert result.returncode == 1, result.stderr
    assert time.monotonic() - started < 1 + FAILURE_GRACE_S + ENDS_WITHIN_S
    assert "trainkit: rank 1 failed (exit code 3; its traceback is above); ending ranks 0, 2" in (
        result.stderr
    )
    assert "trainkit: rank 0 is still waiting for rank 1; ending rank 0." in result.stderr
    assert not alive(int(result.stdout.split()[0]))


def test_workers_that_outlive_rank_0_by_the_timeout_are_ended_saying_so() -> None:
    script = """
import subprocess, sys
import trainkit.launch.launcher as launcher
launcher.FINISH_TIMEOUT_S = 1.0
waiting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print("flushed before the exit")
launcher.WorkerWatch([waiting]).wait_at_exit()
"""
    result = _run_python(script)
    # The job fails: a rank that never finished its run is no success.
    assert result.returncode == 1, result.stderr
    assert (
        "trainkit: rank 1 did not end within 1 s of rank 0's end; ending it. The job fails"
        in result.stderr
    )
    assert "flushed before the exit" in result.stdout


def test_a_worker_that_fails_after_rank_0_finished_fails_the_job() -> None:
    script = """
import subprocess, sys
import trainkit.launch.launcher as launcher
late = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1); raise SystemExit(3)"])
done = subprocess.Popen([sys.executable, "-c", "pass"])
launcher.WorkerWatch([done, late]).wait_at_exit()
"""
    result = _run_python(script)
    assert result.returncode == 1, result.stderr
    assert "trainkit: rank 2 failed" in result.stderr and "exit code 3" in result.stderr

"""Preemption and Ctrl-C: processes agree to stop at the same resume point, cheaply."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

import tests.checkpoint.test_resume as resume_runs
import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from tests.launch.running import Job
from trainkit.checkpoint.preemption import (
    MAX_VOTE_INTERVAL,
    SAME_INTERRUPT_S,
    VOTE_PERIOD_S,
    Preemption,
    StopVote,
)


class FakeGroup:
    """An element-wise MAX over ``size`` simulated processes.

    The k-th agreement of every process is combined; reading a result before
    every process has started its k-th agreement is an error (a real process
    would wait forever: the processes did not vote at the same points).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.casts: list[dict[int, list[int]]] = []
        self.counts = [0] * size

    def agree_max(self, rank: int) -> Callable[[Sequence[int]], Callable[[], list[int]]]:
        def agree(values: Sequence[int]) -> Callable[[], list[int]]:
            index = self.counts[rank]
            self.counts[rank] += 1
            while len(self.casts) <= index:
                self.casts.append({})
            self.casts[index][rank] = list(values)

            def result() -> list[int]:
                cast = self.casts[index]
                assert len(cast) == self.size, f"vote {index} was never cast by every process"
                return [max(column) for column in zip(*cast.values(), strict=True)]

            return result

        return agree


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _run(
    step_s: Sequence[float], signal_at: dict[int, int], points: int
) -> tuple[list[int | None], list[StopVote]]:
    """Simulate processes passing ``points`` resume points in lockstep.

    Process r spends ``step_s[r]`` seconds per point and gets a signal at point
    ``signal_at[r]``; returns the point where each stopped (None: never).
    """
    group = FakeGroup(len(step_s))
    clocks = [FakeClock() for _ in step_s]
    votes = [StopVote(group.agree_max(r), clock=clocks[r]) for r in range(len(step_s))]
    stopped: list[int | None] = [None] * len(step_s)
    for point in range(points):
        for rank, vote in enumerate(votes):
            if stopped[rank] is not None:
                continue
            clocks[rank].now += step_s[rank]
            if vote.at_resume_point(point >= signal_at.get(rank, points)):
                stopped[rank] = point
    for vote in votes:
        vote.finish()
    return stopped, votes


def test_a_signal_on_one_process_stops_every_process_at_the_same_point() -> None:
    stopped, _ = _run([0.5, 0.5], {1: 7}, points=100)
    assert stopped[0] == stopped[1]
    assert stopped[0] is not None and 7 < stopped[0] <= 9  # slow steps: a vote at every point


def test_short_steps_vote_rarely_and_still_agree() -> None:
    # 1 ms per resume point on one process, 3 ms on the other: they still vote at
    # the same points, at the pace of the slower one (one vote per VOTE_PERIOD_S
    # of its time), not at every point.
    stopped, votes = _run([0.001, 0.003], {0: 5000}, points=10_000)
    assert votes[0].votes == votes[1].votes
    assert votes[0].votes <= 2 * 10_000 * 0.003 / VOTE_PERIOD_S  # 150; 10,000 points
    # Both stopped at the same point, within two vote intervals of the signal.
    assert stopped[0] == stopped[1]
    assert stopped[0] is not None
    assert 5000 < stopped[0] <= 5000 + 2 * VOTE_PERIOD_S / 0.003 + 2


def test_without_a_signal_no_process_stops_and_no_vote_is_left_unread() -> None:
    stopped, votes = _run([0.01, 0.02, 0.015], {}, points=500)
    assert stopped == [None, None, None]
    assert len({vote.votes for vote in votes}) == 1


def test_one_process_checks_at_every_resume_point() -> None:
    casts: list[list[int]] = []

    def agree(values: Sequence[int]) -> Callable[[], list[int]]:
        casts.append(list(values))
        return lambda: list(values)

    clock = FakeClock()
    vote = StopVote(agree, spaced=False, clock=clock)
    decisions = []
    for point in range(5):
        clock.now += 1e-4
        decisions.append(vote.at_resume_point(point == 3))
    # Signalled at point 3, stopped at the next one, after a vote at every point.
    assert decisions == [False, False, False, False, True]
    assert [cast[0] for cast in casts] == [0, 0, 0, 1]


@pytest.mark.parametrize("step_s", [1e-7, 10.0])
def test_the_interval_stays_within_bounds(step_s: float) -> None:
    group = FakeGroup(1)
    clock = FakeClock()
    vote = StopVote(group.agree_max(0), clock=clock)
    for _ in range(3 * MAX_VOTE_INTERVAL if step_s < 1 else 5):
        clock.now += step_s
        vote.at_resume_point(False)
    vote.finish()
    proposals = [-cast[0][1] for cast in group.casts]  # sent negated (see StopVote)
    assert all(1 <= p <= MAX_VOTE_INTERVAL for p in proposals)
    assert proposals[-1] == (MAX_VOTE_INTERVAL if step_s < 1 else 1)


# ------------------------------------------------------------ the agreed signal
def test_every_process_learns_the_signal_that_any_process_received() -> None:
    # Only process 1 gets SIGTERM; both stop at the same point and both name it
    # (the stop line used to say "signal None" on a process that got nothing).
    group = FakeGroup(2)
    clocks = [FakeClock(), FakeClock()]
    votes = [StopVote(group.agree_max(r), clock=clocks[r]) for r in range(2)]
    stopped: list[int | None] = [None, None]
    for point in range(20):
        for rank, vote in enumerate(votes):
            clocks[rank].now += 0.5  # slow steps: a vote at every point
            got = int(signal.SIGTERM) if rank == 1 and point >= 3 else 0
            if stopped[rank] is None and vote.at_resume_point(got):
                stopped[rank] = point
    assert stopped[0] == stopped[1] is not None
    assert [vote.signal for vote in votes] == [signal.SIGTERM, signal.SIGTERM]


def test_different_signals_agree_on_the_highest_number() -> None:
    group = FakeGroup(2)
    clocks = [FakeClock(), FakeClock()]
    votes = [StopVote(group.agree_max(r), clock=clocks[r]) for r in range(2)]
    got = [int(signal.SIGINT), int(signal.SIGTERM)]
    for _ in range(3):
        for rank, vote in enumerate(votes):
            clocks[rank].now += 0.5
            vote.at_resume_point(got[rank])
    assert [vote.signal for vote in votes] == [signal.SIGTERM, signal.SIGTERM]


def test_a_time_limit_one_process_sees_is_up_for_every_process_at_the_same_point() -> None:
    # Process 0's clock passes max_time at point 3, process 1's at point 6: both
    # learn at the same point that it is up, no signal is agreed, and voting goes on.
    group = FakeGroup(2)
    clocks = [FakeClock(), FakeClock()]
    votes = [StopVote(group.agree_max(r), clock=clocks[r]) for r in range(2)]
    up_at: list[int | None] = [None, None]
    for point in range(12):
        for rank, vote in enumerate(votes):
            clocks[rank].now += 0.5  # slow steps: a vote at every point
            assert not vote.at_resume_point(0, time_up=point >= (3 if rank == 0 else 6))
            if vote.time_up and up_at[rank] is None:
                up_at[rank] = point
    assert up_at[0] == up_at[1] == 4  # voted at point 3, read at the next
    assert [vote.signal for vote in votes] == [0, 0]
    assert all(vote.votes == 12 for vote in votes)


def test_one_process_stops_for_its_own_signal_and_exits_with_its_status() -> None:
    preemption = Preemption()
    assert preemption.agree(None) == 0 and preemption.stopped_by is None
    preemption.signal, preemption.requested = int(signal.SIGINT), True
    assert preemption.agree(None) == signal.SIGINT
    assert preemption.interrupted and preemption.exit_code == 130
    preemption.stopped_by = int(signal.SIGTERM)
    assert not preemption.interrupted and preemption.exit_code == 0


def test_a_sigterm_stop_ends_fit_with_lightnings_sigterm_exception(tmp_path: Path) -> None:
    from trainkit.checkpoint.preemption import SIGTERMException
    from trainkit.lightning.utilities.exceptions import SIGTERMException as LightningName

    class TermAtStep(trainkit.Callback):
        def on_train_batch_end(self, trainer: trainkit.Trainer, *args: Any) -> None:
            if trainer.global_step == 2:
                os.kill(os.getpid(), signal.SIGTERM)

    trainer = trainkit.Trainer(
        max_epochs=5,
        default_root_dir=str(tmp_path),
        callbacks=[TermAtStep()],
        **{**QUIET, "enable_checkpointing": True},
    )
    # Code that catches Lightning's exception around fit runs, after the save.
    with pytest.raises(LightningName) as stop:
        trainer.fit(Classifier(), loader(blobs(256)))
    assert LightningName is SIGTERMException and isinstance(stop.value, SystemExit)
    assert stop.value.code == 0 and trainer.global_step == 2
    assert torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 2
    # Another signal's stop is a plain SystemExit.
    preemption = Preemption()
    preemption.stopped_by = int(signal.SIGINT)
    with pytest.raises(SystemExit) as other:
        preemption.finish_fit(tmp_path / "x.ckpt", announce=False)
    assert not isinstance(other.value, SIGTERMException) and other.value.code == 130


# ------------------------------------------------------------------- Ctrl-C
class InterruptAtStep(trainkit.Callback):
    """Sends this process SIGINT after step ``step``, as a terminal's Ctrl-C would."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: trainkit.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_saves_stops_and_exits_130_with_trainer_interrupted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trainer = trainkit.Trainer(
        max_epochs=5,
        default_root_dir=str(tmp_path),
        callbacks=[InterruptAtStep(3)],
        **{**QUIET, "enable_checkpointing": True},
    )
    with pytest.raises(SystemExit) as stop:
        trainer.fit(Classifier(), loader(blobs(256)))
    assert stop.value.code == 130
    assert trainer.interrupted and trainer.state.status == "interrupted"
    # Stopped at the next resume point (the one right after step 3), having saved there.
    assert trainer.global_step == 3
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 3
    out = capsys.readouterr().out
    assert f"trainkit: stopped by signal SIGINT after saving {last};" in out
    # Ctrl-C and the wakeup descriptor are given back: the next Ctrl-C interrupts as usual.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.set_wakeup_fd(-1) == -1


def test_each_fit_of_a_process_takes_its_own_first_ctrl_c(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # The thread that counts Ctrl-Cs is started once and kept for later fits: a later
    # fit's first Ctrl-C must save and stop again, not count as a second one (which
    # would end the process at once, without saving).
    for run in ("first", "second"):
        trainer = trainkit.Trainer(
            max_epochs=5,
            default_root_dir=str(tmp_path / run),
            callbacks=[InterruptAtStep(3)],
            **{**QUIET, "enable_checkpointing": True},
        )
        with pytest.raises(SystemExit) as stop:
            trainer.fit(Classifier(), loader(blobs(256)))
        assert stop.value.code == 130 and trainer.global_step == 3
        assert (tmp_path / run / "checkpoints" / "last.ckpt").exists()
        time.sleep(SAME_INTERRUPT_S + 0.2)  # past the window in which a Ctrl-C repeats
    err = capfd.readouterr().err
    assert err.count("trainkit: interrupted: saving a checkpoint at the next resume point") == 2
    watchers = [t for t in threading.enumerate() if t.name == "trainkit-interrupts"]
    assert len(watchers) == 1, "one thread watches for Ctrl-C, whatever the number of fits"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.set_wakeup_fd(-1) == -1


def test_a_ctrl_c_just_before_the_fit_ends_is_announced_before_it_ends(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # The watcher thread reads signals from a pipe; on a loaded machine it may not
    # have run yet when the fit ends. What was written before the end is read then,
    # while still armed: announced once, and never carried into a later fit.
    switch = sys.getswitchinterval()
    preemption = Preemption()
    try:
        for _ in range(2):
            preemption.install()  # as each fit does
            sys.setswitchinterval(5.0)  # the thread gets no turn until this one waits
            os.kill(os.getpid(), signal.SIGINT)  # keeps the GIL (raise_signal lets it go)
            assert preemption.signal == signal.SIGINT  # the handler ran: a save is due
            preemption.uninstall()  # as the fit's end does
            sys.setswitchinterval(switch)
            assert capfd.readouterr().err.count("trainkit: interrupted: saving") == 1
    finally:
        sys.setswitchinterval(switch)
        preemption.uninstall()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.set_wakeup_fd(-1) == -1


def test_a_ctrl_c_handler_of_the_users_own_is_left_alone(tmp_path: Path) -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        trainer = trainkit.Trainer(max_epochs=1, callbacks=[InterruptAtStep(3)], **QUIET)
        trainer.fit(Classifier(), loader(blobs(256)))  # not stopped: the user's handler ran
        assert seen == [signal.SIGINT] and trainer.global_step == 8 and not trainer.interrupted
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return resume_runs._run(tmp_path_factory.mktemp("uninterrupted"))


def test_ctrl_c_once_saves_then_resume_is_bitwise_equal(
    tmp_path: Path, uninterrupted: dict[str, Any]
) -> None:
    process = resume_runs._start(tmp_path, "--delay", "0.02", "--every", "1000")
    lines = resume_runs._wait_for_step(process, 10)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=120)
    output = "".join(lines) + out
    assert process.returncode == 130, output
    # One line with the checkpoint's path; no traceback.
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert f"trainkit: stopped by signal SIGINT after saving {last};" in output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output
    assert not (tmp_path / "final.pt").exists()
    resumed = resume_runs._run(tmp_path, "--every", "1000", "--resume")
    resume_runs._assert_same_final_state(resumed, uninterrupted)


def test_ctrl_c_twice_stops_at_once_without_a_traceback(tmp_path: Path) -> None:
    # A long step: the first Ctrl-C waits for the next resume point, the second does not.
    process = resume_runs._start(tmp_path, "--delay", "5", "--every", "1000")
    resume_runs._wait_for_step(process, 2)
    process.send_signal(signal.SIGINT)
    # Ctrl-Cs within SAME_INTERRUPT_S are taken as one (torchrun passes it on too).
    time.sleep(SAME_INTERRUPT_S + 0.5)
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=120)
    assert time.monotonic() - sent < 4, "waited for the step"
    assert process.returncode == 130, out
    assert "trainkit: interrupted again: stopping now without saving" in out
    assert "Traceback" not in out
    assert not (tmp_path / "checkpoints" / "last.ckpt").exists()


def test_ctrl_c_delivered_twice_at_once_counts_as_one(tmp_path: Path) -> None:
    # Under torchrun a terminal's Ctrl-C reaches each rank, and the agent passes
    # it on as well: the run must still save and stop, not abort.
    process = resume_runs._start(tmp_path, "--delay", "0.5", "--every", "1000")
    resume_runs._wait_for_step(process, 2)
    process.send_signal(signal.SIGINT)
    time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 130, out
    assert "trainkit: stopped by signal SIGINT after saving" in out
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()


def test_ctrl_c_reaching_dataloader_workers_too_still_saves_once(tmp_path: Path) -> None:
    # A terminal's Ctrl-C also reaches the DataLoader's worker processes, which
    # inherit the signal's wakeup pipe: still one interrupt, not two.
    job = Job(resume_runs._command(tmp_path, "--delay", "0.05", "--num-workers", "2"))
    job.wait_for("step 10")
    job.signal_group(signal.SIGINT)
    code, _ = job.wait()
    assert code == 130, job.output[-3000:]
    assert "trainkit: stopped by signal SIGINT after saving" in job.output
    assert "interrupted again" not in job.output

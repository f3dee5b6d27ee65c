"""The preemption vote: processes agree to stop at the same resume point, cheaply."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from trainkit.preemption import MAX_VOTE_INTERVAL, VOTE_PERIOD_S, StopVote


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

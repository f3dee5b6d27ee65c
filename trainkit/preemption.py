"""Preemption: SIGTERM or SIGUSR1 become "checkpoint and stop at the next resume point".

Clusters warn a job before they stop it: SLURM sends SIGUSR1 (with
``--signal=USR1@<seconds>``) or SIGTERM; Kubernetes and most schedulers send
SIGTERM. During ``fit`` trainkit catches both, finishes the current step, saves
``last.ckpt`` at the next resume point, closes its loggers and exits with status
0. Started again with ``ckpt_path="last"``, the run continues exactly where it
stopped. See docs/checkpointing.md for the SLURM recipe.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

# SIGUSR1 does not exist on Windows.
SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGUSR1") if hasattr(signal, name))

#: Training time aimed at between two preemption votes of a multi-process run.
VOTE_PERIOD_S = 0.2
#: The most resume points between two votes (for very short steps).
MAX_VOTE_INTERVAL = 10_000


class Preemption:
    """Records a preemption signal; the loop checks :attr:`requested` at resume points."""

    def __init__(self) -> None:
        self.requested = False
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        """Catch the preemption signals (only possible from the main thread)."""
        self.requested = False
        self.signal = None
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)

    def uninstall(self) -> None:
        """Give the signals back to whoever handled them before."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        # Only set a flag: the step in progress finishes, and the loop saves at the
        # next resume point, where the state is consistent.
        self.requested = True
        self.signal = signum


class StopVote:
    """Agrees across processes whether any got a preemption signal, in the background.

    The loop calls :meth:`at_resume_point` at every resume point. A signal may
    reach only some processes; a process stopping alone would leave the others
    waiting in a collective, so they vote, and all stop at the same point.

    A vote is an element-wise maximum over processes (``Strategy.agree_max``) of
    ``[signalled, -proposed interval]``, started at one resume point and read at
    the next voting point, so nobody waits for it. Each process proposes how many
    resume points to let pass before the next vote, from its measured time per
    resume point, aiming at one vote per :data:`VOTE_PERIOD_S` of training; the
    smallest proposal wins, and every process reads it at the same point, so all
    of them vote at the same points. A step of a tiny model therefore does not
    pay for a vote, and a signal stops the run within about two vote periods
    plus two steps. A single process (``spaced=False``) checks every resume
    point, at no cost.

    Args:
        agree_max: the strategy's ``agree_max``.
        spaced: False for a single process, where a vote costs nothing.
        clock: seconds, for the time per resume point (tests pass a fake).
    """

    def __init__(
        self,
        agree_max: Callable[[Sequence[int]], Callable[[], list[int]]],
        spaced: bool = True,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._agree_max = agree_max
        self._spaced = spaced
        self._clock = clock
        self._pending: Callable[[], list[int]] | None = None
        self._skip = 0
        self._since = clock()
        self._points = 0
        #: Votes started so far.
        self.votes = 0

    def at_resume_point(self, requested: bool) -> bool:
        """True when the processes have agreed to stop at this resume point.

        Every process must call this at the same resume points.

        Args:
            requested: whether this process got a preemption signal.
        """
        self._points += 1
        if self._skip > 0:
            self._skip -= 1
            return False
        stop, interval = False, 1
        if self._pending is not None:
            stop_flag, negated_interval = self._pending()
            self._pending = None
            stop, interval = bool(stop_flag), -negated_interval
        if stop:
            return True  # every process read the same result: none votes again
        # The maximum of the negated proposals is the smallest proposal: the
        # process with the longest resume points sets the pace.
        self._pending = self._agree_max([int(requested), -self._proposal()])
        self.votes += 1
        self._skip = interval - 1
        return False

    def finish(self) -> None:
        """Wait for the vote under way, if any (every process, when training ends)."""
        if self._pending is not None:
            self._pending()
            self._pending = None

    def _proposal(self) -> int:
        now = self._clock()
        per_point = (now - self._since) / max(self._points, 1)
        self._since, self._points = now, 0
        if not self._spaced:
            return 1
        return max(1, min(MAX_VOTE_INTERVAL, math.ceil(VOTE_PERIOD_S / max(per_point, 1e-9))))

"""Preemption and Ctrl-C: a signal becomes "save a checkpoint and stop at the next resume point".

Clusters warn a job before they stop it: SLURM sends SIGUSR1 (with
``--signal=USR1@<seconds>``) or SIGTERM; Kubernetes and most schedulers send
SIGTERM. During ``fit`` trainkit catches both, finishes the current step, saves
``last.ckpt`` at the next resume point, closes its loggers and exits with status
0. Started again with ``ckpt_path="last"``, the run continues exactly where it
stopped. See docs/checkpointing.md for the SLURM recipe.

Ctrl-C (SIGINT) takes the same path, and exits with status 130 (the shell's
code for an interrupted command) with ``trainer.interrupted`` set. A second
Ctrl-C stops the process at once, without saving: the last checkpoint on disk
is intact, since checkpoints are written atomically. The second one is noticed
by a thread even while the main thread is blocked in a collective (where Python
runs no signal handler), which is exactly when a user presses Ctrl-C twice.
See docs/fault-tolerance.md.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any, NoReturn

from trainkit.utilities.rank_zero import global_rank

# SIGUSR1 does not exist on Windows.
SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGUSR1") if hasattr(signal, name))
#: Exit status after a stop for Ctrl-C, and after a second Ctrl-C (128 + SIGINT, as shells report).
INTERRUPTED_EXIT_CODE = 128 + signal.SIGINT

#: Ctrl-Cs this close to the first are the same one, delivered twice: torchrun's
#: agent passes on the Ctrl-C its ranks also got from the terminal.
SAME_INTERRUPT_S = 1.0

#: Written to the watcher's pipe by disarm (no signal has number 0).
_DRAIN = b"\x00"

#: Training time aimed at between two preemption votes of a multi-process run.
VOTE_PERIOD_S = 0.2
#: The most resume points between two votes (for very short steps).
MAX_VOTE_INTERVAL = 10_000

_abort_hooks: list[Callable[[], None]] = []
_abort_lock = threading.Lock()


def signal_name(signum: int) -> str:
    """``15`` -> ``"SIGTERM"`` (the number itself if it names no signal).

    Args:
        signum: a signal number.

    Example:
        >>> signal_name(2)
        'SIGINT'
    """
    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)


def on_abort(hook: Callable[[], None]) -> Callable[[], None]:
    """Run ``hook`` before a second Ctrl-C ends this process (a launcher ends its workers).

    Args:
        hook: a function taking no arguments; it must be quick and must not raise.

    Returns:
        A function that unregisters the hook.
    """
    _abort_hooks.append(hook)
    return lambda: _abort_hooks.remove(hook) if hook in _abort_hooks else None


def abort(message: str) -> NoReturn:
    """End this process now with status 130, after one line and the abort hooks.

    Safe from a signal handler and from any thread; a second caller waits for
    the first to end the process.

    Args:
        message: what to print (from global rank 0 only).
    """
    with _abort_lock:
        # What was printed so far, unless the main thread holds a stream (a print
        # blocked on a full pipe): ending the process matters more.
        flusher = threading.Thread(target=_flush_streams, daemon=True)
        flusher.start()
        flusher.join(timeout=1.0)
        if global_rank() == 0:
            os.write(2, f"trainkit: {message}\n".encode())
        for hook in list(_abort_hooks):
            with contextlib.suppress(Exception):  # ending the process matters more
                hook()
        os._exit(INTERRUPTED_EXIT_CODE)


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a stream busy in the interrupted code
            stream.flush()


def _say_interrupted() -> None:
    # os.write, not print: this may run in a signal handler, inside a print.
    if global_rank() == 0:
        os.write(
            2,
            b"trainkit: interrupted: saving a checkpoint at the next resume point, then "
            b"stopping (press Ctrl-C again to stop at once without saving).\n",
        )


class SIGTERMException(SystemExit):
    """How ``fit`` ends the process after stopping for SIGTERM (its checkpoint saved).

    A ``SystemExit`` (status 0): uncaught, the process ends as after any stop for a
    signal. Code that catches it around ``trainer.fit`` (Lightning's name for it)
    runs before the process ends.
    """


class Preemption:
    """Records a preemption signal or Ctrl-C; the loop asks :meth:`agree` at resume points.

    Attributes:
        requested: whether this process got a signal since :meth:`install`.
        signal: the signal this process got (None: none).
        stopped_by: the signal the run stopped for (agreed by every process), once it has.
    """

    def __init__(self) -> None:
        self.requested = False
        self.signal: int | None = None
        self.stopped_by: int | None = None
        self._previous: dict[int, Any] = {}
        self._watcher: _InterruptWatcher | None = None

    @property
    def interrupted(self) -> bool:
        """Whether the run stopped for Ctrl-C (SIGINT)."""
        return self.stopped_by == signal.SIGINT

    @property
    def exit_code(self) -> int:
        """The status the process ends with after the stop: 130 for Ctrl-C, else 0."""
        return INTERRUPTED_EXIT_CODE if self.interrupted else 0

    def install(self) -> None:
        """Catch the signals (only possible from the main thread).

        Ctrl-C is caught only while Python's own handler (KeyboardInterrupt) is
        in place: a handler the user installed is left alone.
        """
        self.requested = False
        self.signal = None
        self.stopped_by = None
        if threading.current_thread() is not threading.main_thread():
            return
        signals = list(SIGNALS)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signals.append(signal.SIGINT)
            self._watcher = _InterruptWatcher.arm()
        for signum in signals:
            self._previous[signum] = signal.signal(signum, self._handle)

    def uninstall(self) -> None:
        """Give the signals back to whoever handled them before."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()
        if self._watcher is not None:
            self._watcher.disarm(drain=self.requested)
            self._watcher = None

    def agree(self, vote: StopVote | None, time_up: bool = False) -> int:
        """The signal every process agrees to stop for at this resume point (0: go on).

        Args:
            vote: the processes' vote (None: one process, which decides alone).
            time_up: whether this process's clock is past ``max_time`` (see
                :attr:`StopVote.time_up`).
        """
        mine = self.signal or 0
        agreed = mine
        if vote is not None:
            agreed = vote.signal if vote.at_resume_point(mine, time_up) else 0
        if agreed:
            self.stopped_by = agreed
        return agreed

    def finish_fit(self, checkpoint: str | os.PathLike[str], announce: bool) -> NoReturn:
        """End the process after a stop for a signal: one line, then the exit status.

        Args:
            checkpoint: the checkpoint saved at the stop.
            announce: print the line (global rank 0, or the process that started the ranks).
        """
        assert self.stopped_by is not None, "only after a stop"
        name, code = signal_name(self.stopped_by), self.exit_code
        self.stopped_by = None  # a later run of this Trainer starts afresh
        if announce:
            print(
                f"trainkit: stopped by signal {name} after saving "
                f"{os.fspath(checkpoint)}; restart with ckpt_path='last' to continue.",
                flush=True,
            )
        raise SIGTERMException(code) if name == "SIGTERM" else SystemExit(code)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        # Only set a flag: the step in progress finishes, and the loop saves at the
        # next resume point, where the state is consistent. (A second Ctrl-C is the
        # watcher's: see _InterruptWatcher.)
        if signum == signal.SIGINT and self._watcher is None and not self.requested:
            _say_interrupted()  # else the watcher said it, even if this thread was blocked
        self.requested = True
        # Signals from several sources: the highest number wins here and in the
        # vote, so that every process reports (and exits for) the same one.
        self.signal = max(self.signal or 0, signum)


class _InterruptWatcher:
    """Counts Ctrl-Cs on a thread, and ends the process on the second.

    A second Ctrl-C counts from :data:`SAME_INTERRUPT_S` after the first.

    Python runs signal handlers in the main thread only, between bytecodes: a main
    thread blocked in a collective (a rank waiting for one that hangs) would never
    see a second Ctrl-C. ``signal.set_wakeup_fd`` makes the interpreter's C-level
    handler write each signal's number to a pipe at once; this thread reads it.

    One watcher serves the process: its thread starts at the first ``fit`` and
    then waits on the pipe, watching only while armed (starting and joining a
    thread per ``fit`` cost a short run ~0.3 ms). A forked child, which has no
    copy of the thread, starts its own.
    """

    _shared: _InterruptWatcher | None = None

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._read_fd, self._write_fd = read_fd, write_fd
        self._pid = os.getpid()
        self._armed = 0  # fits watching now (a fit run inside another nests)
        self._previous_fd = -1  # the wakeup descriptor before arming, given back after
        self._first: float | None = None  # when this arming's first Ctrl-C came
        self._drained = threading.Event()  # the thread has read up to a _DRAIN byte
        self._thread = threading.Thread(target=self._watch, name="trainkit-interrupts", daemon=True)

    def __deepcopy__(self, memo: dict[int, Any]) -> _InterruptWatcher:
        # The process has one watcher: a copy of what holds it (a Trainer copied in a
        # hook, as Lightning code copies its callbacks) shares it.
        return self

    @classmethod
    def arm(cls) -> _InterruptWatcher | None:
        """Watch from now on (from the main thread); None where the pipe cannot be set up."""
        watcher = cls._shared
        if watcher is None or watcher._pid != os.getpid():
            read_fd, write_fd = os.pipe()
            os.set_blocking(write_fd, False)
            watcher = cls(read_fd, write_fd)
            watcher._thread.start()
            cls._shared = watcher
        if watcher._armed == 0:
            try:
                previous = signal.set_wakeup_fd(watcher._write_fd, warn_on_full_buffer=False)
            except (ValueError, OSError):
                return None
            watcher._previous_fd, watcher._first = previous, None
        watcher._armed += 1
        return watcher

    def disarm(self, drain: bool = True) -> None:
        """Stop watching (the outermost fit gives the wakeup descriptor back).

        Args:
            drain: read the signals already written to the pipe first, while still
                armed: a Ctrl-C that stopped this fit is then announced before the
                fit's last line, and never counted by a later fit as its own first
                one. A round trip to the thread (~0.1-0.3 ms): the caller skips it
                when no signal came.
        """
        if self._armed == 1:
            signal.set_wakeup_fd(self._previous_fd)
            if drain:
                self._drain()
            self._previous_fd = -1
        self._armed -= 1

    def _drain(self) -> None:
        self._drained.clear()
        try:
            os.write(self._write_fd, _DRAIN)
        except OSError:  # the pipe is full: the thread is stuck (ending the process)
            return
        self._drained.wait(timeout=1.0)

    def _watch(self) -> None:
        while data := os.read(self._read_fd, 64):
            signals = data.replace(_DRAIN, b"")
            previous = self._previous_fd
            if previous >= 0 and signals:  # whoever watched before still gets their signals
                with contextlib.suppress(OSError):
                    os.write(previous, signals)
            if signal.SIGINT in signals and self._armed:
                if self._first is None:
                    self._first = time.monotonic()
                    _say_interrupted()
                elif time.monotonic() - self._first >= SAME_INTERRUPT_S:
                    abort("interrupted again: stopping now without saving (exit 130).")
            if len(signals) < len(data):
                self._drained.set()


class StopVote:
    """Agrees across processes whether any got a preemption signal, in the background.

    The loop calls :meth:`at_resume_point` at every resume point. A signal may
    reach only some processes; a process stopping alone would leave the others
    waiting in a collective, so they vote, and all stop at the same point.

    A vote is an element-wise maximum over processes (``Strategy.agree_max``) of
    ``[signal number or 0, -proposed interval, time up]``, started at one resume point and read at
    the next voting point, so nobody waits for it. Each process proposes how many
    resume points to let pass before the next vote, from its measured time per
    resume point, aiming at one vote per :data:`VOTE_PERIOD_S` of training; the
    smallest proposal wins, and every process reads it at the same point, so all
    of them vote at the same points. A step of a tiny model therefore does not
    pay for a vote, and a signal stops the run within about two vote periods
    plus two steps. A single process (``spaced=False``) checks every resume
    point, at no cost. The agreed signal (the highest number any process got)
    is :attr:`signal`, so that every process reports the same one, whichever
    received it. The same vote agrees that ``max_time`` is up (:attr:`time_up`), by
    the clock of whichever process saw it first: each process's own clock could
    let one leave the epoch while the others train on.

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
        #: The signal agreed on, once the processes have agreed to stop (0 before).
        self.signal = 0
        #: Whether the processes have agreed that the run's time limit is up.
        self.time_up = False

    def at_resume_point(self, requested: int, time_up: bool = False) -> bool:
        """True when the processes have agreed to stop for a signal at this resume point.

        Every process must call this at the same resume points. Whether they
        agreed here that the time is up is :attr:`time_up` (the run then stops as
        for ``should_stop``, held back by ``min_epochs``/``min_steps``; voting goes on).

        Args:
            requested: the signal this process got (0 or False: none; True counts as 1).
            time_up: whether this process's clock is past the run's ``max_time``.
        """
        self._points += 1
        if self._skip > 0:
            self._skip -= 1
            return False
        stop, interval = False, 1
        if self._pending is not None:
            stop_flag, negated_interval, time_up_flag = self._pending()
            self._pending = None
            stop, interval = bool(stop_flag), -negated_interval
            self.time_up = self.time_up or bool(time_up_flag)
            if stop:
                self.signal = stop_flag
        if stop:
            return True  # every process read the same result: none votes again
        # The maximum of the negated proposals is the smallest proposal: the
        # process with the longest resume points sets the pace.
        self._pending = self._agree_max([int(requested), -self._proposal(), int(time_up)])
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

"""Launchers: how the processes of a job are started, chosen apart from the strategy.

A launcher runs one of the Trainer's entry points (fit, validate, ...) as the
ranks of a job. Under torchrun or SLURM the ranks already exist and trainkit
launches nothing; otherwise, for a multi-process strategy:

- :class:`ScriptLauncher` (``strategy="ddp"``/``"fsdp"``/``"hybrid"``, whose
  ``launch_mode`` is ``"script"``, from a plain ``python train.py``): re-runs
  the same command N-1 times, each with torchrun's variables (``RANK``,
  ``WORLD_SIZE``, ...) set, and runs the entry point itself as rank 0. The new
  processes run the script from the top, reach the same ``Trainer(...)``, see
  the variables and join the group, exactly as under ``torchrun
  --nproc-per-node N``. The rendezvous is torch's env:// on 127.0.0.1 with a
  free port.
- :class:`~trainkit.launch.spawn.SpawnLauncher` (``strategy="ddp_spawn"``): runs
  the entry point in N new processes and hands rank 0's result back.

Building a launcher starts nothing: the processes start when the first entry
point runs.

A failure on any rank ends the whole job within seconds, saying which rank
failed: the ranks share collectives, so the others could only wait for it.
With :class:`ScriptLauncher`, rank 0 ends the workers when its entry point
raises, and a thread of rank 0 watches the workers (see :class:`WorkerWatch`).
See docs/fault-tolerance.md.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from trainkit.checkpoint.preemption import INTERRUPTED_EXIT_CODE, on_abort, signal_name
from trainkit.launch.environment import ClusterEnvironment
from trainkit.launch.outcome import LaunchOutcome, RankZeroReport

T = TypeVar("T")

#: How often rank 0 checks on its workers, in seconds.
POLL_S = 0.2
#: After a worker fails, how long rank 0's entry point may take to end by itself
#: (its collective fails once the worker's connections close) before the process
#: is ended: a thread cannot interrupt a blocked collective.
FAILURE_GRACE_S = 5.0
#: After rank 0 ends normally, how long its workers may take to end theirs.
FINISH_TIMEOUT_S = 60.0


def describe_exit(code: int) -> str:
    """How a process ended, in words.

    Args:
        code: its exit status (negative: the signal that ended it, as ``subprocess`` reports).

    Example:
        >>> describe_exit(1), describe_exit(130), describe_exit(-9)
        ('exit code 1', 'exit code 130: interrupted', 'ended by signal SIGKILL')
    """
    if code < 0:
        return f"ended by signal {signal_name(-code)}"
    return f"exit code {code}" + (": interrupted" if code == INTERRUPTED_EXIT_CODE else "")


#: Where :func:`free_port` draws from when the kernel's ephemeral range cannot be read.
_EPHEMERAL_DEFAULT = (32768, 60999)
#: The lowest port :func:`free_port` draws (below: well-known and registered services).
_LOWEST_DRAWN = 10000


def _ephemeral_range() -> tuple[int, int]:
    """The local ports the kernel gives outgoing connections and ``bind(port 0)``."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as file:
            low, high = (int(value) for value in file.read().split())
    except (OSError, ValueError):
        return _EPHEMERAL_DEFAULT
    return low, high


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port that is free on this machine right now, for a job's rendezvous.

    Drawn at random below the kernel's ephemeral range where that leaves room
    (on Linux by default 10000-32767): a port the kernel hands out for ``bind``
    to port 0 comes from the range it also gives every outgoing connection, so
    between this call and rank 0's listen any connection on the machine (another
    job's ranks reaching their own store) could take it, and rank 0 would fail
    with "address already in use". A port below that range is only taken by a
    process that asks for it by number. Drawn with the system's randomness, not
    Python's global generator: jobs seeded alike must not draw alike.
    """
    low, _ = _ephemeral_range()
    if low - _LOWEST_DRAWN >= 1000:
        draw = random.SystemRandom()
        for _ in range(100):
            port = draw.randrange(_LOWEST_DRAWN, low)
            if _bindable(port):
                return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Launcher(ABC):
    """Runs a Trainer entry point as the ranks of a job."""

    #: This process's place in the job when it runs as a rank itself (None: it does not).
    environment: ClusterEnvironment | None = None
    #: The processes it runs on this machine.
    num_processes: int = 1
    #: Lightning's name: whether it can start the ranks from an interactive session
    #: (a notebook): SpawnLauncher can, ScriptLauncher (which re-runs the command) cannot.
    is_interactive_compatible: bool = False

    @abstractmethod
    def launch(
        self, function: Callable[..., T], *args: Any, report: Callable[[], RankZeroReport]
    ) -> LaunchOutcome[T]:
        """Run ``function(*args)`` (a bound entry point of a Trainer) as the job's ranks.

        Args:
            function: the entry point's implementation.
            *args: its arguments.
            report: how the entry point's run ended, read from the Trainer of the
                process that ran it as rank 0, there, after it returned. Called only
                when that process is not this one (the caller's Trainer adopts it).

        Returns:
            What the function returned on rank 0, with rank 0's report if rank 0 ran elsewhere.
        """


class ScriptLauncher(Launcher):
    """Starts ranks 1..N-1 as copies of this command; this process is rank 0.

    Rank 0 looks after its workers: if its entry point raises, it ends them
    (they would wait for it in a collective); if a worker fails, a thread of
    rank 0 notices, ends the other workers and, unless rank 0's entry point
    ends by itself within :data:`FAILURE_GRACE_S`, ends rank 0 with status 1.
    Each case prints one line saying which rank failed; the failing rank's
    traceback is printed by that rank. A worker also never outlives rank 0
    (on Linux the kernel ends it when rank 0's process ends).

    Args:
        num_processes: N, the processes on this machine.

    Raises:
        RuntimeError: when there is no command to re-run (an interactive session
            or ``python -c``): checked when the launcher is built, before anything runs.
    """

    def __init__(self, num_processes: int) -> None:
        if not sys.argv or sys.argv[0] in ("", "-c") or "-c" in sys.orig_argv[1:2]:
            raise RuntimeError(
                f"devices={num_processes} with strategy='ddp' re-runs this program once per "
                "device, and an interactive session or `python -c` cannot be re-run. Put the "
                f"code in a script and run it with python or `torchrun --nproc-per-node "
                f"{num_processes}` (or use strategy='ddp_spawn' in a notebook)."
            )
        self.num_processes = num_processes
        self.command = [sys.executable, *sys.orig_argv[1:]]
        self.environment = ClusterEnvironment.local(0, num_processes, free_port())
        self._workers: list[subprocess.Popen[bytes]] = []
        self._watch: WorkerWatch | None = None

    def launch(
        self, function: Callable[..., T], *args: Any, report: Callable[[], RankZeroReport]
    ) -> LaunchOutcome[T]:
        if self._watch is None:  # once: later entry points run in the same job
            self._start_workers()
        assert self._watch is not None
        # This process is rank 0: its Trainer ran the entry point and has nothing to adopt.
        return LaunchOutcome(self._watch.run(function, *args))

    def _start_workers(self) -> None:
        assert self.environment is not None
        port = self.environment.master_port
        tie = parent_death_hook() if sys.platform == "linux" else None
        for rank in range(1, self.num_processes):
            variables = ClusterEnvironment.local(rank, self.num_processes, port).variables()
            self._workers.append(
                subprocess.Popen(self.command, env={**os.environ, **variables}, preexec_fn=tie)
            )
        self._watch = WorkerWatch(self._workers)
        on_abort(self._watch.end_workers)  # a second Ctrl-C on rank 0 ends them too
        atexit.register(self._watch.wait_at_exit)


class WorkerWatch:
    """Rank 0's view of the workers it started: runs entry points, notices failures.

    A thread polls the workers every :data:`POLL_S` seconds. A worker that ends
    with a status other than 0 (done) or 130 (stopped by Ctrl-C, which every rank
    agrees on) has failed: the thread says so in one line and ends the others.
    Rank 0's entry point, if it is running, is then waiting for the failed rank
    in a collective; the collective usually fails by itself once the worker's
    connections close, and the error ends the entry point as any error does.
    If it has not ended within :data:`FAILURE_GRACE_S` (a collective that waits
    on), the thread ends rank 0's process with status 1: nothing saved is lost,
    since every file trainkit writes is written atomically.
    """

    def __init__(self, workers: list[subprocess.Popen[bytes]]) -> None:
        self.workers = workers
        self._lock = threading.Lock()
        self._ended = False  # rank 0 ended the workers itself
        self._failure: str | None = None  # the line that said which rank failed
        self._worker_failed = False  # a worker failed: the job fails, whatever rank 0 did
        self._in_entry_point = threading.Event()
        self._entry_point_done = threading.Event()
        thread = threading.Thread(target=self._poll, name="trainkit-workers", daemon=True)
        thread.start()

    def run(self, function: Callable[..., T], *args: Any) -> T:
        """Run rank 0's part of an entry point; end the workers if it raises.

        Args:
            function: the entry point's implementation.
            *args: its arguments.

        Raises:
            RuntimeError: when a worker has failed before: the job cannot run on.
        """
        if self._failure is not None:
            raise RuntimeError(
                f"{self._failure.removeprefix('trainkit: ')} This job's other ranks are gone: "
                "start the program again (with ckpt_path='last' to resume)."
            )
        self._entry_point_done.clear()
        self._in_entry_point.set()
        try:
            return function(*args)
        except BaseException as error:
            self._rank_zero_failed(error)
            raise
        finally:
            self._in_entry_point.clear()
            self._entry_point_done.set()

    def end_workers(self) -> None:
        """Kill every worker still running (they may be blocked in a collective)."""
        self._ended = True
        for worker in self.workers:
            if worker.poll() is None:
                worker.kill()
        for worker in self.workers:
            worker.wait()

    def wait_at_exit(self) -> None:
        """At rank 0's exit: let the workers end their run, and end any that does not.

        The job then fails (rank 0 exits with status 1) if a worker had to be
        ended or failed after rank 0 had finished: its part of the run did not
        end as rank 0's did, and an exit status of 0 would hide that.
        """
        deadline = time.monotonic() + FINISH_TIMEOUT_S
        failed = False
        for rank, worker in enumerate(self.workers, start=1):
            try:
                worker.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                report(
                    f"rank {rank} did not end within {FINISH_TIMEOUT_S:.0f} s of rank 0's end; "
                    "ending it. The job fails: that rank had not finished its run."
                )
                worker.kill()
                worker.wait()
                failed = True
        with self._lock:
            late = None if self._ended or failed else self._failed_worker()
            if late is not None:
                report(
                    f"rank {late[0]} failed after rank 0 had finished ({describe_exit(late[1])}; "
                    "its traceback is above). The job fails."
                )
            failed = failed or late is not None or self._worker_failed
        if failed:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)

    def _failed_worker(self) -> tuple[int, int] | None:
        # (rank, status) of the first worker that ended with a failure status.
        for rank, worker in enumerate(self.workers, start=1):
            code = worker.poll()
            if code is not None and code not in (0, INTERRUPTED_EXIT_CODE):
                return rank, code
        return None

    def _rank_zero_failed(self, error: BaseException) -> None:
        # Rank 0's error may be the consequence of a worker's failure (a collective
        # whose peer is gone): name the worker then.
        with self._lock:
            if self._failure is None:
                # A Ctrl-C outside fit reached every rank: none is to blame.
                interrupted = isinstance(error, KeyboardInterrupt)
                deadline = time.monotonic() + (0.0 if interrupted else 1.0)
                failed = None if interrupted else self._failed_worker()
                while failed is None and time.monotonic() < deadline and self._any_running():
                    time.sleep(POLL_S / 4)
                    failed = self._failed_worker()
                if failed is not None:
                    self._report_worker(*failed)
                else:
                    what = "was interrupted" if interrupted else "failed"
                    others = range(1, len(self.workers) + 1)
                    self._failure = report(
                        f"rank 0 {what} ({type(error).__name__}); ending {name_ranks(others)} of "
                        "the job. Rank 0's traceback follows."
                    )
            self.end_workers()

    def _report_worker(self, rank: int, code: int) -> None:
        self._worker_failed = True
        others = [0, *(r for r in range(1, len(self.workers) + 1) if r != rank)]
        self._failure = report(
            f"rank {rank} failed ({describe_exit(code)}; its traceback is above); ending "
            f"{name_ranks(others)} of the job."
        )

    def _any_running(self) -> bool:
        return any(worker.poll() is None for worker in self.workers)

    def _poll(self) -> None:
        while self._any_running():
            time.sleep(POLL_S)
            with self._lock:
                failed = None if self._ended else self._failed_worker()
                if failed is None:
                    continue
                self._report_worker(*failed)
                self.end_workers()
            if self._in_entry_point.is_set() and not self._entry_point_done.wait(FAILURE_GRACE_S):
                report(f"rank 0 is still waiting for rank {failed[0]}; ending rank 0.")
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(1)
            return


def name_ranks(ranks: Iterable[int]) -> str:
    """Ranks in words, for messages.

    Args:
        ranks: the ranks.

    Example:
        >>> name_ranks([1]), name_ranks([0, 2, 3])
        ('rank 1', 'ranks 0, 2, 3')
    """
    listed = list(ranks)
    return f"rank {listed[0]}" if len(listed) == 1 else f"ranks {', '.join(map(str, listed))}"


def report(message: str) -> str:
    """Print ``trainkit: <message>`` to standard error at once; return the line.

    Args:
        message: what happened to the job.
    """
    line = f"trainkit: {message}"
    print(line, file=sys.stderr, flush=True)
    return line


def parent_death_hook() -> Callable[[], None] | None:
    """A function for ``Popen(preexec_fn=...)`` that ties the new process's life to this one.

    In the new worker, before it runs the command, it asks the kernel to end the
    worker when rank 0's process ends, however that happens (even SIGKILL).
    Linux only (None elsewhere). The C function is looked up here, in rank 0:
    the new process, forked from a process with threads, must not load libraries.
    """
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    set_parent_death_signal, kill = 1, int(signal.SIGKILL)  # PR_SET_PDEATHSIG

    def hook() -> None:
        prctl(set_parent_death_signal, kill)

    return hook

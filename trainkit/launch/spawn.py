"""Running a Trainer entry point in N new processes: ``strategy="ddp_spawn"``.

For code that cannot be re-run as a command (a notebook, an interactive
session), ``Trainer.fit`` itself starts the ranks with
``torch.multiprocessing``: the Trainer, the module and the data are sent to each
new process, which sets torchrun's variables (``RANK``, ``WORLD_SIZE``, ...) and
runs the same entry point as one rank of a DDP job. The calling process takes
no part in training; when the ranks are done, rank 0's report comes back to it
(a :class:`~trainkit.launch.outcome.LaunchOutcome`), and the caller's Trainer
adopts it: the trained weights go into the caller's module, and the counters,
metrics and callback states (``best_model_path``) into the caller's Trainer.

The new processes are fresh interpreters ("spawn"), so the module's class and
the dataset must be importable: define them in a ``.py`` file next to the
notebook and import them there. (Forking the calling process instead is not
offered: a process forked after torch has started its CPU thread pool or CUDA
can hang.)

If a rank fails, the caller says which in one line, ends the other ranks at
once (they would wait for it in a collective) and raises with the failing
rank's traceback. The ranks run in a process group of their own: a Ctrl-C (or
SIGTERM) reaches the caller, which passes it on to every rank exactly once, so
the ranks stop together through their stop vote (see ``trainkit.checkpoint.preemption``);
a second Ctrl-C ends the ranks at once.
"""

from __future__ import annotations

import atexit
import multiprocessing.connection
import os
import pickle
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import torch
import torch.multiprocessing as mp
from torch.multiprocessing.spawn import ProcessExitedException, ProcessRaisedException

from trainkit.checkpoint.preemption import INTERRUPTED_EXIT_CODE, SIGNALS
from trainkit.launch.environment import ClusterEnvironment
from trainkit.launch.launcher import (
    POLL_S,
    Launcher,
    describe_exit,
    free_port,
    name_ranks,
    parent_death_hook,
    report,
)
from trainkit.launch.outcome import LaunchOutcome, RankZeroReport
from trainkit.utilities.seed import capture_rng_states, restore_rng_states

T = TypeVar("T")


class SpawnLauncher(Launcher):
    """Runs a Trainer entry point (``fit``, ``validate``, ...) in ``num_processes`` new processes.

    Args:
        num_processes: the number of ranks to start on this machine.
    """

    #: It runs from a notebook (the module's class and the data importable, as above).
    is_interactive_compatible = True

    def __init__(self, num_processes: int) -> None:
        self.num_processes = num_processes

    def launch(
        self, function: Callable[..., T], *args: Any, report: Callable[[], RankZeroReport]
    ) -> LaunchOutcome[T]:
        """Run ``function(*args)`` as each rank; return rank 0's return value and report.

        Args:
            function: a bound entry point of a Trainer (its copies run in the new processes).
            *args: the entry point's arguments (the module first).
            report: how rank 0's run ended, read from rank 0's copy of the Trainer
                (a bound method of it, so that it travels with the Trainer).
        """
        outbox = Path(tempfile.mkdtemp(prefix="trainkit-spawn-"))
        try:
            # Plain pickle bytes, not objects: torch.multiprocessing would move the
            # module's tensors into memory shared by every rank, and each rank's
            # optimizer would then update the same weights. The ranks also start
            # from this process's random state, as code after Trainer(seed=...) would.
            payload = pickle.dumps((function, report, args, capture_rng_states()))
            with _ForwardedSignals() as signals:
                context = mp.start_processes(  # type: ignore[attr-defined,no-untyped-call]
                    _run_rank,
                    args=(self.num_processes, free_port(), payload, str(outbox), signals.on),
                    nprocs=self.num_processes,
                    start_method="spawn",
                    join=False,
                )
                signals.ranks = context.processes
                _wait_for_ranks(context, signals)
            outcome: LaunchOutcome[T] = torch.load(outbox / "result.pt", weights_only=False)
        finally:
            shutil.rmtree(outbox, ignore_errors=True)
        return outcome


class _ForwardedSignals:
    """While the ranks run, pass Ctrl-C and preemption signals on to them, once each.

    The ranks run in a process group of their own (when this is the main thread,
    the only place a signal handler can be set), so a terminal's Ctrl-C reaches
    this process only, and each rank gets it exactly once from here (a rank that
    got it twice would take it for a second Ctrl-C). A second Ctrl-C here ends
    the ranks at once.
    """

    def __init__(self) -> None:
        self.on = threading.current_thread() is threading.main_thread()
        self.ranks: list[Any] = []
        self.interrupts = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _ForwardedSignals:
        if self.on:
            for signum in (signal.SIGINT, *SIGNALS):
                self._previous[signum] = signal.signal(signum, self._forward)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT:
            self.interrupts += 1
            if self.interrupts >= 2:
                return  # _wait_for_ranks ends them
        for process in self.ranks:
            if process.is_alive():
                os.kill(process.pid, signum)


def _wait_for_ranks(context: Any, signals: _ForwardedSignals) -> None:
    """Wait until every rank has ended; end them all as soon as one fails, and raise.

    ``torch.multiprocessing``'s own wait ends the others with SIGTERM and waits
    30 s before killing them; a rank catches SIGTERM (preemption) and, blocked
    in a collective with the failed rank, cannot act on it. So they are killed.
    """
    processes = context.processes
    pending = {process.sentinel: rank for rank, process in enumerate(processes)}
    while pending:
        ready = multiprocessing.connection.wait(list(pending), timeout=POLL_S)
        if signals.interrupts >= 2:
            report("interrupted again: stopping the ranks now without saving (exit 130).")
            _kill(processes)
            raise SystemExit(INTERRUPTED_EXIT_CODE)
        for sentinel in ready:
            rank = pending.pop(sentinel)
            processes[rank].join()
            code = processes[rank].exitcode
            if code == 0:
                continue
            others = [r for r in range(len(processes)) if r != rank]
            ending = name_ranks(others)
            report(f"rank {rank} failed ({describe_exit(code)}); ending {ending} of the job.")
            _kill(processes)
            raise _failure(context, rank, code)


def _kill(processes: list[Any]) -> None:
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join()


def _failure(context: Any, rank: int, code: int) -> Exception:
    # The rank's traceback, which torch.multiprocessing writes to a file when
    # the rank's function raises.
    error_file = context.error_files[rank]
    pid = context.processes[rank].pid
    if os.access(error_file, os.R_OK):
        with open(error_file, "rb") as file:
            trace = pickle.load(file)
        message = f"\n\n-- Rank {rank} of the ddp_spawn job failed with this error:\n{trace}"
        return ProcessRaisedException(message, rank, pid)
    return ProcessExitedException(
        f"rank {rank} of the ddp_spawn job ended without a traceback ({describe_exit(code)})",
        error_index=rank,
        error_pid=pid,
        exit_code=code,
    )


def _run_rank(
    rank: int, world_size: int, port: int, payload: bytes, outbox: str, own_group: bool
) -> None:
    if own_group:  # signals come from the caller, once (see _ForwardedSignals)
        os.setpgrp()
    tie = parent_death_hook() if sys.platform == "linux" else None
    if tie is not None:
        tie()  # never outlive the caller, even one killed with SIGKILL
    # The strategy reads who this process is from these variables when it sets up.
    ClusterEnvironment.local(rank, world_size, port).export()
    try:
        function, report, args, rng = pickle.loads(payload)
    except AttributeError as error:
        raise RuntimeError(
            f"strategy='ddp_spawn' could not rebuild the Trainer's arguments in a new "
            f"process: {error}. Classes defined in a notebook cell or in `python -c` code "
            "cannot be imported by other processes; move the Module, DataModule and "
            "dataset classes to a .py file and import them."
        ) from error
    restore_rng_states(rng)
    # The entry point's implementation: this process is a rank, it launches nothing.
    value = function(*args)
    if rank == 0:
        # A file, not a pipe: the caller reads it only after every rank has exited.
        torch.save(LaunchOutcome(value, report()), Path(outbox, "result.pt"))
    _exit_now()


def _exit_now() -> None:
    """End this rank's process with status 0, without the interpreter's shutdown.

    The process group's backend threads may still be releasing finished
    collectives, which needs the interpreter; one caught by the shutdown aborts
    the process (SIGABRT) after its work is done. The exit handlers (trainkit's
    leaves the process group) still run, first.
    """
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)

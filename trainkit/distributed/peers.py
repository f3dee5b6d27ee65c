"""Naming the processes that stopped answering when a collective fails.

When a process of the job is gone (killed, its machine off) or cut off (its
network down), the others fail in their next collective with the backend's
transport error, which names at most an address (gloo's ``Connection closed by
peer [10.1.1.21]:9901``) and often nothing (``Timed out waiting 1800000ms for
recv operation to complete``). So after such a failure each process reports
itself in the job's store, and looks for a moment which processes reported: the
ones that did not are named. A process that cannot reach the store says so: its
own machine, or the store's, is cut off. A process that fails with an error of
its own (its step raised) says so in the store before it ends, so the others
name it at once as the one that failed first, instead of waiting for its report
and calling it silent.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

#: Texts of the transport errors a lost or unreachable process causes (gloo, NCCL, c10d).
TRANSPORT_ERRORS = (
    "Connection closed by peer",
    "Connection reset by peer",
    "Timed out waiting",
    "Read error",
    "Write error",
    "Broken pipe",
    "Connection refused",
    "NCCL communicator was aborted",
    "remote process exited",
)

#: How long a failing process waits for the others to report (they fail at nearly
#: the same moment: every process of the collective waits on the lost one).
REPORT_WAIT_S = 2.0

#: How long a process failing with its own error tries to say so in the store.
OWN_FAILURE_WAIT_S = 1.0

#: Which run of the process group this is (:func:`begin_run`): the store outlives
#: a run, and what one run's processes said must not be read as the next run's.
_run = 0


def begin_run() -> None:
    """A new run (fit, validate, ...) of the process group starts in this process.

    Every process of the group calls it at the same point of the same runs, so
    their counts agree without a word between them.
    """
    global _run
    _run += 1


def _key(rank: int) -> str:
    """Where process ``rank`` reports in this run: empty when its collective failed too,
    else the error of its own that it failed with."""
    return f"trainkit/peers/{_run}/{rank}"


def is_transport_error(error: BaseException) -> bool:
    """Whether ``error`` (or an error it was raised from) is a lost connection or a timeout.

    Args:
        error: what a collective, or the step around it, raised.

    Example:
        >>> is_transport_error(RuntimeError("[pair.cc:561] Connection closed by peer [10.0.0.2]:9"))
        True
        >>> is_transport_error(ValueError("Connection closed by peer"))
        False
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        # torch's DistBackendError and DistNetworkError are RuntimeErrors.
        if isinstance(current, RuntimeError) and any(t in str(current) for t in TRANSPORT_ERRORS):
            return True
        current = current.__cause__ or current.__context__
    return False


def name_silent_peers(
    error: BaseException,
    store: Any,
    rank: int,
    world_size: int,
    store_address: str,
    wait_s: float = REPORT_WAIT_S,
) -> str:
    """Report this process in ``store``, wait for the others', and say who did not report.

    Args:
        error: the transport error this process failed with.
        store: the job's store (the default process group's).
        rank: this process's global rank.
        world_size: the number of processes.
        store_address: where the store is, for the message (``HOST:PORT``).
        wait_s: how long to wait for the other processes' reports.

    Returns:
        One line for the user, naming the ranks that stopped answering (or that the
        store itself does not answer).
    """
    text = str(error).strip().splitlines()
    detail = text[0] if text else type(error).__name__
    start = f"trainkit: rank {rank} of {world_size} failed in a collective ({detail})"
    # The store's calls can block far longer than their timeout on a dead network
    # (the client retries): ask it from a thread, and give up on it after a while.
    answer: list[tuple[list[int], dict[int, str]]] = []

    def ask() -> None:
        try:
            store.set_timeout(timedelta(seconds=wait_s))
            store.set(_key(rank), "")
            missing = [other for other in range(world_size) if other != rank]
            failed: dict[int, str] = {}
            deadline = time.monotonic() + wait_s
            while missing and time.monotonic() < deadline:
                for other in [o for o in missing if store.check([_key(o)])]:
                    missing.remove(other)
                    if own_error := store.get(_key(other)).decode(errors="replace"):
                        failed[other] = own_error
                if missing:
                    time.sleep(0.1)
        except Exception:
            # A store that fails is the answer (no `answer`: the message below says
            # so), not a second traceback from this thread above the user's line.
            return
        answer.append((missing, failed))

    asking = threading.Thread(target=ask, name="trainkit-peers", daemon=True)
    asking.start()
    asking.join(timeout=2 * wait_s + 1)
    if not answer:  # the store failed or did not answer in time
        return (
            f"{start}: the other processes stopped answering, and so does the job's store at "
            f"{store_address} (rank 0's machine): this machine, or rank 0's, is cut off from "
            "the network or gone."
        )
    missing, failed = answer[0]
    said = []
    if failed:
        first = ", ".join(f"rank {other} with {error}" for other, error in sorted(failed.items()))
        where = "its traceback is in its" if len(failed) == 1 else "their tracebacks are in their"
        said.append(f"failed first: {first} ({where} output)")
    if missing:
        named = ", ".join(map(str, missing))
        said.append(
            f"rank{'s' if len(missing) > 1 else ''} {named} stopped answering (no report "
            f"within {wait_s:.0f} s of this failure): gone, or cut off from this machine"
        )
    if not said:
        return (
            f"{start}; every other process is still answering: see their errors above for "
            "the cause."
        )
    return f"{start}: {'; '.join(said)}."


def report_own_failure(error: BaseException, store: Any, rank: int) -> None:
    """Say in ``store`` that this process failed with ``error``, its own (not a peer's loss).

    The other processes, whose collectives then fail, name it at once as the one that
    failed first (:func:`name_silent_peers`). Never raises, and gives up after
    :data:`OWN_FAILURE_WAIT_S` on a store that does not answer.

    Args:
        error: what ended the run in this process.
        store: the job's store (the default process group's).
        rank: this process's global rank.
    """
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    if len(text) > 200:
        text = text[:197] + "..."

    key = _key(rank)

    def tell() -> None:
        try:
            # The process may go on (a caller that catches the error): its store
            # keeps the timeout it had.
            before = store.timeout
            store.set_timeout(timedelta(seconds=OWN_FAILURE_WAIT_S))
            try:
                store.set(key, text)
            finally:
                store.set_timeout(before)
        except Exception:
            return  # the store is gone too: the others will name this process as silent

    telling = threading.Thread(target=tell, name="trainkit-failed", daemon=True)
    telling.start()
    telling.join(timeout=OWN_FAILURE_WAIT_S + 0.5)


def describe_lost_peers(
    exception: BaseException, rank: int, world_size: int, where: str
) -> str | None:
    """The line naming the processes that stopped answering, if ``exception`` is that.

    A collective failed because a process is gone or cut off: the backend's error
    names no rank (often no address). None when it is another error, or in a
    single process.

    Args:
        exception: what ended the run.
        rank: this process's global rank.
        world_size: the number of processes.
        where: the job's store address, named if it does not answer either.
    """
    import torch.distributed as dist

    if not dist.is_initialized() or world_size < 2:
        return None
    try:
        store = dist.distributed_c10d._get_default_store()
    except (RuntimeError, ValueError):
        return None
    if not is_transport_error(exception):
        # An error of its own; not an exit or a Ctrl-C, which every process takes
        # together, and whose end need not wait for a store that may be gone.
        if isinstance(exception, Exception):
            report_own_failure(exception, store, rank)
        return None
    return name_silent_peers(exception, store, rank, world_size, where)

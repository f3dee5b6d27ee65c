"""After a failed collective, the processes that did not report in the store are named."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
import torch.distributed as dist

from trainkit.distributed.peers import (
    begin_run,
    is_transport_error,
    name_silent_peers,
    report_own_failure,
)

TIMEOUT = RuntimeError("[unbound_buffer.cc:78] Timed out waiting 20000ms for recv operation")


def _fails_too(
    store: dist.Store, rank: int, world_size: int, said: list[str] | None = None
) -> threading.Thread:
    """Rank ``rank``'s collective fails at the same moment: it reports itself too
    (and puts the line it prints in ``said``)."""
    lines = [] if said is None else said
    other = threading.Thread(
        target=lambda: lines.append(
            name_silent_peers(TIMEOUT, store, rank, world_size, "a:1", 0.3)
        ),
        daemon=True,
    )
    other.start()
    return other


def test_the_ranks_that_did_not_report_are_named() -> None:
    store = dist.HashStore()
    said_by_1: list[str] = []
    rank_1 = _fails_too(store, 1, 4, said_by_1)  # rank 1 failed too and reported; 2, 3 did not
    line = name_silent_peers(TIMEOUT, store, 0, 4, "10.0.0.1:29400", wait_s=0.3)
    assert line.startswith("trainkit: rank 0 of 4 failed in a collective ([unbound_buffer")
    assert line.endswith(
        "ranks 2, 3 stopped answering (no report within 0 s of this failure)"
        ": gone, or cut off from this machine."
    )
    assert "rank 1" not in line.split(")", 1)[1]
    rank_1.join()  # and this process reported itself: rank 1 did not name it
    assert said_by_1 and "): ranks 2, 3 stopped answering" in said_by_1[0]


def test_every_rank_reporting_points_at_their_errors() -> None:
    store = dist.HashStore()
    _fails_too(store, 0, 2)
    line = name_silent_peers(TIMEOUT, store, 1, 2, "10.0.0.1:29400", wait_s=5.0)
    assert "every other process is still answering" in line


def test_a_rank_that_failed_with_its_own_error_is_named_at_once_with_it() -> None:
    store = dist.HashStore()
    report_own_failure(RuntimeError("deliberate failure on rank 1\nmore"), store, 1)
    start = time.monotonic()
    line = name_silent_peers(TIMEOUT, store, 0, 2, "10.0.0.1:29400", wait_s=5.0)
    assert time.monotonic() - start < 2.5  # not the 5 s wait for a report
    assert line.endswith(
        "failed first: rank 1 with RuntimeError: deliberate failure on rank 1 "
        "(its traceback is in its output)."
    )


def test_one_failed_and_one_silent_are_both_named() -> None:
    store = dist.HashStore()
    report_own_failure(ValueError("bad batch"), store, 2)
    line = name_silent_peers(TIMEOUT, store, 0, 3, "10.0.0.1:29400", wait_s=0.3)
    assert (
        "failed first: rank 2 with ValueError: bad batch (its traceback is in its output)" in line
    )
    assert line.endswith(
        "; rank 1 stopped answering (no report within 0 s of this failure)"
        ": gone, or cut off from this machine."
    )


def test_two_that_failed_are_named_with_their_errors() -> None:
    store = dist.HashStore()
    report_own_failure(ValueError("bad batch"), store, 1)
    report_own_failure(KeyError("images"), store, 2)
    line = name_silent_peers(TIMEOUT, store, 0, 3, "10.0.0.1:29400", wait_s=5.0)
    assert line.endswith(
        "failed first: rank 1 with ValueError: bad batch, rank 2 with KeyError: 'images' "
        "(their tracebacks are in their output)."
    )


def test_what_an_earlier_run_said_is_not_read_in_the_next() -> None:
    store = dist.HashStore()
    report_own_failure(RuntimeError("the first fit failed"), store, 1)
    _fails_too(store, 2, 3).join()
    begin_run()  # as every rank does when its next run sets up
    line = name_silent_peers(TIMEOUT, store, 0, 3, "10.0.0.1:29400", wait_s=0.3)
    assert "the first fit" not in line
    assert "ranks 1, 2 stopped answering" in line


def test_saying_its_own_failure_keeps_the_store_s_timeout_and_never_raises() -> None:
    store = dist.HashStore()
    store.set_timeout(timedelta(seconds=42))
    report_own_failure(RuntimeError("x"), store, 0)
    assert store.timeout == timedelta(seconds=42)
    start = time.monotonic()
    report_own_failure(RuntimeError("x"), Unreachable(), 0)  # a store that is gone: no error
    assert time.monotonic() - start < 2.0


class Unreachable:
    """A store whose machine is cut off: every call fails."""

    timeout = timedelta(seconds=300)

    def set_timeout(self, timeout: Any) -> None:
        pass

    def set(self, key: str, value: str) -> None:
        raise RuntimeError("Broken pipe")


def test_an_unreachable_store_is_named_by_its_address(monkeypatch: pytest.MonkeyPatch) -> None:
    escaped: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args.exc_value))
    line = name_silent_peers(TIMEOUT, Unreachable(), 1, 2, "10.0.0.1:29400", wait_s=0.3)
    assert "stopped answering, and so does the job's store at 10.0.0.1:29400" in line
    # The store's failure is said in that one line, not as a thread's traceback besides.
    assert escaped == []


def test_only_transport_errors_are_explained() -> None:
    assert is_transport_error(TIMEOUT)
    wrapped = ValueError("step failed")
    wrapped.__cause__ = RuntimeError("Connection closed by peer [10.0.0.2]:9901")
    assert is_transport_error(wrapped)
    assert not is_transport_error(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))

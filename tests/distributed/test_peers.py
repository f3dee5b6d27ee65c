"""After a failed collective, the processes that did not report in the store are named."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch.distributed as dist

from trainkit.distributed.peers import is_transport_error, name_silent_peers

TIMEOUT = RuntimeError("[unbound_buffer.cc:78] Timed out waiting 20000ms for recv operation")


def test_the_ranks_that_did_not_report_are_named() -> None:
    store = dist.HashStore()
    store.set("trainkit/answering/1", "1")  # rank 1 failed too and reported; 2 and 3 did not
    line = name_silent_peers(TIMEOUT, store, 0, 4, "10.0.0.1:29400", wait_s=0.3)
    assert line.startswith("trainkit: rank 0 of 4 failed in a collective ([unbound_buffer")
    assert "ranks 2, 3 stopped answering" in line
    assert store.check(["trainkit/answering/0"])  # and this process reported itself


def test_every_rank_reporting_points_at_their_errors() -> None:
    store = dist.HashStore()
    store.set("trainkit/answering/0", "1")
    line = name_silent_peers(TIMEOUT, store, 1, 2, "10.0.0.1:29400", wait_s=0.3)
    assert "every other process is still answering" in line


class Unreachable:
    """A store whose machine is cut off: every call fails."""

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

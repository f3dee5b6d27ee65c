"""Tests for the TensorBoard event file: when noted events reach the disk, and their framing."""

from __future__ import annotations

import errno
import itertools
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from tensorboard.compat.proto import summary_pb2
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as reference_crc

from tests.helpers import event_file_events
from trainkit.loggers import _event_file
from trainkit.loggers._event_file import EventFile, masked_crc32c


def _scalar_events(path: str) -> list[tuple[int, dict[str, float]]]:
    return [
        (event.step, {value.tag: value.simple_value for value in event.summary.value})
        for event in event_file_events(path)
        if event.HasField("summary")
    ]


def test_masked_crc32c_is_tensorboards_for_every_length() -> None:
    generator = random.Random(0)
    for size in [*range(0, 70), 255, 256, 1000, 4099]:
        data = bytes(generator.getrandbits(8) for _ in range(size))
        assert masked_crc32c(data) == reference_crc(data), size


def test_noted_events_are_written_on_flush_in_order_at_the_time_they_were_noted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = EventFile(str(tmp_path), flush_seconds=3600)
    clock = itertools.count(1000)
    monkeypatch.setattr(time, "time", lambda: float(next(clock)))
    session = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="_hparams_/x")])
    events.add_summary(session, step=0)
    events.add_scalars({"loss": 0.5, "epoch": 0}, step=10)
    events.add_scalars({"loss": 0.25}, step=20)
    assert _scalar_events(events.path) == []  # noted, not written

    events.flush()
    written = event_file_events(events.path)
    assert [event.file_version for event in written[:1]] == ["brain.Event:2"]
    assert [(event.step, event.wall_time) for event in written[1:]] == [
        (0, 1000.0),
        (10, 1001.0),
        (20, 1002.0),
    ]
    assert written[1].summary.value[0].tag == "_hparams_/x"
    assert _scalar_events(events.path)[1:] == [
        (10, {"loss": 0.5, "epoch": 0.0}),
        (20, {"loss": 0.25}),
    ]
    events.close()


def test_an_event_waits_at_most_flush_seconds_and_close_writes_the_rest(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    at_once = EventFile(str(tmp_path / "a"), flush_seconds=0.0)
    at_once.add_scalars({"loss": 1.0}, step=1)
    assert _scalar_events(at_once.path) == [(1, {"loss": 1.0})]  # on disk, no flush called
    at_once.close()

    (tmp_path / "b").mkdir()
    waiting = EventFile(str(tmp_path / "b"), flush_seconds=3600)
    waiting.add_scalars({"loss": 2.0}, step=2)
    assert _scalar_events(waiting.path) == []
    waiting.close()
    assert _scalar_events(waiting.path) == [(2, {"loss": 2.0})]


def test_at_most_max_pending_events_wait(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_event_file, "MAX_PENDING", 3)
    events = EventFile(str(tmp_path), flush_seconds=3600)
    for step in range(5):
        events.add_scalars({"loss": float(step)}, step=step)
    # The third event wrote the first three; the last two wait.
    assert [step for step, _ in _scalar_events(events.path)] == [0, 1, 2]
    events.close()
    assert [step for step, _ in _scalar_events(events.path)] == [0, 1, 2, 3, 4]


def test_close_closes_the_file_also_when_the_last_events_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = EventFile(str(tmp_path), flush_seconds=3600)
    events.add_scalars({"loss": 1.0}, step=1)

    def disk_full(file: Any, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_event_file, "_write_all", disk_full)
    with pytest.raises(OSError, match="No space left"):
        events.close()
    assert events._file.closed  # no open file left behind by a failed run


def _run(script: str) -> None:
    subprocess.run([sys.executable, "-c", textwrap.dedent(script)], check=True, timeout=120)


def test_events_of_a_logger_nobody_finalizes_reach_the_file_at_exit(tmp_path: Path) -> None:
    _run(
        f"""
        from trainkit.loggers import TensorBoardLogger
        logger = TensorBoardLogger({str(tmp_path)!r})
        logger.log_metrics({{"loss": 0.5}}, step=3)
        """
    )
    (path,) = tmp_path.glob("**/events.out.tfevents.*")
    assert _scalar_events(str(path)) == [(3, {"loss": 0.5})]


def test_a_forked_child_does_not_write_its_parents_noted_events(tmp_path: Path) -> None:
    # The child exits normally (running its exit handlers) while the parent's event
    # is still only noted: the event must reach the file once, from the parent.
    _run(
        f"""
        import os
        from trainkit.loggers._event_file import EventFile
        events = EventFile({str(tmp_path)!r}, flush_seconds=3600)
        events.add_scalars({{"loss": 0.5}}, step=3)
        pid = os.fork()
        if pid == 0:
            raise SystemExit(0)
        assert os.waitpid(pid, 0)[1] == 0
        events.close()
        """
    )
    (path,) = tmp_path.glob("events.out.tfevents.*")
    written = event_file_events(str(path))
    assert [event.file_version for event in written] == ["brain.Event:2", ""]
    assert _scalar_events(str(path)) == [(3, {"loss": 0.5})]

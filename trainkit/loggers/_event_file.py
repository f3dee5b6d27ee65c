"""A TensorBoard event file written in the calling thread: events noted, then written together.

TensorBoard's own writer appends each record from a background thread by
opening and closing the file every time; at one record per scalar that cost
shows up in the training loop. Here all of a step's scalars go into one event,
and a call only notes the event: events are encoded and written together on
``flush()``, or at the first call after ``flush_seconds`` have passed since the
last flush. Encoding a few events in a row costs a fraction of encoding each
between training steps, whose work has pushed the encoder out of the caches.

The format is TensorBoard's (TFRecord framing of ``Event`` protos, each length
and payload followed by its masked CRC-32C), so TensorBoard and its
``EventAccumulator`` read these files like any other. The checksum is computed
here eight bytes at a time (tensorboard's fallback without TensorFlow goes byte
by byte, and was most of the cost of writing an event).
"""

from __future__ import annotations

import os
import socket
import struct
import time
import weakref
from collections.abc import Mapping
from functools import cache
from io import FileIO
from typing import Any

#: CRC-32C (Castagnoli), the reflected form of its polynomial.
_CASTAGNOLI = 0x82F63B78
_MASK32 = 0xFFFFFFFF
#: Events noted before they are written at the latest (bounds the memory they hold).
MAX_PENDING = 1000
#: How long a noted event may wait, by default, before it is written.
FLUSH_SECONDS = 5.0


class EventFile:
    """Appends TensorBoard events to a new file in ``log_dir``, or to ``path`` again.

    Args:
        log_dir: the folder (it must exist).
        flush_seconds: how long a noted event may wait before it is written (checked
            when the next one is noted; ``flush()`` and ``close()`` write at once).
        path: an event file this process wrote before, to append to (a logger
            reopened after ``finalize`` keeps one file per run folder); None
            starts a new file.
    """

    def __init__(
        self, log_dir: str, flush_seconds: float = FLUSH_SECONDS, path: str | None = None
    ) -> None:
        # The protos come with tensorboard, a required dependency; imported here so
        # that `import trainkit` stays cheap.
        from tensorboard.compat.proto import event_pb2, summary_pb2

        # time_ns and the pid keep two writers (even in one process) off the same file.
        name = f"events.out.tfevents.{time.time_ns()}.{socket.gethostname()}.{os.getpid()}"
        self.path = path if path is not None else os.path.join(log_dir, name)
        # Unbuffered: the noted events are the only buffer (a forked child inherits
        # no unwritten bytes), and each flush is one write of all of them.
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 (closed in close())
        self._flush_seconds = flush_seconds
        self._last_flush = time.monotonic()
        # Events noted and not yet written: (wall time, step, tag -> value or a Summary).
        self._pending: list[tuple[float, int, Any]] = []
        self._protos = (event_pb2, summary_pb2)
        if self._file.tell() == 0:  # a file starts with its version record, once
            version = event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2")
            _write_all(self._file, _record(version))
        # close() runs this once; so do garbage collection and a normal interpreter
        # exit, so that a logger nobody finalizes still leaves its events in the file.
        self._closer = weakref.finalize(
            self, _close, self._file, self._pending, self._protos, os.getpid()
        )

    def add_scalars(self, values: Mapping[str, float], step: int) -> None:
        """Note every value as a scalar at ``step``, in one event.

        Args:
            values: tag to value.
            step: the global step.
        """
        self._note(step, {tag: float(value) for tag, value in values.items()})

    def add_summary(self, summary: Any, step: int = 0) -> None:
        """Note a ``Summary`` proto (for example the HParams plugin's) at ``step``.

        Args:
            summary: a ``tensorboard.compat.proto.summary_pb2.Summary``.
            step: the global step.
        """
        self._note(step, summary)

    def flush(self) -> None:
        """Write the noted events to the file."""
        _write_pending(self._file, self._pending, self._protos)
        self._last_flush = time.monotonic()

    def close(self) -> None:
        """Write the noted events and close the file (again: nothing)."""
        self._closer()

    def _note(self, step: int, content: Any) -> None:
        pending = self._pending
        pending.append((time.time(), step, content))  # the event's time is the call's
        if (
            len(pending) >= MAX_PENDING
            or time.monotonic() - self._last_flush >= self._flush_seconds
        ):
            self.flush()


def _write_pending(file: FileIO, pending: list[tuple[float, int, Any]], protos: Any) -> None:
    """Encode the noted events and write them, in order, in one write; the list is emptied."""
    if not pending:
        return
    event_pb2, summary_pb2 = protos
    value = summary_pb2.Summary.Value
    records = []
    for wall_time, step, content in pending:
        summary = content
        if isinstance(content, dict):
            summary = summary_pb2.Summary(
                value=[value(tag=tag, simple_value=v) for tag, v in content.items()]
            )
        records.append(_record(event_pb2.Event(wall_time=wall_time, step=step, summary=summary)))
    pending.clear()  # a failed write below drops them, as a failed buffered write did
    _write_all(file, b"".join(records))


def _close(
    file: FileIO, pending: list[tuple[float, int, Any]], protos: Any, owner_pid: int
) -> None:
    """Write the noted events and close ``file``: once, from the process that opened it."""
    if file.closed:
        return
    try:
        if os.getpid() == owner_pid:  # a forked child never writes its parent's events
            _write_pending(file, pending, protos)
    finally:  # closed even when the disk refused the last events
        file.close()


def _record(event: Any) -> bytes:
    """``event`` in TFRecord framing."""
    data: bytes = event.SerializeToString()
    return _framed_length(len(data)) + data + struct.pack("<I", masked_crc32c(data))


def _write_all(file: FileIO, data: bytes) -> None:
    """Write all of ``data`` (an unbuffered file may take a part at a time)."""
    view = memoryview(data)
    while view:
        view = view[file.write(view) :]


@cache
def _framed_length(size: int) -> bytes:
    """A record's length and its masked CRC (events of one run have few distinct sizes)."""
    header = struct.pack("<Q", size)
    return header + struct.pack("<I", masked_crc32c(header))


@cache
def _crc_tables() -> tuple[tuple[int, ...], ...]:
    """Eight 256-entry tables: table k advances a byte's CRC by k more zero bytes."""
    first = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (_CASTAGNOLI if crc & 1 else 0)
        first.append(crc)
    tables = [first]
    for _ in range(7):
        previous = tables[-1]
        tables.append([(previous[i] >> 8) ^ first[previous[i] & 0xFF] for i in range(256)])
    return tuple(tuple(table) for table in tables)


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C of ``data``, as TFRecord framing stores it.

    Args:
        data: the bytes to check.
    """
    t0, t1, t2, t3, t4, t5, t6, t7 = _crc_tables()
    crc = _MASK32
    whole = len(data) - len(data) % 8
    for low, high in struct.iter_unpack("<II", data[:whole]):
        low ^= crc
        crc = (
            t7[low & 0xFF]
            ^ t6[(low >> 8) & 0xFF]
            ^ t5[(low >> 16) & 0xFF]
            ^ t4[low >> 24]
            ^ t3[high & 0xFF]
            ^ t2[(high >> 8) & 0xFF]
            ^ t1[(high >> 16) & 0xFF]
            ^ t0[high >> 24]
        )
    for byte in data[whole:]:
        crc = t0[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= _MASK32
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & _MASK32

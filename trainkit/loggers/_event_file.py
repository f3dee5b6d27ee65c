"""A TensorBoard event file written in the calling thread, buffered, one record per call.

TensorBoard's own writer appends each record from a background thread by
opening and closing the file every time; at one record per scalar that cost
shows up in the training loop. Here all of a step's scalars go into one event,
records accumulate in a buffered file, and the buffer reaches the disk on
``flush()`` or when ``flush_seconds`` have passed since the last flush.

The format is TensorBoard's (TFRecord framing of ``Event`` protos), so
TensorBoard and its ``EventAccumulator`` read these files like any other.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Mapping
from typing import Any


class EventFile:
    """Appends TensorBoard events to a new file in ``log_dir``, or to ``path`` again.

    Args:
        log_dir: the folder (it must exist).
        flush_seconds: longest time records may wait in the buffer.
        path: an event file this process wrote before, to append to (a logger
            reopened after ``finalize`` keeps one file per run folder); None
            starts a new file.
    """

    def __init__(self, log_dir: str, flush_seconds: float = 5.0, path: str | None = None) -> None:
        # Protos and the CRC come with tensorboard, a required dependency; imported
        # here so that `import trainkit` stays cheap.
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

        self._event_pb2, self._summary_pb2, self._crc = event_pb2, summary_pb2, masked_crc32c
        # time_ns and the pid keep two writers (even in one process) off the same file.
        name = f"events.out.tfevents.{time.time_ns()}.{socket.gethostname()}.{os.getpid()}"
        self.path = path if path is not None else os.path.join(log_dir, name)
        self._file = open(self.path, "ab")  # noqa: SIM115 (closed in close())
        self._flush_seconds = flush_seconds
        self._last_flush = time.monotonic()
        if self._file.tell() == 0:  # a file starts with its version record, once
            self._write_event(
                self._event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2")
            )

    def add_scalars(self, values: Mapping[str, float], step: int) -> None:
        """Write every value as a scalar at ``step``, in one event.

        Args:
            values: tag to value.
            step: the global step.
        """
        summary = self._summary_pb2.Summary(
            value=[
                self._summary_pb2.Summary.Value(tag=tag, simple_value=float(value))
                for tag, value in values.items()
            ]
        )
        self.add_summary(summary, step)

    def add_summary(self, summary: Any, step: int = 0) -> None:
        """Write a ``Summary`` proto (for example the HParams plugin's) at ``step``.

        Args:
            summary: a ``tensorboard.compat.proto.summary_pb2.Summary``.
            step: the global step.
        """
        self._write_event(self._event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def flush(self) -> None:
        """Write buffered records to the file."""
        self._file.flush()
        self._last_flush = time.monotonic()

    def close(self) -> None:
        """Flush and close the file."""
        if not self._file.closed:
            self._file.close()

    def _write_event(self, event: Any) -> None:
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        crc = self._crc
        self._file.write(
            header + struct.pack("<I", crc(header)) + data + struct.pack("<I", crc(data))
        )
        if time.monotonic() - self._last_flush >= self._flush_seconds:
            self.flush()

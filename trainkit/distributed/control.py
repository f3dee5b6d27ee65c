"""trainkit's own messages between processes, kept apart from the user's collectives.

The stop decisions, the preemption vote and the reduction of ``sync_dist``
values are trainkit's control traffic. Two things go wrong when it shares the
user's process group: a message pairs with an unrelated collective of another
process (a metric reduction on one rank paired with the stop decision on the
other makes that rank read a stop that nobody decided, and exit 0), and a
mismatch surfaces as a transport error that names nothing.

So the control traffic has its own gloo group, and every message has one
shape: each process sends a fixed-size record of where it is (a label such as
"the stop decision after validation") and a few integers, and receives every
process's record. When the labels differ, the processes reached different
points of the program; each raises :class:`CollectiveMismatchError` naming
what every process was doing — no process reads another's message as its own.
Waiting too long (the process group's timeout) raises the same error, naming
the point this process waited at.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

# One record: [label digest, label length, payload count, payload..., label bytes...].
PAYLOAD_SLOTS = 8
LABEL_BYTES = 480
_HEADER = 3
SLOTS = _HEADER + PAYLOAD_SLOTS + LABEL_BYTES // 8

_SYNC_DIST_ADVICE = (
    " A value logged with self.log(..., sync_dist=True) is reduced across processes, so "
    "every process must log it at the same point: log it on every process, or log it from "
    "one process with rank_zero_only=True and without sync_dist=True."
)

_BARRIER_ADVICE = (
    " Every process must reach a barrier (trainer.strategy.barrier) at the same point: "
    "one reached under a condition some processes do not meet (trainer.is_global_zero, "
    "say) is waited at forever."
)


class CollectiveMismatchError(RuntimeError):
    """The processes of a job reached different synchronisation points (or one never came)."""


class ControlChannel:
    """Labelled exchanges over a process group reserved for trainkit's control traffic.

    Args:
        group: the gloo group the records travel on (nobody else may use it).
        rank: this process's rank in ``group``.
        world_size: the number of processes in ``group``.
    """

    def __init__(self, group: Any, rank: int, world_size: int) -> None:
        self._group = group
        self._rank = rank
        self._world_size = world_size

    @classmethod
    def create(cls, timeout: Any) -> ControlChannel:
        """A new channel over every process of the default group (a collective call).

        Args:
            timeout: how long an exchange may wait for the other processes.
        """
        group = dist.new_group(backend="gloo", timeout=timeout)
        return cls(group, dist.get_rank(), dist.get_world_size())

    def exchange(self, label: str, payload: Sequence[int] = ()) -> list[list[int]]:
        """Send this process's record and return every process's payload, by rank.

        Args:
            label: where this process is, in words (every process must pass the same).
            payload: up to :data:`PAYLOAD_SLOTS` integers.

        Raises:
            CollectiveMismatchError: the processes passed different labels, or
                one did not come within the group's timeout.
        """
        return self.start(label, payload)()

    def start(self, label: str, payload: Sequence[int] = ()) -> Callable[[], list[list[int]]]:
        """Like :meth:`exchange`, without waiting: the returned function waits and checks."""
        record = _encode(label, payload)
        gathered = [torch.empty_like(record) for _ in range(self._world_size)]
        work = dist.all_gather(gathered, record, group=self._group, async_op=True)

        def result() -> list[list[int]]:
            try:
                work.wait()
            except RuntimeError as error:
                raise CollectiveMismatchError(
                    f"trainkit: process {self._rank} waited at {label} and the other "
                    f"processes did not join ({_first_line(error)}). If a process failed, "
                    "its error is shown above; otherwise the processes reached different "
                    f"points of the program.{_advice([label])}"
                ) from error
            return self._check(label, gathered)

        return result

    def _check(self, label: str, gathered: list[torch.Tensor]) -> list[list[int]]:
        records = [_decode(record) for record in gathered]
        if all(digest == records[0][0] for digest, _, _ in records):
            return [payload for _, _, payload in records]
        places = "; ".join(f"process {rank} at {text}" for rank, (_, text, _) in enumerate(records))
        raise CollectiveMismatchError(
            f"trainkit: the processes reached different synchronisation points: {places}."
            f"{_advice([text for _, text, _ in records])}"
        )


def _encode(label: str, payload: Sequence[int]) -> torch.Tensor:
    if len(payload) > PAYLOAD_SLOTS:
        raise ValueError(f"a control record holds at most {PAYLOAD_SLOTS} integers")
    raw = label.encode("utf-8")
    digest = int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little", signed=True)
    text = raw[:LABEL_BYTES].ljust(LABEL_BYTES, b"\0")
    record = torch.zeros(SLOTS, dtype=torch.int64)
    record[0], record[1], record[2] = digest, len(raw), len(payload)
    record[_HEADER : _HEADER + len(payload)] = torch.tensor(list(payload), dtype=torch.int64)
    record[_HEADER + PAYLOAD_SLOTS :] = torch.frombuffer(bytearray(text), dtype=torch.int64)
    return record


def _decode(record: torch.Tensor) -> tuple[int, str, list[int]]:
    values = record.tolist()
    digest, length, count = values[0], values[1], values[2]
    raw = record[_HEADER + PAYLOAD_SLOTS :].numpy().tobytes()[: min(length, LABEL_BYTES)]
    text = raw.decode("utf-8", errors="replace") + ("..." if length > LABEL_BYTES else "")
    return digest, text, values[_HEADER : _HEADER + count]


def _advice(labels: list[str]) -> str:
    if any(label.startswith("the barrier") for label in labels):
        return _BARRIER_ADVICE
    return _SYNC_DIST_ADVICE if any("sync_dist" in label for label in labels) else ""


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def rank_zero_floats(
    exchange: Callable[[str, Sequence[int]], list[list[int]]],
    values: Sequence[float | None],
    point: str,
) -> tuple[list[float | None], list[bool]]:
    """Rank 0's ``values`` on every process, and which of them some process had otherwise.

    For decisions every process must take alike (a checkpoint's rank, a
    plateau scheduler's step) from values each process logged itself: a value
    logged without ``sync_dist=True`` differs between processes, and acting on
    each process's own would split the processes' paths or learning rates.

    Args:
        exchange: the strategy's ``exchange`` (one labelled exchange carries it all).
        values: this process's values, at most 4; None where it has none.
        point: where the processes are, in words.

    Example:
        >>> rank_zero_floats(lambda point, payload: [list(payload)], [0.5, None], "a save")
        ([0.5, None], [False, False])
    """
    payload: list[int] = []
    for value in values:
        bits = 0 if value is None else struct.unpack("<q", struct.pack("<d", value))[0]
        payload += [int(value is not None), bits]
    rows = exchange(point, payload)
    agreed: list[float | None] = []
    differs: list[bool] = []
    for index in range(len(values)):
        present, bits = rows[0][2 * index : 2 * index + 2]
        agreed.append(struct.unpack("<d", struct.pack("<q", bits))[0] if present else None)
        differs.append(any(row[2 * index : 2 * index + 2] != [present, bits] for row in rows))
    return agreed, differs

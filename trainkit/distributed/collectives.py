"""How values travel between a strategy's processes: the collectives every strategy offers.

:class:`Collectives` is the interface, with one process's answers (each value is
its own reduction); :class:`ProcessGroupCollectives` answers over a
``torch.distributed`` process group, with trainkit's control messages
(:mod:`trainkit.distributed.control`) naming each process's point when the
processes disagree on where they are. Strategies inherit one or the other.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import torch
import torch.distributed as dist

from trainkit.distributed.control import ControlChannel
from trainkit.distributed.gather import gather

ReduceOp = Literal["sum", "mean", "max", "min"]
T = TypeVar("T")

_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


def reduce_op_name(reduce_op: Any) -> ReduceOp:
    """The reduction a ``reduce_op`` names: "mean", "sum", "max" or "min".

    Args:
        reduce_op: one of those names (any case; "avg" is "mean"), a
            ``torch.distributed.ReduceOp`` of one of them, or None ("sum").

    Example:
        >>> reduce_op_name("AVG"), reduce_op_name(dist.ReduceOp.SUM)
        ('mean', 'sum')
    """
    names = {"mean": "mean", "avg": "mean", "sum": "sum", "max": "max", "min": "min"}
    if reduce_op is None:
        return "sum"  # Lightning's reading of None
    if isinstance(reduce_op, str) and reduce_op.lower() in names:
        return names[reduce_op.lower()]  # type: ignore[return-value]
    for name, op in (("sum", "SUM"), ("max", "MAX"), ("min", "MIN"), ("mean", "AVG")):
        if not isinstance(reduce_op, str) and reduce_op == getattr(dist.ReduceOp, op):
            return name  # type: ignore[return-value]
    raise ValueError(
        f"reduce_op={reduce_op!r} is not a reduction trainkit runs; use 'mean', 'sum', "
        "'max' or 'min' (or the torch.distributed.ReduceOp of one)."
    )


class Collectives(ABC):
    """A strategy's collectives; the defaults are one process's (a value is its own result)."""

    @property
    @abstractmethod
    def root_device(self) -> torch.device:
        """The device this process computes on."""

    @property
    def world_size(self) -> int:
        """Number of processes taking part."""
        return 1

    # Every rank must call a collective at the same point, or the job hangs (trainkit does).
    @abstractmethod
    def all_reduce(self, tensor: torch.Tensor, op: ReduceOp = "mean") -> torch.Tensor:
        """Reduce ``tensor`` over all processes and return the result.

        Args:
            tensor: a tensor on ``root_device``; not modified.
            op: "sum", "mean", "max" or "min".
        """

    def reduce(self, tensor: T, group: Any = None, reduce_op: Any = "mean") -> T:
        """Lightning's ``strategy.reduce``: ``tensor`` reduced over all processes.

        The result is also written into ``tensor`` where it can be (same dtype, no
        autograd history), as Lightning's all-reduce does; a value that is not a
        tensor comes back as it is.

        Args:
            tensor: the value.
            group: must be None: trainkit reduces over every process.
            reduce_op: "mean" (or "avg"), "sum", "max", "min", or the
                ``torch.distributed.ReduceOp`` of one of them.
        """
        op = reduce_op_name(reduce_op)
        if group is not None:
            raise ValueError(
                "strategy.reduce(group=...): trainkit reduces over every process; for a "
                "group, call torch.distributed.all_reduce(tensor, group=group) yourself."
            )
        if not isinstance(tensor, torch.Tensor) or self.world_size == 1:
            return tensor
        result = self.all_reduce(tensor, op)
        if result.dtype == tensor.dtype and not tensor.requires_grad:
            tensor.copy_(result)
            return tensor
        return result  # type: ignore[return-value]

    @abstractmethod
    def all_gather(
        self, tensor: torch.Tensor, group: Any = None, sync_grads: bool = False
    ) -> torch.Tensor:
        """Gather ``tensor`` from all processes, stacked along a new first dimension.

        A strategy of one process returns ``tensor`` itself, without the new
        dimension, as Lightning's single-device strategies do.

        Args:
            tensor: a tensor of the same shape on every process.
            group: a ``torch.distributed`` process group (None: every process).
            sync_grads: let gradients flow back to each process's ``tensor``.
        """

    @abstractmethod
    def broadcast(self, obj: T, src: int = 0) -> T:
        """Send a picklable object from rank ``src`` to all processes.

        Args:
            obj: the object (only the value on ``src`` matters).
            src: the sending rank.
        """

    @abstractmethod
    def barrier(self, name: str | None = None) -> None:
        """Wait until every process reaches this point.

        Args:
            name: a label for debugging.
        """

    def exchange(self, point: str, payload: Sequence[int] = ()) -> list[list[int]]:
        """Every process's integers, by rank, once every process has reached ``point``.

        Multi-process strategies fail naming each process's point when they differ,
        instead of pairing unrelated collectives; every process must call this.

        Args:
            point: where the processes are, in words.
            payload: this process's integers (at most 8).
        """
        return [list(payload)]

    def reduce_boolean_decision(
        self, decision: bool, all: bool = True, point: str = "a decision"
    ) -> bool:
        """Agree on a decision across processes (for example "stop training").

        Args:
            decision: this process's decision.
            all: True to require every process to agree, False for any (Lightning's name).
            point: where the processes decide, in words (named if they disagree on where).
        """
        flag = torch.tensor(float(decision), device=self.root_device)
        reduced = self.all_reduce(flag, op="min" if all else "max")
        return bool(reduced.item())

    def reduce_logged(
        self,
        values: Sequence[tuple[str, torch.Tensor, ReduceOp]],
        point: str,
        *,
        always: bool = False,
    ) -> list[torch.Tensor]:
        """Reduce values logged with ``sync_dist=True`` across processes; the results in order.

        Multi-process strategies first check that every process reduces the same
        names at the same point, and fail naming them when not (a value logged
        on some processes only would otherwise pair with another collective).

        Args:
            values: ``(name, value, op)`` for each value, op "sum", "mean", "max" or "min".
            point: where they are reduced, in words ("the end of a training epoch").
            always: check even when there is nothing to reduce (at points every
                process reaches; a process with nothing logged must still come).
        """
        return [self.all_reduce(value, op) for _, value, op in values]

    def agree_max(self, values: Sequence[int]) -> Callable[[], list[int]]:
        """Start an element-wise maximum of ``values`` over processes, without waiting.

        The agreement travels in the background; the returned function gives the
        result, waiting only if it is still under way. The loop's preemption vote
        (``trainkit.checkpoint.preemption.StopVote``) uses it so that a signal reaching only
        some processes stops all of them at the same point. Every process must
        call this at the same points, with as many values.

        Args:
            values: this process's integers.
        """
        agreed = list(values)
        return lambda: agreed


class ProcessGroupCollectives(Collectives):
    """The collectives over ``torch.distributed``'s default group, checked on a control channel.

    The strategy makes the control channel (``_control``) when it sets up its
    process group; until then only :meth:`barrier` works (on the process group,
    if any).
    """

    _control: ControlChannel | None = None

    def all_reduce(self, tensor: torch.Tensor, op: ReduceOp = "mean") -> torch.Tensor:
        result = tensor.detach().clone().to(self.root_device)
        dist.all_reduce(result, op=_OPS["sum" if op == "mean" else op])
        return result / self.world_size if op == "mean" else result

    def all_gather(
        self, tensor: torch.Tensor, group: Any = None, sync_grads: bool = False
    ) -> torch.Tensor:
        return gather(tensor.to(self.root_device), group=group, sync_grads=sync_grads)

    def broadcast(self, obj: T, src: int = 0) -> T:
        holder = [obj]
        dist.broadcast_object_list(holder, src=src)
        return holder[0]

    def barrier(self, name: str | None = None) -> None:
        # Labelled: a process at another barrier (or another collective) is named,
        # not paired with this one.
        if self._control is not None:
            self._control.exchange(f"the barrier {name or 'unnamed'!r}")
        elif dist.is_initialized():
            dist.barrier()

    def exchange(self, point: str, payload: Sequence[int] = ()) -> list[list[int]]:
        return self._channel().exchange(point, payload)

    def reduce_boolean_decision(
        self, decision: bool, all: bool = True, point: str = "a decision"
    ) -> bool:
        flags = [payload[0] for payload in self.exchange(point, [int(decision)])]
        return bool(min(flags) if all else max(flags))

    def reduce_logged(
        self,
        values: Sequence[tuple[str, torch.Tensor, ReduceOp]],
        point: str,
        *,
        always: bool = False,
    ) -> list[torch.Tensor]:
        if not values and not always:
            return []
        names = ", ".join(repr(name) for name in dict.fromkeys(n for n, _, _ in values)) or "none"
        self._channel().exchange(
            f"{point}, reducing the values logged with sync_dist=True: {names}"
        )
        # Then one reduction per operation and dtype, on the job's own group (the
        # values may live on the GPU), instead of one per value.
        reduced: list[torch.Tensor] = [torch.empty(0)] * len(values)
        groups: dict[tuple[ReduceOp, torch.dtype], list[int]] = {}
        for index, (_, value, op) in enumerate(values):
            groups.setdefault((op, value.dtype), []).append(index)
        for (group_op, _), indices in groups.items():
            flat = torch.cat([values[i][1].detach().reshape(-1) for i in indices])
            total = self.all_reduce(flat, group_op)
            for offset, i in enumerate(indices):
                reduced[i] = total[offset].reshape(values[i][1].shape)
        return reduced

    def agree_max(self, values: Sequence[int]) -> Callable[[], list[int]]:
        # CPU integers on the control group: no GPU work, no host sync.
        pending = self._channel().start("the preemption vote at a resume point", values)

        def result() -> list[int]:
            return [max(column) for column in zip(*pending(), strict=True)]

        return result

    def _channel(self) -> ControlChannel:
        if self._control is None:
            raise RuntimeError("the strategy has not been set up (setup_environment)")
        return self._control

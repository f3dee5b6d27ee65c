"""What a launcher hands back to the Trainer whose entry point it ran.

When this process runs as rank 0 itself (``ScriptLauncher``), its Trainer ran
the entry point and is up to date: the outcome is the entry point's return
value. When the ranks ran in processes this one started (``SpawnLauncher``,
``strategy="ddp_spawn"``), rank 0 also reports how its run ended (a
:class:`RankZeroReport`), and the calling Trainer takes that on itself: a
launcher never writes to the Trainer or to the objects it owns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch

T = TypeVar("T")


@dataclass(frozen=True)
class RankZeroReport:
    """How rank 0's run ended, in a process the caller started: what the caller's Trainer adopts.

    Attributes:
        module_state: the module's weights (on the CPU).
        run_state: the run's counters, as ``RunState.state_dict()`` has them.
        callback_metrics: the latest value of every logged metric (on the CPU).
        logged_metrics: the latest values written to the loggers.
        callback_states: each callback's state, in the order of the Trainer's callbacks.
        preempted: whether fit stopped for a preemption signal.
        status: the run's status at its end ("finished", "interrupted", ...).
        stop_signal: the signal every rank agreed to stop for (None: none).
        fit_ended: whether a fit ended normally (the Trainer's next fit continues it).
    """

    module_state: dict[str, torch.Tensor]
    run_state: dict[str, Any]
    callback_metrics: dict[str, torch.Tensor]
    logged_metrics: dict[str, Any]
    callback_states: list[dict[str, Any]]
    preempted: bool
    status: str
    stop_signal: int | None
    fit_ended: bool = False


@dataclass(frozen=True)
class LaunchOutcome(Generic[T]):
    """The entry point's result, and rank 0's report when rank 0 was another process.

    Attributes:
        value: what the entry point returned (on rank 0).
        report: how rank 0's run ended, when it ran in a process this one started
            (None: this process was rank 0, and its Trainer is up to date).

    Example:
        >>> LaunchOutcome([1.0]).report is None
        True
    """

    value: T
    report: RankZeroReport | None = None

"""Preemption: SIGTERM or SIGUSR1 become "checkpoint and stop at the next resume point".

Clusters warn a job before they stop it: SLURM sends SIGUSR1 (with
``--signal=USR1@<seconds>``) or SIGTERM; Kubernetes and most schedulers send
SIGTERM. During ``fit`` trainkit catches both, finishes the current step, saves
``last.ckpt`` at the next resume point, closes its loggers and exits with status
0. Started again with ``ckpt_path="last"``, the run continues exactly where it
stopped. See docs/checkpointing.md for the SLURM recipe.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

# SIGUSR1 does not exist on Windows.
SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGUSR1") if hasattr(signal, name))


class Preemption:
    """Records a preemption signal; the loop checks :attr:`requested` at resume points."""

    def __init__(self) -> None:
        self.requested = False
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        """Catch the preemption signals (only possible from the main thread)."""
        self.requested = False
        self.signal = None
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)

    def uninstall(self) -> None:
        """Give the signals back to whoever handled them before."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        # Only set a flag: the step in progress finishes, and the loop saves at the
        # next resume point, where the state is consistent.
        self.requested = True
        self.signal = signum

"""Lightning's cluster environment plugins, for ``Trainer(plugins=[...])``.

trainkit reads who each process is from torchrun's or SLURM's variables itself
(``trainkit.launch.environment``), so these plugins change nothing where what they
ask for is what trainkit does, and are refused with the reason where it is not:

- ``LightningEnvironment()``, ``TorchElasticEnvironment()``: accepted.
- ``SLURMEnvironment(auto_requeue=False)``: accepted; trainkit saves ``last.ckpt``
  and stops on SIGUSR1 or SIGTERM, and the batch script requeues the job
  (docs/checkpointing.md). ``auto_requeue=True`` (Lightning's default), where the
  process requeues its own job, and a ``requeue_signal`` other than those two are
  refused, saying so.
"""

from __future__ import annotations

import os
import signal
import warnings
from collections.abc import Callable
from typing import Any

from trainkit.checkpoint.preemption import SIGNALS  # the signals trainkit saves and stops on
from trainkit.launch.environment import ClusterEnvironment as JobEnvironment
from trainkit.launch.environment import detect_environment

__all__ = [
    "ClusterEnvironment",
    "LightningEnvironment",
    "SLURMEnvironment",
    "TorchElasticEnvironment",
]


class ClusterEnvironment:
    """What every cluster environment answers, read from the job's variables (or, for
    the one ``trainer.strategy.cluster_environment`` gives, from the run's strategy).

    Lightning's base class, here for imports and ``isinstance`` checks: a subclass of
    one's own is not run as a plugin (trainkit reads the job's variables itself).
    """

    #: Who this process is (None: read the job's variables when asked).
    _process: Callable[[], JobEnvironment] | None = None
    #: This machine's index in the job (None: read the job's variables when asked).
    _node: Callable[[], int] | None = None

    def _now(self) -> JobEnvironment:
        return self._process() if self._process is not None else detect_environment()

    @property
    def creates_processes_externally(self) -> bool:
        return self._now().launched_externally

    @property
    def main_address(self) -> str:
        return self._now().master_addr

    @property
    def main_port(self) -> int:
        return self._now().master_port

    def world_size(self) -> int:
        return self._now().world_size

    def global_rank(self) -> int:
        return self._now().global_rank

    def local_rank(self) -> int:
        return self._now().local_rank

    def node_rank(self) -> int:
        if self._node is not None:
            return self._node()
        for name in ("NODE_RANK", "GROUP_RANK", "SLURM_NODEID"):
            if os.environ.get(name, "").isdigit():
                return int(os.environ[name])
        return 0

    def trainkit_plugin_refusal(self) -> str | None:
        """None: trainkit does what this plugin asks; else why it does not."""
        kind = type(self)
        if kind is ClusterEnvironment:
            return (
                "the base class: pass LightningEnvironment(), TorchElasticEnvironment() or "
                "SLURMEnvironment(auto_requeue=False), or drop it"
            )
        if not kind.__module__.startswith("trainkit."):  # accepted, but its methods unused
            warnings.warn(
                f"Trainer(plugins=[{kind.__name__}(...)]): trainkit reads the job's ranks and "
                "master address from torchrun's or SLURM's variables itself, so the methods "
                f"{kind.__name__} defines are not run. Drop the plugin to silence this.",
                UserWarning,
                stacklevel=4,
            )
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class LightningEnvironment(ClusterEnvironment):
    """The variables a single machine's or torchrun's processes are given."""

    @staticmethod
    def detect() -> bool:
        return True


class TorchElasticEnvironment(ClusterEnvironment):
    """torchrun's (torch elastic's) variables."""

    @staticmethod
    def detect() -> bool:
        return detect_environment().source == "torchrun"


class SLURMEnvironment(ClusterEnvironment):
    """SLURM's variables; ``auto_requeue``: whether the process requeues its own job."""

    def __init__(self, auto_requeue: bool = True, requeue_signal: Any = None) -> None:
        self.auto_requeue = auto_requeue
        self.requeue_signal = signal.SIGUSR1 if requeue_signal is None else requeue_signal

    @staticmethod
    def detect() -> bool:
        return detect_environment().source == "slurm"

    @staticmethod
    def job_id() -> int | None:
        import os

        value = os.environ.get("SLURM_JOB_ID")
        return int(value) if value and value.isdigit() else None

    def trainkit_plugin_refusal(self) -> str | None:
        if self.auto_requeue:
            return (
                "auto_requeue=True: trainkit saves last.ckpt and stops on SIGUSR1 or SIGTERM "
                "but does not requeue its own job; pass SLURMEnvironment(auto_requeue=False) "
                "and requeue from the batch script (docs/checkpointing.md shows one)"
            )
        if self.requeue_signal not in SIGNALS:
            return (
                f"requeue_signal={self.requeue_signal!r}: trainkit stops on SIGUSR1 and "
                "SIGTERM; ask SLURM for one of them (#SBATCH --signal=B:USR1@120)"
            )
        return None

    def __repr__(self) -> str:
        requeue = f"auto_requeue={self.auto_requeue}, requeue_signal={self.requeue_signal!r}"
        return f"SLURMEnvironment({requeue})"


def environment_plugin(
    process: Callable[[], JobEnvironment], node_rank: Callable[[], int]
) -> ClusterEnvironment:
    """The plugin that stands for a run's process: ``trainer.strategy.cluster_environment``.

    Args:
        process: who the process is (the strategy's environment, read when asked).
        node_rank: the machine's index in the job (the Trainer's ``node_rank``).
    """
    source = process().source
    plugin: ClusterEnvironment
    if source == "slurm":
        plugin = SLURMEnvironment(auto_requeue=False)  # trainkit never requeues its own job
    elif source == "torchrun":
        plugin = TorchElasticEnvironment()
    else:
        plugin = LightningEnvironment()
    plugin._process, plugin._node = process, node_rank
    return plugin

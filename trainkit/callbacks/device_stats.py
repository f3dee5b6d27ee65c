"""DeviceStatsMonitor: log CPU and CUDA memory figures around each batch.

Metric names are Lightning's: ``DeviceStatsMonitor.<hook>/<figure>``, e.g.
``DeviceStatsMonitor.on_train_batch_start/cpu_percent`` or
``DeviceStatsMonitor.on_train_batch_end/allocated_bytes.all.peak``. They are
logged on the steps where step metrics are (every ``log_every_n_steps``
training steps; every ``log_every_n_steps``-th batch of a validation or test
run), at the training step the run has reached, straight to the loggers.

Reading the figures costs no device synchronisation: ``psutil`` asks the
operating system, ``torch.cuda.memory_stats`` reads the caching allocator's
host-side counters.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

#: The extra that installs psutil.
PSUTIL_EXTRA = "pip install 'trainkit[psutil]'"


def psutil_available() -> bool:
    """Whether ``psutil`` can be imported (it is optional: the ``psutil`` extra)."""
    return importlib.util.find_spec("psutil") is not None


def cpu_stats() -> dict[str, float]:
    """System-wide CPU use, memory use and swap use, in percent (Lightning's names).

    Raises:
        ModuleNotFoundError: ``psutil`` is not installed.
    """
    try:
        import psutil
    except ImportError:
        raise ModuleNotFoundError(
            f"CPU statistics need psutil, which is not installed: {PSUTIL_EXTRA}"
        ) from None
    return {
        # Since the previous call (non-blocking): the use between two logging steps.
        "cpu_percent": float(psutil.cpu_percent()),
        "cpu_vm_percent": float(psutil.virtual_memory().percent),
        "cpu_swap_percent": float(psutil.swap_memory().percent),
    }


def device_stats(device: torch.device) -> dict[str, float]:
    """The figures of ``device``: its caching allocator's statistics on CUDA, psutil's on CPU.

    Args:
        device: the device the run computes on.
    """
    if device.type == "cuda":
        return {name: float(value) for name, value in torch.cuda.memory_stats(device).items()}
    if device.type == "cpu":
        return cpu_stats()
    return {}


class DeviceStatsMonitor(Callback):
    """Log device statistics at the start and end of each training, validation and test batch.

    Needs a logger. On a CPU it logs ``cpu_percent``, ``cpu_vm_percent`` and
    ``cpu_swap_percent`` (through psutil: the ``psutil`` extra); on a CUDA
    device every entry of ``torch.cuda.memory_stats`` (``allocated_bytes.all.current``,
    ``reserved_bytes.all.peak``, ``num_ooms``, ...), in bytes or counts.

    Args:
        cpu_stats: None logs CPU figures only when the run computes on the CPU;
            True logs them on any device (beside a GPU's); False never does.

    Raises:
        RuntimeError: fit starts without a logger.
        ModuleNotFoundError: CPU figures are due and psutil is not installed.

    Example:
        >>> monitor = DeviceStatsMonitor(cpu_stats=False)
    """

    def __init__(self, cpu_stats: bool | None = None) -> None:
        self._cpu_stats = cpu_stats
        self._log_this_batch = False

    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Check there is somewhere to log to, and psutil when CPU figures are due."""
        super().setup(trainer, module, stage)
        if stage != "fit":
            return
        if not trainer.loggers:
            raise RuntimeError(
                "Cannot use `DeviceStatsMonitor` callback with `Trainer(logger=False)`: it "
                "writes to the loggers. Pass a logger, or remove the callback."
            )
        if self._wants_cpu(trainer.strategy.root_device) and not psutil_available():
            raise ModuleNotFoundError(
                "DeviceStatsMonitor cannot log CPU statistics: psutil is not installed. "
                f"Install it with {PSUTIL_EXTRA}, or pass DeviceStatsMonitor(cpu_stats=False)."
            )

    def _wants_cpu(self, device: torch.device) -> bool:
        return self._cpu_stats is True or (self._cpu_stats is None and device.type == "cpu")

    def _log(self, trainer: Trainer, hook: str) -> None:
        if not trainer.loggers or not trainer.is_global_zero:
            return
        device = trainer.strategy.root_device
        stats = device_stats(device) if device.type != "cpu" else {}
        if self._wants_cpu(device):
            stats.update(cpu_stats())
        if not stats:
            return
        prefix = f"{type(self).__qualname__}.{hook}/"
        metrics = {prefix + name: value for name, value in stats.items()}
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=trainer.global_step)

    # The training batch about to run completes step number global_step + 1:
    # log when that is a logging step (or training is stopping), as Lightning does.
    def on_train_batch_start(
        self, trainer: Trainer, module: Module, batch: Any, batch_idx: int
    ) -> None:
        """Log the figures before the batch, on logging steps."""
        self._log_this_batch = (
            trainer.global_step + 1
        ) % trainer.log_every_n_steps == 0 or trainer.should_stop
        if self._log_this_batch:
            self._log(trainer, "on_train_batch_start")

    def on_train_batch_end(
        self, trainer: Trainer, module: Module, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Log the figures after the batch, on logging steps."""
        if self._log_this_batch:
            self._log(trainer, "on_train_batch_end")

    def _eval_due(self, trainer: Trainer, batch_idx: int) -> bool:
        return not trainer.sanity_checking and (batch_idx + 1) % trainer.log_every_n_steps == 0

    def on_validation_batch_start(
        self, trainer: Trainer, module: Module, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        """Log the figures before every ``log_every_n_steps``-th validation batch."""
        if self._eval_due(trainer, batch_idx):
            self._log(trainer, "on_validation_batch_start")

    def on_validation_batch_end(
        self,
        trainer: Trainer,
        module: Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        """Log the figures after every ``log_every_n_steps``-th validation batch."""
        if self._eval_due(trainer, batch_idx):
            self._log(trainer, "on_validation_batch_end")

    def on_test_batch_start(
        self, trainer: Trainer, module: Module, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        """Log the figures before every ``log_every_n_steps``-th test batch."""
        if self._eval_due(trainer, batch_idx):
            self._log(trainer, "on_test_batch_start")

    def on_test_batch_end(
        self,
        trainer: Trainer,
        module: Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        """Log the figures after every ``log_every_n_steps``-th test batch."""
        if self._eval_due(trainer, batch_idx):
            self._log(trainer, "on_test_batch_end")

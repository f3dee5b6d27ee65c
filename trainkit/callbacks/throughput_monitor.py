"""ThroughputMonitor: log batches, samples, items and FLOPs per second in training and evaluation.

Metric names are Lightning's: the stage, then :class:`trainkit.utilities.throughput.Throughput`'s
names, joined by its separator ("/"): ``train/device/samples_per_sec``,
``train/device/flops_per_sec``, ``train/device/mfu``, ``validate/time``, ...
(and ``train/samples_per_sec`` etc. for the whole job when it has several
processes). Rates appear once ``window_size`` batches have been seen.

Timing without stalling the GPU: Lightning calls ``torch.cuda.synchronize()``
after every batch, so that each reading is the time the batch really finished.
trainkit synchronises only on the steps it logs (every ``log_every_n_steps``):
the other readings are taken when the host has queued the batch, which is never
later than when the device finishes it, so the window's last reading is exact
and its rates are at most a queue's depth off; training runs without a host
sync per step.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback
from trainkit.callbacks.precision import COMPUTE_DTYPES
from trainkit.utilities.throughput import Throughput, get_available_flops

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer


class _Stage:
    """One stage's running totals and its Throughput."""

    def __init__(self, throughput: Throughput) -> None:
        self.throughput = throughput
        self.t0 = 0.0
        self.batches = 0
        self.samples = 0
        self.lengths = 0
        self.logged_batches = 0  # evaluation batches over the whole run: the logging step

    def restart(self) -> None:
        self.throughput.reset()
        self.batches = self.samples = self.lengths = 0
        self.t0 = time.perf_counter()


class ThroughputMonitor(Callback):
    """Compute and log throughput with :class:`trainkit.utilities.throughput.Throughput`.

    FLOPs are read from a ``flops_per_batch`` attribute of the Module (see
    :func:`trainkit.utilities.throughput.measure_flops`), on every batch; without one, no
    FLOPs figures are logged (a warning says so once). Logs from global rank 0,
    on the training steps where step metrics are written (after the optimizer
    step, so an accumulation window counts whole) and every
    ``log_every_n_steps``-th validation, test and predict batch. The training
    clock stops while fit validates, so validation does not lower the training rate.

    Args:
        batch_size_fn: the number of samples in a batch (``lambda batch: batch[0].size(0)``).
        length_fn: the number of items (tokens, ...) in a batch; None logs no items.
        **kwargs: ``window_size`` and ``separator`` of :class:`~trainkit.throughput.Throughput`.

    Example:
        >>> monitor = ThroughputMonitor(lambda batch: batch[0].size(0), window_size=10)
    """

    def __init__(
        self,
        batch_size_fn: Callable[[Any], int],
        length_fn: Callable[[Any], int] | None = None,
        **kwargs: Any,
    ) -> None:
        unknown = set(kwargs) - {"window_size", "separator"}
        if unknown:
            raise TypeError(
                f"ThroughputMonitor got unexpected arguments {sorted(unknown)}; it passes "
                "window_size and separator on to Throughput (available_flops and world_size "
                "come from the Trainer)."
            )
        self.kwargs = kwargs
        self.batch_size_fn = batch_size_fn
        self.length_fn = length_fn
        self.available_flops: int | None = None
        self._stages: dict[str, _Stage] = {}
        self._has_flops: bool | None = None
        self._validation_started = 0.0

    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Look the device's peak FLOPs up and make a Throughput per stage of this run."""
        super().setup(trainer, module, stage)
        device = trainer.strategy.root_device
        dtype = COMPUTE_DTYPES.get(trainer.precision, torch.float32)  # what matmuls run in
        self.available_flops = get_available_flops(device, dtype)
        names = {"fit": ["train", "validate"], "validate": ["validate"]}.get(stage, [stage])
        for name in names:
            throughput = Throughput(
                available_flops=self.available_flops, world_size=trainer.world_size, **self.kwargs
            )
            self._stages[name] = _Stage(throughput)

    # ------------------------------------------------------------- measuring
    def _start(self, trainer: Trainer, stage: str) -> None:
        if trainer.is_global_zero:
            self._stages[stage].restart()

    def _update(self, trainer: Trainer, module: Module, stage: str, batch: Any, sync: bool) -> None:
        state = self._stages[stage]
        if sync and trainer.strategy.root_device.type == "cuda":
            # Only on steps that log: see the module docstring.
            torch.cuda.synchronize(trainer.strategy.root_device)
        elapsed = time.perf_counter() - state.t0
        with torch.no_grad():  # batch_size_fn / length_fn must not build a graph
            state.samples += int(self.batch_size_fn(batch))
            if self.length_fn is not None:
                state.lengths += int(self.length_fn(batch))
        state.batches += 1
        if self._has_flops is None:
            self._has_flops = hasattr(module, "flops_per_batch")
            if not self._has_flops:
                warnings.warn(
                    "ThroughputMonitor logs no FLOPs: give "
                    f"{type(module).__name__} a `flops_per_batch` attribute or property "
                    "(trainkit.utilities.throughput.measure_flops counts them).",
                    stacklevel=2,
                )
        state.throughput.update(
            time=elapsed,
            batches=state.batches,
            samples=state.samples,
            lengths=state.lengths if self.length_fn is not None else None,
            flops=getattr(module, "flops_per_batch", None) if self._has_flops else None,
        )

    def _write(self, trainer: Trainer, stage: str, step: int) -> None:
        throughput = self._stages[stage].throughput
        metrics = {f"{stage}{throughput.separator}{k}": v for k, v in throughput.compute().items()}
        metrics["epoch"] = trainer.current_epoch  # as Lightning's logger connector adds it
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)

    # ------------------------------------------------------------- training
    def on_train_start(self, trainer: Trainer, *_: Any) -> None:
        """Start the training clock."""
        self._start(trainer, "train")

    def on_train_batch_end(
        self, trainer: Trainer, module: Module, outputs: Any, batch: Any, *_: Any
    ) -> None:
        """Count the batch; log after an optimizer step that is a logging step."""
        if not trainer.is_global_zero:
            return
        stepped = trainer.optimization.stepped
        due = stepped and (
            trainer.global_step % trainer.log_every_n_steps == 0 or trainer.should_stop
        )
        self._update(trainer, module, "train", batch, sync=due)
        if due:
            # The step number step metrics are written under for this batch.
            self._write(trainer, "train", max(trainer.global_step - 1, 0))

    # ------------------------------------------------------------- evaluation
    def on_validation_start(self, trainer: Trainer, *_: Any) -> None:
        """Start the validation clock (not for the sanity check)."""
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        self._validation_started = time.perf_counter()
        self._start(trainer, "validate")

    def on_validation_end(self, trainer: Trainer, *_: Any) -> None:
        """Inside fit: move the training clock on by the validation's duration."""
        if trainer.sanity_checking or not trainer.is_global_zero or "train" not in self._stages:
            return
        if trainer.state.fn == "fit":
            self._stages["train"].t0 += time.perf_counter() - self._validation_started

    def _eval_batch(self, trainer: Trainer, module: Module, stage: str, batch: Any) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        state = self._stages[stage]
        due = (state.batches + 1) % trainer.log_every_n_steps == 0
        self._update(trainer, module, stage, batch, sync=due)
        state.logged_batches += 1
        if due:
            self._write(trainer, stage, state.logged_batches)

    def on_validation_batch_end(
        self, trainer: Trainer, module: Module, outputs: Any, batch: Any, *_: Any
    ) -> None:
        """Count the batch; log every ``log_every_n_steps``-th."""
        self._eval_batch(trainer, module, "validate", batch)

    def on_test_start(self, trainer: Trainer, *_: Any) -> None:
        """Start the test clock."""
        self._start(trainer, "test")

    def on_test_batch_end(
        self, trainer: Trainer, module: Module, outputs: Any, batch: Any, *_: Any
    ) -> None:
        """Count the batch; log every ``log_every_n_steps``-th."""
        self._eval_batch(trainer, module, "test", batch)

    def on_predict_start(self, trainer: Trainer, *_: Any) -> None:
        """Start the predict clock."""
        self._start(trainer, "predict")

    def on_predict_batch_end(
        self, trainer: Trainer, module: Module, outputs: Any, batch: Any, *_: Any
    ) -> None:
        """Count the batch; log every ``log_every_n_steps``-th."""
        self._eval_batch(trainer, module, "predict", batch)

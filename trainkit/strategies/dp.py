"""DataParallel: one process drives several CUDA devices, splitting each batch between them.

Every training step scatters the batch over the devices, copies the model to
each (``torch.nn.DataParallel``), runs ``training_step`` inside each copy (so
the user's step code, loss included, runs per device), and combines the copies'
losses into the batch's loss: a mean weighted by each device's share of the
batch, which equals the single-device loss. Gradients flow back to the one
model on the first device.

DDP is faster and is what trainkit recommends: DataParallel copies the model to
every device on every step, runs the copies in Python threads of one process
(one interpreter lock), and gathers outputs on the first device, which then
holds more memory than the others. It exists for quick experiments on one
machine. Evaluation and prediction run on the first device.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from trainkit.core.data import extract_batch_size
from trainkit.distributed.wrapping import StepModule, unwrap
from trainkit.strategies.single import SingleDeviceStrategy

if TYPE_CHECKING:
    from trainkit.launch.environment import ClusterEnvironment
    from trainkit.loops.metric_store import Number
    from trainkit.loops.results import LogArguments, Results
    from trainkit.strategies.registry import DevicePlan


@dataclass
class ReplicaLogs:
    """Values ``self.log`` received inside the device copies during one step.

    Each copy logs its own value for its share of the batch; after the step they
    are combined into one value per name (see :func:`combine`), as if one
    device had seen the whole batch.
    """

    shares: dict[int, int]
    records: list[tuple[int, str, Any, LogArguments]] = field(default_factory=list)

    def record(self, name: str, value: Number, options: LogArguments) -> None:
        """Keep one copy's logged value (called from that copy's thread).

        Args:
            name: the metric's name.
            value: the value the copy logged.
            options: the remaining ``self.log`` arguments, as the results store receives them.
        """
        if isinstance(value, torch.Tensor) and value.is_cuda:
            device = value.device.index
        else:  # DataParallel runs each copy with its device made current
            device = torch.cuda.current_device() if torch.cuda.is_available() else 0
        self.records.append((device if device is not None else 0, name, value, options))


def batch_shares(batch_size: int, device_ids: list[int]) -> dict[int, int]:
    """How many samples each device gets when DataParallel scatters ``batch_size`` rows.

    DataParallel splits as ``Tensor.chunk`` does; a batch smaller than the number
    of devices leaves the last devices out.

    Args:
        batch_size: the batch's first dimension.
        device_ids: the devices, in order.

    Example:
        >>> batch_shares(10, [0, 1, 2])
        {0: 4, 1: 4, 2: 2}
    """
    chunks = torch.empty(batch_size, 0).chunk(len(device_ids))
    return {device: len(chunk) for device, chunk in zip(device_ids, chunks, strict=False)}


def combine(values: list[torch.Tensor], weights: list[int], reduce_fx: str) -> torch.Tensor:
    """One value from the device copies' values, as one device would have computed it.

    Args:
        values: each copy's value (0-dim tensors, possibly on different devices).
        weights: each copy's number of samples.
        reduce_fx: "mean" (weighted by samples), "sum", "max" or "min".

    Example:
        >>> combine([torch.tensor(1.0), torch.tensor(4.0)], [3, 1], "mean")
        tensor(1.7500)
    """
    device = values[0].device
    stacked = torch.stack([torch.as_tensor(v, dtype=torch.float32).to(device) for v in values])
    if reduce_fx == "mean":
        share = torch.tensor(weights, dtype=stacked.dtype, device=device)
        return (stacked * share).sum() / share.sum()
    if reduce_fx == "sum":
        return stacked.sum()
    return stacked.max() if reduce_fx == "max" else stacked.min()


class DataParallelStrategy(SingleDeviceStrategy):
    """``torch.nn.DataParallel`` over several CUDA devices of one process.

    One process, so its collectives are the single-device strategy's (they
    return their input); the first device holds the model.

    Args:
        device_ids: the CUDA devices to use (two or more); the first holds the model.
    """

    name = "dp"
    names = ("dp",)

    def __init__(self, device_ids: list[int]) -> None:
        if len(device_ids) < 2:
            raise ValueError(
                f"DataParallelStrategy needs two or more CUDA devices, got {device_ids}."
            )
        super().__init__(torch.device("cuda", device_ids[0]))
        self.device_ids = list(device_ids)
        # Where the device copies' combined values are logged (connect_results).
        self._results: Results | None = None

    @classmethod
    def from_plan(
        cls,
        plan: DevicePlan,
        *,
        timeout: timedelta = timedelta(minutes=30),
        environment: ClusterEnvironment | None = None,
        **init_params: Any,
    ) -> SingleDeviceStrategy:
        """DataParallel over the plan's CUDA devices; one device (with a warning) short of two."""
        if plan.device_type == "cuda" and len(plan.indices) >= 2:
            return cls(list(plan.indices), **init_params)
        fallback = SingleDeviceStrategy.from_plan(plan)
        count = len(plan.indices) if plan.device_type == "cuda" else 0
        warnings.warn(
            f"strategy='dp' splits each batch over two or more CUDA devices, but this run has "
            f"{count} ({plan.device_type}); training on one device ({fallback.root_device}) "
            "instead. Ask for devices=2 or more on a machine with several GPUs, or use "
            "strategy='ddp' (recommended even there).",
            stacklevel=5,  # the Trainer's caller: via Trainer, build_strategy, the registry
        )
        return fallback

    def connect_results(self, results: Results) -> None:
        self._results = results

    def setup_module(self, module: nn.Module) -> nn.Module:
        module = module.to(self.root_device)
        return nn.DataParallel(StepModule(module), device_ids=self.device_ids)

    def unwrap(self, module: nn.Module) -> nn.Module:
        return unwrap(module)

    def step_function(self, module: nn.Module, name: str) -> Callable[..., Any]:
        if name != "training_step" or not isinstance(module, nn.DataParallel):
            return getattr(self.unwrap(module), name)  # type: ignore[no-any-return]
        results = self._results
        if results is None:
            raise RuntimeError(
                "DataParallelStrategy logs the device copies' values into the run's results "
                "store, which it was not handed: call connect_results(results) before training."
            )

        def training_step(batch: Any, batch_idx: int) -> Any:
            shares = batch_shares(extract_batch_size(batch), self.device_ids)
            logs = ReplicaLogs(shares)
            with results.capture(logs.record):
                output = module("training_step", batch, batch_idx)
            _log_combined(results, logs)
            return _combine_output(output, list(shares.values()))

        return training_step


def _combine_output(output: Any, shares: list[int]) -> Any:
    # DataParallel gathers each copy's 0-dim loss into a vector, one entry per device.
    if isinstance(output, torch.Tensor):
        if output.dim() == 1 and len(output) == len(shares):
            return combine(list(output), shares, "mean")
        return output
    if isinstance(output, dict) and "loss" in output:
        return {**output, "loss": _combine_output(output["loss"], shares)}
    return output


def _log_combined(results: Results, logs: ReplicaLogs) -> None:
    by_name: dict[str, list[tuple[int, Any, LogArguments]]] = {}
    for device, name, value, options in logs.records:
        by_name.setdefault(name, []).append((device, value, options))
    for name, entries in by_name.items():
        on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx, _ = entries[0][2]
        weights = [logs.shares.get(device, 1) for device, _, _ in entries]
        value = combine([torch.as_tensor(v) for _, v, _ in entries], weights, reduce_fx)
        results.log(
            name, value, on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx, sum(weights)
        )

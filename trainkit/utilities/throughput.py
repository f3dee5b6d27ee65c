"""Throughput: rolling batches/samples/items/FLOPs per second, and counting a model's FLOPs.

``Throughput`` keeps the last ``window_size`` cumulative readings (time, batches,
samples, items) and turns them into rates with the names Lightning's
``lightning.fabric.utilities.throughput.Throughput`` uses, so dashboards built on
them keep working. It holds plain numbers, never tensors, so updating it costs
no device synchronisation; timing a GPU correctly is the caller's business (see
``ThroughputMonitor``).

``measure_flops`` counts the FLOPs of a forward (and optionally backward) pass
with torch's ``FlopCounterMode``; run it on a model built on the meta device and
it allocates nothing and computes nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import torch

__all__ = ["Throughput", "get_available_flops", "measure_flops"]


class _Rising:
    """The last ``maxlen`` values of a cumulative counter, which must keep rising.

    A counter that stands still or goes back means the caller passed per-step
    values instead of totals (or restarted its clock); saying so at once beats
    logging a division by zero or a negative rate later.
    """

    def __init__(self, name: str, maxlen: int) -> None:
        self.name = name
        self.values: deque[float] = deque(maxlen=maxlen)

    def append(self, value: float) -> None:
        if self.values and value <= self.values[-1]:
            raise ValueError(
                f"Throughput.update: {self.name}={value} is not greater than the previous "
                f"{self.name}={self.values[-1]}. Pass running totals since the start (elapsed "
                "time, batches seen so far, ...), not per-step amounts, and reset() before "
                "starting over."
            )
        self.values.append(value)

    @property
    def full(self) -> bool:
        return len(self.values) == self.values.maxlen

    def span(self) -> float:
        """Last minus first value of the window."""
        return self.values[-1] - self.values[0]


class Throughput:
    """Rolling throughput over the last ``window_size`` updates, with Lightning's names.

    :meth:`compute` always returns the totals ``time``, ``batches``, ``samples``
    (and ``lengths`` when given). Once ``window_size`` updates have been made it
    adds the rates of this device, ``device/batches_per_sec``,
    ``device/samples_per_sec`` (and ``device/items_per_sec`` when lengths are
    given), and with FLOPs ``device/flops_per_sec`` and, when
    ``available_flops`` is known, ``device/mfu`` (model FLOPs utilisation). With
    ``world_size > 1`` it also returns the whole job's ``batches_per_sec``,
    ``samples_per_sec``, ``items_per_sec`` and ``flops_per_sec`` (assuming every
    device runs at the same rate, as Lightning does).

    Args:
        available_flops: the theoretical FLOPs per second of one device (see
            :func:`get_available_flops`); None leaves ``device/mfu`` out.
        world_size: the number of devices in the job.
        window_size: how many updates the rates are averaged over (at least 2).
        separator: what joins ``device`` and a name.

    Raises:
        ValueError: ``world_size`` below 1 or ``window_size`` below 2.

    Example:
        >>> throughput = Throughput(window_size=2)
        >>> throughput.update(time=1.0, batches=1, samples=32)
        >>> throughput.update(time=3.0, batches=2, samples=64)
        >>> throughput.compute()["device/samples_per_sec"]
        16.0
    """

    def __init__(
        self,
        available_flops: float | None = None,
        world_size: int = 1,
        window_size: int = 100,
        separator: str = "/",
    ) -> None:
        if world_size < 1:
            raise ValueError(f"Throughput(world_size={world_size}): the job has at least 1 device.")
        if window_size < 2:
            raise ValueError(
                f"Throughput(window_size={window_size}): a rate needs at least 2 readings; "
                "pass window_size=2 or more."
            )
        self.available_flops = available_flops
        self.world_size = world_size
        self.window_size = window_size
        self.separator = separator
        self._time = _Rising("time", window_size)
        self._batches = _Rising("batches", window_size)
        self._samples = _Rising("samples", window_size)
        self._lengths = _Rising("lengths", window_size)
        # FLOPs are per update, not running totals (Lightning's convention).
        self._flops: deque[float] = deque(maxlen=window_size)

    def update(
        self,
        *,
        time: float,
        batches: int,
        samples: int,
        lengths: int | None = None,
        flops: float | None = None,
    ) -> None:
        """Record one reading.

        Args:
            time: seconds elapsed since the start (rising with each call).
            batches: batches seen on this device so far.
            samples: samples seen on this device so far (at least ``batches``).
            lengths: items (tokens, ...) seen on this device so far (at least ``samples``).
            flops: FLOPs this device did since the previous update (per batch,
                e.g. from :func:`measure_flops`).

        Raises:
            ValueError: a total did not rise, fewer samples than batches, fewer
                items than samples, or lengths given on some updates only.
        """
        if samples < batches:
            raise ValueError(
                f"Throughput.update: samples ({samples}) must be at least batches ({batches}): "
                "each batch holds one sample or more."
            )
        if lengths is not None and lengths < samples:
            raise ValueError(
                f"Throughput.update: lengths ({lengths}) must be at least samples ({samples}): "
                "each sample holds one item or more."
            )
        if (lengths is None) != (not self._lengths.values) and self._time.values:
            raise ValueError(
                "Throughput.update: pass lengths on every update or on none; a window with "
                "some lengths missing has no items-per-second rate."
            )
        self._time.append(time)
        self._batches.append(batches)
        self._samples.append(samples)
        if lengths is not None:
            self._lengths.append(lengths)
        if flops is not None:
            self._flops.append(flops * self.world_size)  # the whole job's, as Lightning counts

    def compute(self) -> dict[str, float]:
        """The totals, and the rates once the window is full.

        Returns:
            Metric name to value (see the class docstring for the names).

        Raises:
            RuntimeError: before the first :meth:`update`.
        """
        if not self._time.values:
            raise RuntimeError("Throughput.compute() was called before any update().")
        device = f"device{self.separator}"
        metrics: dict[str, float] = {
            "time": self._time.values[-1],
            "batches": self._batches.values[-1],
            "samples": self._samples.values[-1],
        }
        if self._lengths.values:
            metrics["lengths"] = self._lengths.values[-1]
        several = self.world_size > 1
        elapsed = self._time.span()
        if self._time.full:
            rates = {
                "batches_per_sec": self._batches.span() / elapsed,
                "samples_per_sec": self._samples.span() / elapsed,
            }
            if self._lengths.full:
                rates["items_per_sec"] = self._lengths.span() / elapsed
            for name, rate in rates.items():
                metrics[device + name] = rate
                if several:
                    metrics[name] = rate * self.world_size
        if len(self._flops) == self.window_size:
            # The first update's FLOPs were done before the window's first reading.
            job_flops_per_sec = (sum(self._flops) - self._flops[0]) / elapsed
            per_device = job_flops_per_sec / self.world_size
            if several:
                metrics["flops_per_sec"] = job_flops_per_sec
            metrics[device + "flops_per_sec"] = per_device
            if self.available_flops:
                metrics[device + "mfu"] = per_device / self.available_flops
        return metrics

    def reset(self) -> None:
        """Forget every reading (a new stage or run starts)."""
        for window in (self._time, self._batches, self._samples, self._lengths):
            window.values.clear()
        self._flops.clear()


def measure_flops(
    model: torch.nn.Module,
    forward_fn: Callable[[], torch.Tensor],
    loss_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> int:
    """The FLOPs of one forward pass (and its backward pass, with ``loss_fn``).

    Build the model and its input on the meta device (``with torch.device("meta"):``)
    so that counting allocates no memory and runs no kernel.

    Args:
        model: the model ``forward_fn`` runs (kept for Lightning's signature; the
            count covers whatever ``forward_fn`` does).
        forward_fn: runs the forward pass and returns its output.
        loss_fn: turns the output into a scalar loss; given, the loss and the
            backward pass are counted too.

    Returns:
        The total FLOPs counted.

    Example:
        >>> with torch.device("meta"):
        ...     model = torch.nn.Linear(4, 3, bias=False)
        ...     x = torch.randn(2, 4)
        >>> measure_flops(model, lambda: model(x))  # 2 * 2 * 4 * 3
        48
        >>> measure_flops(model, lambda: model(x), loss_fn=torch.Tensor.sum)
        96
    """
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        output = forward_fn()
        if loss_fn is not None:
            loss_fn(output).backward()  # type: ignore[no-untyped-call]
    return int(counter.get_total_flops())


#: Peak dense FLOPs per second by chip and dtype, from NVIDIA's data sheets
#: ("tfloat32": float32 matmuls on tensor cores).
_CUDA_FLOPS: dict[str, dict[str | torch.dtype, float]] = {
    "h200": {
        torch.float64: 3.4e13,
        torch.float32: 6.7e13,
        "tfloat32": 9.9e14,
        torch.bfloat16: 2.0e15,
        torch.float16: 2.0e15,
        torch.int8: 4.0e15,
    },
    "h100 sxm": {
        torch.float64: 67e12,
        torch.float32: 133.8e12,
        "tfloat32": 989.4e12,
        torch.bfloat16: 1978.8e12,
        torch.float16: 1978.8e12,
        torch.int8: 3957.8e12,
    },
    "h100 pcie": {
        torch.float64: 25.6e12,
        torch.float32: 51.2e12,
        "tfloat32": 378e12,
        torch.bfloat16: 756e12,
        torch.float16: 756e12,
        torch.int8: 1513e12,
    },
    "a100": {
        torch.float64: 9.7e12,
        torch.float32: 19.5e12,
        "tfloat32": 156e12,
        torch.bfloat16: 312e12,
        torch.float16: 312e12,
        torch.int8: 624e12,
    },
    "l4": {
        torch.float32: 30.3e12,
        "tfloat32": 60e12,
        torch.bfloat16: 121e12,
        torch.float16: 121e12,
        torch.int8: 242e12,
    },
    "t4": {
        torch.float32: 8.1e12,
        torch.float16: 65e12,
        torch.int8: 130e12,
    },
    "v100": {
        torch.float64: 7.8e12,
        torch.float32: 15.7e12,
        torch.float16: 125e12,
    },
}


def _chip(device_name: str) -> str | None:
    """The ``_CUDA_FLOPS`` key of a CUDA device name, or None when it is not listed."""
    name = device_name.lower()
    if "h200" in name:
        return "h200"
    if "h100" in name:
        # The PCIe card is slower; SXM (HBM3) and unnamed variants use the SXM figures.
        return "h100 pcie" if "pcie" in name else "h100 sxm"
    for chip in ("a100", "l4", "t4", "v100"):
        if chip in name.split() or f"{chip}-" in name:
            return chip
    return None


def get_available_flops(device: torch.device, dtype: torch.dtype | str) -> int | None:
    """The theoretical peak FLOPs per second of ``device`` computing in ``dtype``.

    An upper bound reached only by large matmuls; ``Throughput`` divides by it
    for ``device/mfu``. Known for some NVIDIA GPUs (H200, H100, A100, L4, T4,
    V100); float32 counts as TF32 when ``torch.get_float32_matmul_precision()``
    lets matmuls use it on an Ampere or newer GPU.

    Args:
        device: the device.
        dtype: the dtype matmuls run in (``torch.bfloat16`` under bf16-mixed).

    Returns:
        FLOPs per second, or None for a CPU or an unlisted GPU or dtype.

    Example:
        >>> get_available_flops(torch.device("cpu"), torch.float32) is None
        True
    """
    if device.type != "cuda":
        return None
    chip = _chip(torch.cuda.get_device_name(device))
    if chip is None:
        return None
    if (
        dtype is torch.float32
        and torch.cuda.get_device_capability(device) >= (8, 0)
        and torch.get_float32_matmul_precision() != "highest"
    ):
        dtype = "tfloat32"
    value = _CUDA_FLOPS[chip].get(dtype)
    return None if value is None else int(value)

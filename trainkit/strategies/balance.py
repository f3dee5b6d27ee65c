"""Cutting an ordered list of layers into contiguous pipeline stages, one per device.

A pipeline runs only as fast as its slowest stage, so the balancer minimises the
largest stage cost. The cost of a layer is its measured forward+backward time
(``balance="time"``), its parameter and buffer bytes (``balance="params"``), or the
user states the layer counts per stage outright.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from trainkit.messages import did_you_mean

BALANCES = ("time", "params")
_BALANCE_HINT = "use 'time', 'params' or a list of layer counts per stage, e.g. [2, 3]"
_SCALES = {
    "s": ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")),
    "bytes": ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B")),
}
_WHAT = {"s": "time", "bytes": "parameter bytes", "": "the given layer counts"}


@dataclass(frozen=True)
class Partition:
    """How many consecutive layers each stage holds, and what each stage costs.

    Args:
        sizes: layers per stage, each at least 1.
        costs: each stage's cost, the sum of its layers' costs.
        unit: ``"s"`` (seconds), ``"bytes"`` (parameter bytes) or ``""`` (user-given).

    Example:
        >>> partition = Partition(sizes=(2, 1), costs=(0.004, 0.010), unit="s")
        >>> partition.bounds()
        [(0, 2), (2, 3)]
        >>> print(partition.describe())
        3 layers in 2 stages, balanced by time:
          stage 0: layers 0-1 (2 layers), cost 4.00 ms
          stage 1: layer 2 (1 layer), cost 10.00 ms  <- bottleneck
        bottleneck: stage 1, cost 10.00 ms (71% of the total 14.00 ms)
    """

    sizes: tuple[int, ...]
    costs: tuple[float, ...]
    unit: str

    def __post_init__(self) -> None:
        if len(self.sizes) != len(self.costs) or any(size < 1 for size in self.sizes):
            raise ValueError(
                f"A Partition needs one cost per stage and at least one layer per stage; "
                f"got sizes={self.sizes}, costs={self.costs}."
            )

    def bounds(self) -> list[tuple[int, int]]:
        """``[start, stop)`` layer indices of each stage."""
        return _bounds(self.sizes)

    def describe(self) -> str:
        """One line per stage (layers, layer count, cost), then the bottleneck stage."""
        bottleneck = max(range(len(self.costs)), key=self.costs.__getitem__)
        total = sum(self.costs)
        what = _WHAT.get(self.unit, self.unit)
        lines = [
            f"{_plural(sum(self.sizes), 'layer')} in {_plural(len(self.sizes), 'stage')}, "
            f"balanced by {what}:"
        ]
        for stage, ((start, stop), cost) in enumerate(zip(self.bounds(), self.costs, strict=True)):
            layers = f"layer {start}" if stop - start == 1 else f"layers {start}-{stop - 1}"
            mark = "  <- bottleneck" if stage == bottleneck else ""
            lines.append(
                f"  stage {stage}: {layers} ({_plural(stop - start, 'layer')}), "
                f"cost {self._format(cost)}{mark}"
            )
        share = f" ({self.costs[bottleneck] / total:.0%} of the total {self._format(total)})"
        lines.append(
            f"bottleneck: stage {bottleneck}, cost {self._format(self.costs[bottleneck])}"
            + (share if total > 0 else "")
        )
        return "\n".join(lines)

    def _format(self, value: float) -> str:
        scales = _SCALES.get(self.unit)
        if scales is None:
            return f"{value:g} {self.unit}".rstrip()
        # The largest unit the value reaches; tiny values fall through to the smallest.
        scale, suffix = next(((s, x) for s, x in scales if value >= s), scales[-1])
        return f"{value / scale:.2f} {suffix}"


def partition_costs(costs: Sequence[float], num_stages: int) -> tuple[int, ...]:
    """The contiguous split of ``costs`` into stages whose largest stage sum is smallest.

    Exact dynamic programming over (stages, layers) in O(stages * layers * log(layers)):
    the best split of the first ``end`` layers into ``s`` stages tries every start of
    the last stage, and because the best cost of the stages before it only grows with
    the start while the last stage's cost only shrinks, the best start sits where the
    two cross and is found by bisection. Ties go to the later start, so the answer is
    deterministic.

    Args:
        costs: each layer's cost, finite and non-negative (zero is fine).
        num_stages: how many stages to cut the layers into.

    Returns:
        The number of layers in each stage, each at least 1.

    Raises:
        ValueError: if a cost is negative or not finite, or the stages cannot all get a layer.

    Example:
        >>> partition_costs([1, 1, 10, 1, 1], 3)
        (2, 1, 2)
    """
    values = [float(cost) for cost in costs]
    _check_stage_count(len(values), num_stages)
    for index, value in enumerate(values):
        if not math.isfinite(value) or value < 0:
            raise ValueError(
                f"Layer {index} has cost {value}; layer costs must be finite and >= 0. "
                "Pass times in seconds or sizes in bytes."
            )
    count = len(values)
    prefix = list(itertools.accumulate(values, initial=0.0))
    # best[end]: the smallest largest stage over layers [0, end) in the current number
    # of stages. One stage: the whole prefix.
    best = prefix
    starts: list[list[int]] = []  # starts[s - 2][end]: where stage s - 1 (the last) starts
    for stages in range(2, num_stages + 1):
        previous, best = best, [math.inf] * (count + 1)
        start_of_last = [0] * (count + 1)
        # Each of the stages still to come needs a layer, so longer prefixes are useless.
        for end in range(stages, count - (num_stages - stages) + 1):
            start_of_last[end], best[end] = _best_last_start(previous, prefix, stages - 1, end)
        starts.append(start_of_last)
    sizes = []
    end = count
    for start_of_last in reversed(starts):
        sizes.append(end - start_of_last[end])
        end = start_of_last[end]
    sizes.append(end)
    return tuple(reversed(sizes))


def _best_last_start(
    previous: list[float], prefix: list[float], low: int, end: int
) -> tuple[int, float]:
    """The start in ``[low, end)`` of the last stage of layers ``[0, end)``, and its cost.

    ``previous[start]`` (the earlier stages) never decreases with ``start`` and the last
    stage ``prefix[end] - prefix[start]`` never increases (non-negative costs; float
    addition and subtraction are monotone, so this holds in floating point too). The
    first start where the earlier stages cost at least the last one is the crossing:
    the optimum is there or one before it.
    """
    lo, hi = low, end - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if previous[mid] >= prefix[end] - prefix[mid]:
            hi = mid
        else:
            lo = mid + 1
    start, cost = lo, max(previous[lo], prefix[end] - prefix[lo])
    if lo > low:
        before = max(previous[lo - 1], prefix[end] - prefix[lo - 1])
        if before < cost:
            start, cost = lo - 1, before
    return start, cost


def _check_stage_count(num_layers: int, num_stages: int) -> None:
    if isinstance(num_stages, bool) or not isinstance(num_stages, int) or num_stages < 1:
        raise ValueError(
            f"num_stages={num_stages!r} must be an integer of at least 1: the number of "
            "stage devices."
        )
    if num_stages > num_layers:
        raise ValueError(
            f"The model has {_plural(num_layers, 'layer')}, which cannot fill {num_stages} "
            "stages; use fewer stage devices or split a layer."
        )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def measure_layer_times(
    layers: Sequence[nn.Module], sample: torch.Tensor, *, repeats: int = 3, warmup: int = 1
) -> list[float]:
    """Forward+backward seconds of each layer, feeding each layer the previous one's output.

    Each layer runs in training mode (training is what the pipeline will run) and its
    backward is ``torch.autograd.grad`` with a random upstream gradient, so no ``.grad``
    is ever written. Buffers (e.g. batch-norm statistics), training modes and the RNG
    state are restored afterwards, so measuring leaves no trace on the model or on a
    seeded run.

    Args:
        layers: the model's layers in order, already on ``sample``'s device.
        sample: one input batch for the first layer.
        repeats: timed runs per layer; the median is kept.
        warmup: untimed runs per layer first (allocator, kernel selection).

    Returns:
        Seconds per layer, each positive.

    Example:
        >>> layers = [nn.Linear(8, 8), nn.ReLU()]
        >>> times = measure_layer_times(layers, torch.randn(4, 8))
        >>> len(times), all(t > 0 for t in times)
        (2, True)
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"Need repeats >= 1 and warmup >= 0, got {repeats=} and {warmup=}.")
    # A run shorter than the clock can see reads as 0; report the clock's tick instead.
    tick = time.get_clock_info("perf_counter").resolution
    cuda_devices = [sample.device] if sample.is_cuda else []
    times = []
    with torch.random.fork_rng(devices=cuda_devices), torch.enable_grad():
        inputs = sample.detach()
        for layer in layers:
            with _training_untouched(layer):
                for _ in range(warmup):
                    _forward_backward(layer, inputs)
                runs = []
                for _ in range(repeats):
                    _synchronize(sample)
                    start = time.perf_counter()
                    output = _forward_backward(layer, inputs)
                    _synchronize(sample)
                    runs.append(time.perf_counter() - start)
            times.append(max(statistics.median(runs), tick))
            inputs = output
    return times


def _forward_backward(layer: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """One training step's work for one layer; returns its output, detached."""
    inputs = inputs.detach().requires_grad_(inputs.is_floating_point())
    output = layer(inputs)
    if not isinstance(output, torch.Tensor):
        raise TypeError(
            f"balance='time' needs each layer to return one tensor, but {type(layer).__name__} "
            f"returned {type(output).__name__}. Use balance='params' or a list of layer counts."
        )
    wrt = [tensor for tensor in (inputs, *layer.parameters()) if tensor.requires_grad]
    if output.requires_grad and wrt:
        upstream = torch.randn_like(output)
        torch.autograd.grad(output, wrt, grad_outputs=upstream, allow_unused=True)
    return output.detach()


def _synchronize(sample: torch.Tensor) -> None:
    # CUDA kernels run asynchronously: without a sync the clock times the launch only.
    if sample.is_cuda:
        torch.cuda.synchronize(sample.device)


@contextmanager
def _training_untouched(layer: nn.Module) -> Iterator[None]:
    """Run ``layer`` in training mode, then put back every submodule's mode and buffers."""
    modes = [(module, module.training) for module in layer.modules()]
    buffers = [(buffer, buffer.detach().clone()) for buffer in layer.buffers()]
    layer.train()
    try:
        yield
    finally:
        for module, mode in modes:
            module.training = mode
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)


def layer_param_bytes(layers: Sequence[nn.Module]) -> list[float]:
    """Bytes of parameters and buffers in each layer: what a stage must hold in memory.

    A tensor shared between layers (e.g. tied embeddings) counts in each layer holding it.

    Args:
        layers: the model's layers in order.

    Example:
        >>> layer_param_bytes([nn.Linear(4, 4), nn.ReLU(), nn.BatchNorm1d(4)])
        [80.0, 0.0, 72.0]
    """
    sizes = []
    for layer in layers:
        tensors = itertools.chain(layer.parameters(), layer.buffers())
        sizes.append(float(sum(tensor.numel() * tensor.element_size() for tensor in tensors)))
    return sizes


def balance_layers(
    layers: Sequence[nn.Module],
    num_stages: int,
    balance: str | Sequence[int],
    sample: torch.Tensor | None = None,
) -> Partition:
    """Cut ``layers`` into ``num_stages`` contiguous stages.

    Args:
        layers: the model's layers in order, e.g. the children of an ``nn.Sequential``.
        num_stages: the number of stage devices.
        balance: ``"time"`` (measure each layer on ``sample``), ``"params"`` (parameter and
            buffer bytes), or a list of layer counts per stage (costs are then layer counts).
        sample: one input batch for the first layer; needed for ``balance="time"``.

    Raises:
        ValueError: for an unknown balance, ``"time"`` without a sample, a list that does
            not fit the layers and stages, or more stages than layers.

    Example:
        >>> model = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.Linear(64, 4))
        >>> balance_layers(list(model), 2, "params").sizes
        (2, 2)
        >>> balance_layers(list(model), 2, [3, 1]).costs
        (3.0, 1.0)
    """
    layers = list(layers)
    _check_stage_count(len(layers), num_stages)
    if isinstance(balance, str):
        if balance == "time":
            if sample is None:
                raise ValueError(
                    "balance='time' times each layer on an input batch, but no sample was "
                    "given. Pass sample=<one batch>, or use balance='params' or a list of "
                    "layer counts per stage."
                )
            costs, unit = measure_layer_times(layers, sample), "s"
        elif balance == "params":
            costs, unit = layer_param_bytes(layers), "bytes"
        else:
            raise ValueError(
                f"Unknown balance {balance!r}; {_BALANCE_HINT}.{did_you_mean(balance, BALANCES)}"
            )
        sizes = partition_costs(costs, num_stages)
    else:
        sizes = _check_layer_counts(balance, len(layers), num_stages)
        costs, unit = [1.0] * len(layers), ""
    stage_costs = tuple(math.fsum(costs[start:stop]) for start, stop in _bounds(sizes))
    return Partition(sizes=sizes, costs=stage_costs, unit=unit)


def _bounds(sizes: Sequence[int]) -> list[tuple[int, int]]:
    stops = list(itertools.accumulate(sizes))
    return list(zip([0, *stops[:-1]], stops, strict=True))


def _check_layer_counts(
    balance: Sequence[int], num_layers: int, num_stages: int
) -> tuple[int, ...]:
    if not isinstance(balance, Sequence) or not all(
        isinstance(size, int) and not isinstance(size, bool) for size in balance
    ):
        raise TypeError(f"balance={balance!r} is not valid; {_BALANCE_HINT}.")
    sizes = tuple(balance)
    if len(sizes) != num_stages:
        raise ValueError(
            f"balance={list(sizes)} gives {len(sizes)} stages, but there are {num_stages} "
            "stage devices; give one layer count per stage."
        )
    if any(size < 1 for size in sizes):
        raise ValueError(
            f"balance={list(sizes)} has a stage with no layers; every stage needs at least one."
        )
    if sum(sizes) != num_layers:
        raise ValueError(
            f"balance={list(sizes)} places {sum(sizes)} layers, but the model has "
            f"{num_layers}; the counts must add up to the number of layers."
        )
    return sizes

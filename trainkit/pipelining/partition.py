"""Exact min-max partitioning of layer costs into contiguous stages, and the result.

:func:`partition_costs` cuts a list of per-layer costs into the contiguous stages
whose largest stage cost is smallest (a pipeline runs only as fast as its slowest
stage); :class:`Partition` records a split, its stage costs and how to describe it.
Pure arithmetic: the costs come from :mod:`trainkit.pipelining.layer_costs` or the user.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

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
        return stage_bounds(self.sizes)

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
    check_stage_count(len(values), num_stages)
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


def check_stage_count(num_layers: int, num_stages: int) -> None:
    """Raise unless ``num_stages`` is a positive integer no larger than ``num_layers``.

    Args:
        num_layers: how many layers there are to place.
        num_stages: how many stages (stage devices) must each get at least one.

    Raises:
        ValueError: if ``num_stages`` is not an integer of at least 1, or exceeds
            ``num_layers``.
    """
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


def stage_bounds(sizes: Sequence[int]) -> list[tuple[int, int]]:
    """``[start, stop)`` layer indices of each stage, given the layers per stage.

    Args:
        sizes: layers per stage, in order.

    Example:
        >>> stage_bounds([2, 1, 3])
        [(0, 2), (2, 3), (3, 6)]
    """
    stops = list(itertools.accumulate(sizes))
    return list(zip([0, *stops[:-1]], stops, strict=True))

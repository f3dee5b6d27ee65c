"""Cutting an ordered list of layers into contiguous pipeline stages, one per device.

A pipeline runs only as fast as its slowest stage, so the balancer minimises the
largest stage cost. The cost of a layer is its measured forward+backward time
(``balance="time"``), its parameter and buffer bytes (``balance="params"``), or the
user states the layer counts per stage outright.

The exact partitioning lives in :mod:`trainkit.pipelining.partition` and the layer
costs in :mod:`trainkit.pipelining.layer_costs`; this module picks the costs that
``balance`` asks for and cuts the layers by them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from trainkit.pipelining.layer_costs import layer_param_bytes, measure_layer_times
from trainkit.pipelining.partition import (
    Partition,
    check_stage_count,
    partition_costs,
    stage_bounds,
)
from trainkit.utilities.messages import did_you_mean

__all__ = [
    "BALANCES",
    "Partition",
    "balance_layers",
    "layer_param_bytes",
    "measure_layer_times",
    "partition_costs",
]

BALANCES = ("time", "params")
_BALANCE_HINT = "use 'time', 'params' or a list of layer counts per stage, e.g. [2, 3]"


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
    check_stage_count(len(layers), num_stages)
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
    stage_costs = tuple(math.fsum(costs[start:stop]) for start, stop in stage_bounds(sizes))
    return Partition(sizes=sizes, costs=stage_costs, unit=unit)


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

"""MetricStore: step values stay on the device; epoch values reduce exactly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from trainkit.loops.metric_store import MetricStore
from trainkit.loops.results import display_names, to_floats


def store() -> MetricStore:
    return MetricStore(lambda values, point, always=False: [v for _, v, _ in values], "training")


def opts(
    on_step: bool = False, on_epoch: bool = True, reduce_fx: str = "mean", sync_dist: bool = False
) -> tuple[bool, bool, bool, bool, bool, str]:
    return (on_step, on_epoch, False, True, sync_dist, reduce_fx)


def test_epoch_mean_is_weighted_by_batch_size() -> None:
    metrics = store()
    metrics.log("acc", torch.tensor(1.0), opts(), 30)
    metrics.log("acc", torch.tensor(0.0), opts(), 10)
    assert to_floats(metrics.epoch_values()) == {"acc": pytest.approx(0.75)}


@pytest.mark.parametrize(("reduce_fx", "expected"), [("sum", 6.0), ("max", 3.0), ("min", 1.0)])
def test_other_reductions(reduce_fx: str, expected: float) -> None:
    metrics = store()
    for value in (1.0, 3.0, 2.0):
        metrics.log("x", torch.tensor(value), opts(reduce_fx=reduce_fx), 1)
    assert to_floats(metrics.epoch_values())["x"] == expected


def test_python_numbers_and_tensors_mix() -> None:
    metrics = store()
    metrics.log("x", 1.0, opts(), 1)
    metrics.log("x", torch.tensor(3.0), opts(), 1)
    assert to_floats(metrics.epoch_values())["x"] == pytest.approx(2.0)


def test_step_and_epoch_names_and_no_graph_kept() -> None:
    metrics = store()
    weight = torch.ones(1, requires_grad=True)
    value = (weight * 2).sum()
    metrics.log("loss", value, opts(on_step=True, on_epoch=True), 4)
    step = metrics.step_values(sync=False)
    assert set(step) == {"loss_step"} and not step["loss_step"].requires_grad
    epoch = metrics.epoch_values()
    assert set(epoch) == {"loss_epoch"} and not epoch["loss_epoch"].requires_grad
    assert display_names(metrics, prog_bar=None, logger=True) == {"loss_step", "loss_epoch"}


def test_the_logged_tensor_is_never_modified_in_place() -> None:
    metrics = store()
    value = torch.tensor(2.0)
    metrics.log("x", value, opts(), 1)
    metrics.log("x", torch.tensor(4.0), opts(), 1)
    assert value.item() == 2.0


def per_value(all_reduce: Callable[[torch.Tensor, str], torch.Tensor]) -> Callable[..., Any]:
    """A strategy's reduce_logged made of a per-value all_reduce."""

    def reduce_logged(values: Any, point: str, always: bool = False) -> list[torch.Tensor]:
        return [all_reduce(value, op) for _, value, op in values]

    return reduce_logged


def test_sync_dist_reduces_sum_and_weight_across_processes() -> None:
    calls: list[str] = []

    def fake_all_reduce(tensor: torch.Tensor, op: str) -> torch.Tensor:
        calls.append(op)
        return tensor * 2  # as if a second process had the same values

    metrics = MetricStore(per_value(fake_all_reduce), "training")
    metrics.log("acc", torch.tensor(0.5), opts(sync_dist=True), 8)
    assert to_floats(metrics.epoch_values())["acc"] == pytest.approx(0.5)
    assert calls == ["sum", "sum"]  # total and weight, never a mean of means


def test_bad_reduce_fx() -> None:
    with pytest.raises(ValueError, match=r"reduce_fx='median'\) is not supported; use one of mean"):
        store().log("x", 1.0, opts(reduce_fx="median"), 1)

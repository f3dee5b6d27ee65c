"""Throughput, measure_flops, get_available_flops: Lightning's values and names."""

from __future__ import annotations

import pytest
import torch

from trainkit.utilities.throughput import Throughput, get_available_flops, measure_flops

READINGS = [
    (1.0, 1, 4, 10, 100),
    (2.0, 2, 8, 25, 100),
    (4.0, 3, 12, 30, 200),
    (5.0, 4, 16, 40, 100),
]


def test_rates_over_the_window_match_lightnings() -> None:
    throughput = Throughput(available_flops=50, world_size=2, window_size=3)
    results = []
    for time, batches, samples, lengths, flops in READINGS:
        throughput.update(time=time, batches=batches, samples=samples, lengths=lengths, flops=flops)
        results.append(throughput.compute())
    # Until the window is full: totals only.
    assert results[1] == {"time": 2.0, "batches": 2, "samples": 8, "lengths": 25}
    # Lightning 2.6's values for the same readings.
    assert results[2] == pytest.approx(
        {
            "time": 4.0,
            "batches": 3,
            "samples": 12,
            "lengths": 30,
            "device/batches_per_sec": 2 / 3,
            "device/samples_per_sec": 8 / 3,
            "batches_per_sec": 4 / 3,
            "samples_per_sec": 16 / 3,
            "device/items_per_sec": 20 / 3,
            "items_per_sec": 40 / 3,
            "flops_per_sec": 200.0,
            "device/flops_per_sec": 100.0,
            "device/mfu": 2.0,
        }
    )
    assert results[3]["device/items_per_sec"] == pytest.approx(5.0)


def test_one_device_has_no_job_totals_and_separator_is_used() -> None:
    throughput = Throughput(window_size=2, separator=".")
    throughput.update(time=1.0, batches=1, samples=2)
    throughput.update(time=1.5, batches=2, samples=4)
    assert throughput.compute() == {
        "time": 1.5,
        "batches": 2,
        "samples": 4,
        "device.batches_per_sec": 2.0,
        "device.samples_per_sec": 4.0,
    }
    throughput.reset()
    throughput.update(time=0.1, batches=1, samples=1)
    assert throughput.compute()["time"] == 0.1


def test_mistakes_are_explained() -> None:
    throughput = Throughput(window_size=2)
    throughput.update(time=1.0, batches=1, samples=1)
    with pytest.raises(ValueError, match="running totals"):
        throughput.update(time=1.0, batches=2, samples=2)
    with pytest.raises(ValueError, match="at least batches"):
        Throughput().update(time=1.0, batches=2, samples=1)
    with pytest.raises(ValueError, match="at least samples"):
        Throughput().update(time=1.0, batches=1, samples=2, lengths=1)
    with pytest.raises(ValueError, match="window_size=2 or more"):
        Throughput(window_size=1)
    with pytest.raises(RuntimeError, match="before any update"):
        Throughput().compute()


def test_measure_flops_on_the_meta_device() -> None:
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        x = torch.randn(5, 8)
    forward = measure_flops(model, lambda: model(x))
    assert forward == 2 * 5 * (8 * 16 + 16 * 4)
    # Backward: gradients of both weights and of the hidden activation (not of the input).
    with_backward = measure_flops(model, lambda: model(x), loss_fn=torch.Tensor.sum)
    assert with_backward == forward + 2 * 5 * (8 * 16 + 16 * 4) + 2 * 5 * 16 * 4


def test_available_flops() -> None:
    assert get_available_flops(torch.device("cpu"), torch.float32) is None
    if torch.cuda.is_available():
        value = get_available_flops(torch.device("cuda"), torch.bfloat16)
        name = torch.cuda.get_device_name()
        assert value is None or value > 1e13, name

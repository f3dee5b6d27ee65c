"""The stage balancer: exact splits, layer costs, and clear errors."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Sequence

import pytest
import torch
from torch import nn

from trainkit.pipelining.balance import (
    Partition,
    balance_layers,
    layer_param_bytes,
    measure_layer_times,
    partition_costs,
)


def _stage_sums(costs: Sequence[float], sizes: Sequence[int]) -> list[float]:
    stops = list(itertools.accumulate(sizes))
    return [sum(costs[start:stop]) for start, stop in zip([0, *stops[:-1]], stops, strict=True)]


def _brute_force_best(costs: Sequence[float], num_stages: int) -> float:
    """The smallest largest stage over every contiguous split, by enumeration."""
    best = float("inf")
    for cuts in itertools.combinations(range(1, len(costs)), num_stages - 1):
        edges = [0, *cuts, len(costs)]
        best = min(best, max(sum(costs[a:b]) for a, b in itertools.pairwise(edges)))
    return best


def _check_valid(sizes: tuple[int, ...], num_layers: int, num_stages: int) -> None:
    assert len(sizes) == num_stages
    assert all(size >= 1 for size in sizes)
    assert sum(sizes) == num_layers


@pytest.mark.parametrize("integer_costs", [True, False])
def test_partition_is_optimal_against_enumeration(integer_costs: bool) -> None:
    rng = random.Random(1234)
    for _ in range(400):
        num_layers = rng.randint(1, 10)
        num_stages = rng.randint(1, num_layers)
        costs: list[float] = [
            float(rng.randint(0, 20)) if integer_costs else rng.expovariate(1.0)
            for _ in range(num_layers)
        ]
        if rng.random() < 0.3:  # zero-cost layers (activations) among the others
            costs = [0.0 if rng.random() < 0.4 else cost for cost in costs]
        sizes = partition_costs(costs, num_stages)
        _check_valid(sizes, num_layers, num_stages)
        found, best = max(_stage_sums(costs, sizes)), _brute_force_best(costs, num_stages)
        if integer_costs:
            assert found == best, (costs, num_stages, sizes)
        else:
            assert found == pytest.approx(best, rel=1e-12), (costs, num_stages, sizes)
        assert partition_costs(costs, num_stages) == sizes  # deterministic


def test_partition_is_optimal_for_many_layers() -> None:
    # Too many splits to enumerate: check instead that no split does better, i.e.
    # that greedy packing under (best - 1) needs more stages than there are.
    rng = random.Random(7)
    costs = [float(rng.randint(0, 100)) for _ in range(600)]
    sizes = partition_costs(costs, 8)
    _check_valid(sizes, 600, 8)
    best = max(_stage_sums(costs, sizes))
    limit, stages, current = best - 1, 1, 0.0
    assert max(costs) <= limit
    for cost in costs:
        if current + cost > limit:
            stages, current = stages + 1, 0.0
        current += cost
    assert stages > 8


@pytest.mark.parametrize(
    ("costs", "num_stages", "sizes"),
    [
        ([1, 1, 10, 1, 1], 3, (2, 1, 2)),  # the heavy layer gets a stage of its own
        ([1, 1, 1, 1, 1, 1], 3, (2, 2, 2)),
        ([1, 2, 3, 4, 5], 1, (5,)),
        ([5], 1, (1,)),
        ([3, 3, 3], 3, (1, 1, 1)),
        ([10, 1, 1, 1, 1, 1, 1], 2, (1, 6)),
        ([1, 1, 1, 1, 1, 1, 10], 2, (6, 1)),
        ([1, 2, 3, 4, 5, 6, 7, 8, 9], 3, (5, 2, 2)),  # 15 | 13 | 17
    ],
)
def test_known_splits(costs: list[float], num_stages: int, sizes: tuple[int, ...]) -> None:
    assert partition_costs(costs, num_stages) == sizes


def test_zero_cost_layers_are_fine() -> None:
    costs = [0.0, 4.0, 0.0, 0.0, 4.0, 0.0]
    sizes = partition_costs(costs, 2)
    _check_valid(sizes, 6, 2)
    assert max(_stage_sums(costs, sizes)) == 4.0
    _check_valid(partition_costs([0.0] * 4, 3), 4, 3)


def test_partition_bounds_and_describe() -> None:
    partition = Partition(sizes=(2, 1, 3), costs=(2e-3, 0.5, 1e-3), unit="s")
    assert partition.bounds() == [(0, 2), (2, 3), (3, 6)]
    text = partition.describe()
    assert text.splitlines() == [
        "6 layers in 3 stages, balanced by time:",
        "  stage 0: layers 0-1 (2 layers), cost 2.00 ms",
        "  stage 1: layer 2 (1 layer), cost 500.00 ms  <- bottleneck",
        "  stage 2: layers 3-5 (3 layers), cost 1.00 ms",
        "bottleneck: stage 1, cost 500.00 ms (99% of the total 503.00 ms)",
    ]
    in_bytes = Partition(sizes=(1, 1), costs=(3e6, 512.0), unit="bytes").describe()
    assert "cost 3.00 MB  <- bottleneck" in in_bytes
    assert "cost 512.00 B" in in_bytes
    assert "balanced by parameter bytes" in in_bytes
    with pytest.raises(ValueError, match="at least one layer per stage"):
        Partition(sizes=(2, 0), costs=(1.0, 0.0), unit="")


def test_params_balance_gives_the_wide_layer_its_own_stage() -> None:
    model = nn.Sequential(
        nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1024), nn.ReLU(), nn.Linear(1024, 8)
    )
    sizes = layer_param_bytes(list(model))
    assert sizes == [(8 * 32 + 32) * 4.0, 0.0, (32 * 1024 + 1024) * 4.0, 0.0, (1024 * 8 + 8) * 4.0]
    partition = balance_layers(list(model), 3, "params")
    assert partition.unit == "bytes"
    # Optimal: the wide layer's stage holds no other Linear (ReLUs weigh nothing).
    assert partition.costs == (sizes[0], sizes[2], sizes[4])
    assert "balanced by parameter bytes" in partition.describe()


def test_param_bytes_count_buffers_and_dtype() -> None:
    layers = [nn.BatchNorm1d(4), nn.Linear(4, 4).to(torch.float64), nn.Identity()]
    # BatchNorm: weight, bias, running mean and variance (float32) + an int64 counter.
    assert layer_param_bytes(layers) == [4 * 4 * 4 + 8, (16 + 4) * 8, 0.0]


def _light_heavy_model() -> nn.Sequential:
    # Layer 2 is many wide matmuls: hundreds of times slower than the small layers
    # around it, so the test holds on a busy machine too.
    heavy = nn.Sequential(
        nn.Linear(32, 512), *[nn.Linear(512, 512) for _ in range(4)], nn.Linear(512, 32)
    )
    return nn.Sequential(nn.Linear(32, 32), nn.ReLU(), heavy, nn.Linear(32, 32))


# More runs than the default: a shared CI machine can stall any single run.
_ROBUST = {"repeats": 7, "warmup": 2}


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Time with one intra-op thread.

    On a busy machine with few cores, a pool thread that lost its core stalls every op
    waiting on it (tens of ms, even for a tiny Linear), which would swamp the
    light/heavy difference these tests rely on.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_thread")
def test_measure_layer_times_finds_the_heavy_layer() -> None:
    torch.manual_seed(0)
    model = _light_heavy_model()
    times = measure_layer_times(list(model), torch.randn(64, 32), **_ROBUST)
    assert len(times) == 4
    assert all(isinstance(t, float) and t > 0 for t in times)
    assert max(range(4), key=times.__getitem__) == 2


@pytest.mark.usefixtures("one_thread")
def test_time_balance_gives_the_heavy_layer_its_own_stage() -> None:
    torch.manual_seed(0)
    layers = list(_light_heavy_model())
    times = measure_layer_times(layers, torch.randn(64, 32), **_ROBUST)
    assert max(range(4), key=times.__getitem__) == 2
    partition = balance_layers(layers, 3, "time", torch.randn(64, 32))
    # Every layer takes some time, so the heavy layer shares its stage with nothing.
    assert partition.sizes == (2, 1, 1)
    assert partition.unit == "s"
    assert "stage 1: layer 2 (1 layer)" in partition.describe()


def test_measuring_leaves_the_model_untouched() -> None:
    torch.manual_seed(0)
    first, last = nn.Linear(8, 16), nn.Linear(16, 4)
    model = nn.Sequential(first, nn.BatchNorm1d(16), nn.Dropout(0.5), nn.Sequential(last))
    model.eval()
    model[3].train()  # mixed modes, including a submodule inside a layer
    first.weight.grad = torch.randn_like(first.weight)
    last.bias.grad = torch.randn_like(last.bias)
    state = {name: value.clone() for name, value in model.state_dict().items()}
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    modes = {name: module.training for name, module in model.named_modules()}
    sample = torch.randn(16, 8)
    rng_state = torch.get_rng_state()

    with torch.no_grad():  # measuring still works when the caller disabled autograd
        times = measure_layer_times(list(model), sample, repeats=2, warmup=1)

    assert len(times) == 4
    for name, value in model.state_dict().items():  # params and batch-norm statistics
        assert torch.equal(value, state[name]), name
    for name, parameter in model.named_parameters():
        if name in grads:
            assert parameter.grad is not None and torch.equal(parameter.grad, grads[name])
        else:
            assert parameter.grad is None, name
    assert {name: module.training for name, module in model.named_modules()} == modes
    assert torch.equal(torch.get_rng_state(), rng_state)  # a seeded run is not disturbed


def test_measure_layer_times_handles_integer_inputs() -> None:
    layers = [nn.Embedding(10, 8), nn.Linear(8, 2)]
    times = measure_layer_times(layers, torch.randint(0, 10, (4, 3)), repeats=1, warmup=0)
    assert len(times) == 2 and all(t > 0 for t in times)
    assert all(p.grad is None for layer in layers for p in layer.parameters())


def test_explicit_layer_counts() -> None:
    layers = [nn.Linear(2, 2) for _ in range(5)]
    partition = balance_layers(layers, 2, [3, 2])
    assert partition == Partition(sizes=(3, 2), costs=(3.0, 2.0), unit="")
    assert "balanced by the given layer counts" in partition.describe()


def _layers(count: int) -> list[nn.Module]:
    return [nn.Linear(2, 2) for _ in range(count)]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: partition_costs([1, 2], 0), ValueError, r"num_stages=0 must be .* at least 1"),
        (
            lambda: partition_costs([1, 2, 3], 4),
            ValueError,
            r"The model has 3 layers, which cannot fill 4 stages; use fewer stage devices "
            r"or split a layer",
        ),
        (lambda: partition_costs([], 1), ValueError, r"has 0 layers, which cannot fill 1"),
        (lambda: partition_costs([1, -1], 1), ValueError, r"Layer 1 has cost -1.0; .* >= 0"),
        (lambda: partition_costs([float("nan")], 1), ValueError, r"Layer 0 has cost nan"),
        (lambda: balance_layers(_layers(3), 0, "params"), ValueError, r"at least 1"),
        (lambda: balance_layers(_layers(1), 2, "params"), ValueError, r"has 1 layer, which"),
        (
            lambda: balance_layers(_layers(3), 3, [1, 2]),
            ValueError,
            r"balance=\[1, 2\] gives 2 stages, but there are 3 stage devices",
        ),
        (
            lambda: balance_layers(_layers(3), 2, [1, 1]),
            ValueError,
            r"places 2 layers, but the model has 3; the counts must add up",
        ),
        (lambda: balance_layers(_layers(3), 2, [0, 3]), ValueError, r"a stage with no layers"),
        (lambda: balance_layers(_layers(3), 2, [-1, 4]), ValueError, r"a stage with no layers"),
        (
            lambda: balance_layers(_layers(3), 2, [1.5, 1.5]),  # type: ignore[list-item]
            TypeError,
            r"balance=\[1.5, 1.5\] is not valid; use 'time', 'params' or a list of layer counts",
        ),
        (
            lambda: balance_layers(_layers(3), 2, "param"),
            ValueError,
            r"Unknown balance 'param'; use 'time', 'params' or a list of layer counts per "
            r"stage.* Did you mean 'params'\?",
        ),
        (
            lambda: balance_layers(_layers(3), 2, "time"),
            ValueError,
            r"balance='time' .* no sample was given\. Pass sample=",
        ),
    ],
)
def test_errors_say_what_is_wrong_and_how_to_fix_it(
    call: Callable[[], object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        call()

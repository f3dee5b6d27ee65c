"""Module.all_gather: every rank's data in rank order; gradients flow back when asked."""

from __future__ import annotations

import pytest
import torch

from tests.distributed import gather_workers as workers
from tests.distributed.spawn import run_processes


@pytest.mark.parametrize("world", [2, 3])
def test_all_gather_returns_every_ranks_data_in_rank_order(world: int) -> None:
    ranks = run_processes(workers.gather_in_a_module, world, "ddp")
    for seen in ranks:
        expected = torch.stack([torch.full((2, 3), float(r)) for r in range(world)])
        assert torch.equal(seen["tensor"], expected)
        assert torch.equal(seen["nested"]["a"][0], expected[:, 0])
        assert seen["nested"]["a"][1].tolist() == list(range(world))
        assert seen["number"].tolist() == [10 * r for r in range(world)]


def test_on_one_device_the_input_comes_back_unchanged() -> None:
    seen = workers.gather_in_a_module("auto")
    assert seen["tensor"] is seen["input"]  # no new dimension, as Lightning documents
    assert seen["number"] == 0


@pytest.mark.parametrize("world", [2, 3])
def test_sync_grads_sends_each_rank_the_gradient_of_its_own_input(world: int) -> None:
    ranks = run_processes(workers.gather_gradients, world)
    for rank, result in enumerate(ranks):
        inputs = [[r + 1.0, 2.0 * r + 1.0] for r in range(world)]
        assert result["gathered"].tolist() == inputs
        # d/dx_rank of sum_s (s + 1) * (rank + 1) * x_rank = (rank + 1) * world(world + 1)/2
        expected = (rank + 1) * world * (world + 1) / 2
        assert result["grad"].tolist() == [expected, expected]
        assert result["without_sync_has_graph"] is False


def test_the_process_group_serves_point_to_point_messages_and_collectives() -> None:
    ranks = run_processes(workers.ring, 3)
    assert [seen["received"] for seen in ranks] == [2.0, 0.0, 1.0]
    assert all(seen["sum"] == 3.0 for seen in ranks)
    assert all(seen["broadcast"] == "from rank 0" for seen in ranks)
    assert all(seen["any"] is True and seen["all"] is False for seen in ranks)


def test_strategy_reduce_reduces_tensors_in_place_as_lightning_does() -> None:
    ranks = run_processes(workers.reduce_in_a_callback, 2)
    expected = {
        "sum": [3.0, 20.0],
        "in_place": True,  # code that ignores the return value still sees the sum
        "mean": 1.5,
        "max": 1,
        "avg_int": 2.5,  # an integer's mean is a new float tensor
        "number": 1.5,
        "model": "DistributedDataParallel",
        "lightning_module": True,
        "trainer.model": "DistributedDataParallel",
        "after": True,
    }
    assert ranks == [expected, expected]


def test_strategy_reduce_and_model_on_one_device() -> None:
    import trainkit
    from tests.helpers import QUIET

    trainer = trainkit.Trainer(max_steps=1, **QUIET)
    module = workers.Gathering()
    trainer.fit(module, workers.DataLoader(workers.TensorDataset(torch.randn(4, 2))))
    strategy = trainer.strategy
    assert strategy.model is module and strategy.lightning_module is module  # no wrapper
    value = torch.tensor([1.0, 2.0])
    assert strategy.reduce(value, reduce_op="sum") is value
    with pytest.raises(ValueError, match="reduce_op='median' is not a reduction"):
        strategy.reduce(value, reduce_op="median")
    with pytest.raises(ValueError, match="trainkit reduces over every process"):
        strategy.reduce(value, group=object())

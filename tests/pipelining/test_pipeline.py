"""Pipeline parallelism over real gloo processes: the same answer as one process.

Each world runs every scenario in one spawn (``pipeline_workers.scenarios``):
4 ranks are 2 data replicas x 2 pipeline stages, 2 ranks are 1 x 2.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.distributed import pipeline_workers as workers
from tests.distributed.spawn import run_processes

RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(scope="module", params=[4, 2], ids=["2data-x-2pipe", "1data-x-2pipe"])
def ranks(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return run_processes(workers.scenarios, request.param)


def _assert_states_close(actual: dict[str, Any], expected: dict[str, Any], where: str) -> None:
    assert actual.keys() == expected.keys()
    for name, value in expected.items():
        torch.testing.assert_close(actual[name], value, rtol=RTOL, atol=ATOL, msg=f"{name} {where}")


@pytest.mark.parametrize("schedule", workers.SCHEDULES)
@pytest.mark.parametrize("optimizer", workers.OPTIMIZERS)
def test_training_matches_one_process_at_the_global_batch(
    ranks: list[dict[str, Any]], schedule: str, optimizer: str
) -> None:
    expected = workers.train_reference(optimizer, workers.FULL_STEPS)
    for rank, result in enumerate(ranks):
        run = result[f"{schedule}-{optimizer}"]
        _assert_states_close(run["state"], expected["state"], f"on rank {rank}")


def test_before_sync_a_rank_has_trained_only_its_own_layers(ranks: list[dict[str, Any]]) -> None:
    trained = workers.train_reference("sgd", workers.FULL_STEPS)["state"]
    initial = workers.mlp().state_dict()
    for result in ranks:
        run = result["gpipe-sgd"]
        for name, value in run["before_sync"].items():
            owned = int(name.split(".")[0]) in run["owned"]
            torch.testing.assert_close(
                value, trained[name] if owned else initial[name], rtol=RTOL, atol=ATOL, msg=name
            )
        # The stage keeps the model's own child names.
        assert run["stage_names"] == [str(index) for index in run["owned"]]
    assert [r["gpipe-sgd"]["owned"] for r in ranks[:2]] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_sync_parameters_makes_every_rank_hold_the_same_full_model(
    ranks: list[dict[str, Any]],
) -> None:
    first = ranks[0]["1f1b-adam"]["state"]
    for result in ranks[1:]:
        for name, value in result["1f1b-adam"]["state"].items():
            assert torch.equal(value, first[name]), name


def test_every_rank_returns_its_data_replicas_mean_loss(ranks: list[dict[str, Any]]) -> None:
    data_size = len(ranks) // 2
    expected = workers.replica_losses(workers.FULL_STEPS, data_size)
    for result in ranks:
        run = result["gpipe-sgd"]
        assert run["losses"].shape == (len(workers.FULL_STEPS),)
        torch.testing.assert_close(
            run["losses"], expected[:, run["data_rank"]], rtol=RTOL, atol=ATOL
        )


@pytest.mark.parametrize("optimizer", workers.OPTIMIZERS)
def test_merged_optimizer_state_equals_one_process_optimizer(
    ranks: list[dict[str, Any]], optimizer: str
) -> None:
    expected = workers.train_reference(optimizer, workers.FULL_STEPS)["optimizer"]
    for rank, result in enumerate(ranks):
        merged = result[f"1f1b-{optimizer}"]["optimizer"]
        assert merged["param_groups"] == expected["param_groups"]
        assert merged["state"].keys() == expected["state"].keys()
        for index, entry in expected["state"].items():
            assert merged["state"][index].keys() == entry.keys()
            for key, value in entry.items():
                actual = merged["state"][index][key]
                if key == "step":
                    assert torch.equal(actual, value), f"step of {index} on rank {rank}"
                elif isinstance(value, torch.Tensor):
                    torch.testing.assert_close(actual, value, rtol=RTOL, atol=ATOL)
                else:
                    assert actual == value


def test_a_smaller_batch_rebuilds_the_stages_and_stays_exact(ranks: list[dict[str, Any]]) -> None:
    # Only the first stage gets inputs and only the last gets targets here.
    expected = workers.train_reference("sgd", workers.PARTIAL_STEPS)
    for rank, result in enumerate(ranks):
        _assert_states_close(result["partial"]["state"], expected["state"], f"on rank {rank}")


def test_accumulating_two_half_batches_equals_one_batch(ranks: list[dict[str, Any]]) -> None:
    expected = workers.reference_gradients(32)
    for rank, result in enumerate(ranks):
        grads = result["accumulated"]
        owned = result["gpipe-sgd"]["owned"]
        assert {int(name.split(".")[0]) for name in grads} <= set(owned)
        assert len(grads) == sum(int(name.split(".")[0]) in owned for name in expected)
        for name, value in grads.items():
            torch.testing.assert_close(
                value, expected[name], rtol=RTOL, atol=ATOL, msg=f"{name}, {rank}"
            )


def test_bad_arguments_raise_the_same_clear_error_on_every_rank(
    ranks: list[dict[str, Any]],
) -> None:
    errors = ranks[0]["errors"]
    assert all(result["errors"] == errors for result in ranks)
    assert "is not divisible by pipe_size" in errors["indivisible world"]
    assert "fewer than pipe_size=2" in errors["too few layers"]
    assert "Did you mean '1f1b'?" in errors["unknown schedule"]
    assert "at least pipe_size=2 for the '1f1b' schedule" in errors["1f1b micro-batches"]
    assert "6 rows does not split into micro_batches=4" in errors["uneven micro-batches"]
    assert "first pipeline stage needs `inputs`" in errors["missing inputs"]
    assert errors["afterwards"].startswith("loss ")

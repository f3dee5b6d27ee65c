"""The hybrid strategy over real gloo processes: the single-device result, balanced stages,
checkpoints that load anywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

import trainkit
from tests.distributed import hybrid_workers as workers
from tests.distributed.spawn import run_processes
from tests.helpers import blobs

IN_PROCESS = {"stage_devices": 2, "micro_batches": 4}
ACROSS_RANKS = {"pipeline_size": 2, "micro_batches": 4}


def _assert_same_state(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        torch.testing.assert_close(actual[key], value, rtol=1e-5, atol=1e-6, msg=key)


@pytest.fixture(scope="module")
def single_device() -> dict[str, Any]:
    # One process, global batch 32, 6 steps: what every layout must reproduce.
    return workers.train({}, 32, 6)


def test_stages_in_each_process_match_one_device(single_device: dict[str, Any]) -> None:
    # 2 processes x 2 in-process stages, per-process batch 16 in 4 micro-batches.
    ranks = run_processes(workers.train, 2, IN_PROCESS, 16, 6)
    for rank in ranks:
        _assert_same_state(rank["state"], single_device["state"])
        assert rank["split_restored"]  # the user's module is given back un-split
        assert rank["sizes"] is not None and len(rank["sizes"]) == 2
    assert ranks[0]["val_acc"] == pytest.approx(single_device["val_acc"], abs=1e-6)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_stages_across_processes_match_one_device(
    single_device: dict[str, Any], schedule: str
) -> None:
    # 2 data x 2 pipe = 4 processes; each pipeline replica takes 16 rows a step.
    ranks = run_processes(workers.train, 4, {**ACROSS_RANKS, "schedule": schedule}, 16, 6)
    for rank in ranks:  # after fit every rank holds the full trained model
        _assert_same_state(rank["state"], single_device["state"])
    # The step logs train/loss once per step: the two data replicas' (ranks 0 and 2,
    # pipe rank 0) mean is the single device's loss of the whole batch.
    replicas = torch.tensor([ranks[0]["losses"], ranks[2]["losses"]])
    assert replicas.mean(dim=0).tolist() == pytest.approx(single_device["losses"], abs=1e-5)
    assert ranks[0]["val_acc"] == pytest.approx(single_device["val_acc"], abs=1e-6)


@pytest.fixture(scope="module")
def single_device_11_steps() -> dict[str, Any]:
    return workers.train({}, 32, 11)


@pytest.mark.parametrize("options", [IN_PROCESS, ACROSS_RANKS], ids=["in-process", "across"])
def test_a_hybrid_checkpoint_resumes_under_hybrid_and_loads_on_one_device(
    tmp_path: Path, options: dict[str, Any], single_device_11_steps: dict[str, Any]
) -> None:
    world = 4 if options.get("pipeline_size", 1) > 1 else 2
    # One epoch (8 steps), then resumed for 3 more: the uninterrupted 11-step result.
    first = run_processes(workers.train, world, options, 16, 8, str(tmp_path))
    checkpoint = tmp_path / "checkpoints" / "last.ckpt"
    # The file holds the full model under its own names: a plain single-device load.
    loaded = workers.EightLayers.load_from_checkpoint(checkpoint)
    _assert_same_state(loaded.state_dict(), first[0]["state"])
    trainer = trainkit.Trainer(strategy="single_device", logger=False, enable_progress_bar=False)
    validation = DataLoader(blobs(37, seed=3), batch_size=8)
    (metrics,) = trainer.validate(workers.EightLayers(), validation, ckpt_path=checkpoint)
    assert metrics["val/acc"] == pytest.approx(first[0]["val_acc"], abs=1e-6)
    resumed = run_processes(workers.train, world, options, 16, 11, str(tmp_path), str(checkpoint))
    for rank in resumed:
        _assert_same_state(rank["state"], single_device_11_steps["state"])


def test_a_heavy_layer_gets_a_stage_of_its_own() -> None:
    # Linear, Tanh, Heavy, Linear, Tanh, Linear over 3 stages, balanced by time.
    (sizes,) = run_processes(workers.balance_by_time, 1)
    assert sizes == (2, 1, 3)

"""The RPC hybrid recipe: it trains, it equals one-process training, and failures end the job."""

from __future__ import annotations

import multiprocessing
from dataclasses import replace

import pytest
import torch

from recipes.rpc_hybrid import train
from recipes.rpc_hybrid.hybrid import Config, launch, train_single_process

STATED_ACCURACY = 0.95  # recipes/rpc_hybrid/README.md and docs/strategies.md state it


def _no_children_left() -> None:
    for process in multiprocessing.active_children():
        process.join(timeout=5)
    assert multiprocessing.active_children() == []


def test_three_processes_train_to_the_stated_accuracy_with_the_one_process_weights() -> None:
    config = Config()
    result = launch(config, world_size=3, timeout=120)
    _no_children_left()
    reference = train_single_process(config)

    assert result["accuracy"] >= STATED_ACCURACY
    assert len(result["losses"]) == config.steps
    assert result["losses"][-1] < result["losses"][0] / 4
    # Same seed, same batches, same SGD: the master/worker split changes nothing
    # but float rounding (each worker's part of the loss is summed on the master).
    assert result["state_dict"].keys() == reference["state_dict"].keys()
    for name, weight in reference["state_dict"].items():
        torch.testing.assert_close(result["state_dict"][name], weight, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(
        torch.tensor(result["losses"]), torch.tensor(reference["losses"]), rtol=1e-5, atol=1e-6
    )
    assert result["accuracy"] == pytest.approx(reference["accuracy"], abs=2 / config.test_points)


def test_an_error_on_the_master_ends_every_process() -> None:
    # An empty batch leaves the worker without a part: the master raises after
    # RPC is up, while the worker waits in rpc.shutdown.
    with pytest.raises(Exception, match="smaller than the number of workers"):
        launch(replace(Config(), batch_size=0), world_size=2, timeout=120)
    _no_children_left()


def test_a_job_past_its_timeout_is_ended() -> None:
    with pytest.raises(TimeoutError, match="did not end within"):
        launch(Config(steps=100_000), world_size=3, timeout=0.5)
    _no_children_left()


def test_the_cli_refuses_a_world_without_workers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        train.main(["--world-size", "1"])
    assert info.value.code == 2
    assert "needs a master and at least one worker" in capsys.readouterr().err

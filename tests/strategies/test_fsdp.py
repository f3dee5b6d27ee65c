"""FSDPStrategy over real gloo processes: the single-device result, sharded memory,
checkpoints that load on one device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tests.distributed import fsdp_workers as workers
from tests.distributed.spawn import run_processes

STEPS = 20
GLOBAL_BATCH = 16


def _assert_same_state(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        torch.testing.assert_close(actual[key], value, rtol=1e-5, atol=1e-7, msg=key)


CASES = {
    "sgd-momentum": ({}, {}),
    "adamw": ({}, {"optimizer": "adamw"}),
    "clipping": ({"gradient_clip_val": 0.05}, {}),
    "accumulation": ({"accumulate_grad_batches": 2}, {"optimizer": "adamw"}),
    # Validation inside fit (and its sanity check) leaves nothing training cannot use.
    "validating": ({"val_check_interval": 5}, {}),
}


@pytest.mark.parametrize("processes", [2, 4])
def test_fsdp_matches_one_device(processes: int) -> None:
    # Every case in one start of the processes (fits run one after another in them):
    # SGD with momentum, AdamW, clipping, accumulation; on 2 processes manual
    # optimization too, on 4 an HSDP 2x2 mesh.
    runs: dict[str, tuple[Any, ...]] = {
        case: ({}, GLOBAL_BATCH // processes, STEPS, settings, model_options)
        for case, (settings, model_options) in CASES.items()
    }
    expected = {case: workers.train(None, GLOBAL_BATCH, STEPS, *CASES[case]) for case in CASES}
    if processes == 2:
        runs["manual"] = ({}, 8, 10, {}, {"manual": True})
        expected["manual"] = workers.train(None, GLOBAL_BATCH, 10, {}, {"manual": True})
    else:
        runs["hsdp-2x2"] = ({"hsdp": (2, 2)}, 4, STEPS, {}, {"optimizer": "adamw"})
        expected["hsdp-2x2"] = expected["adamw"]
    ranks = run_processes(workers.train_many, processes, list(runs.values()), timeout=400)
    for index, case in enumerate(runs):
        _assert_same_state(ranks[0][index]["state"], expected[case]["state"])  # gathered on rank 0
        val_loss = expected[case]["val_loss"]
        assert ranks[0][index]["val_loss"] == pytest.approx(val_loss, nan_ok=True), case
        # The full state lives on rank 0 only.
        assert all(not rank[index]["state"] for rank in ranks[1:]), case


def test_one_process_runs() -> None:
    expected = workers.train(None, GLOBAL_BATCH, 5)
    (rank,) = run_processes(workers.train, 1, {}, GLOBAL_BATCH, 5)
    _assert_same_state(rank["state"], expected["state"])


def test_a_model_built_on_meta_never_exists_whole_on_a_rank() -> None:
    ranks = run_processes(workers.train_on_meta, 4, 256, 3)
    full = ranks[0]["full_bytes"]
    assert full > 250_000  # 5 layers of up to 256 x 256 float32
    for rank in ranks:
        assert rank["global_step"] == 3 and rank["finite"]
        # Each rank holds about a quarter: never the whole model.
        assert 0 < rank["peak_local_bytes"] < full / 3


@pytest.mark.parametrize(
    ("precision", "meta_init", "dtype"),
    [("bf16-true", False, "torch.bfloat16"), ("64-true", True, "torch.float64")],
)
def test_layers_built_in_configure_model_take_a_true_precision_s_dtype(
    precision: str, meta_init: bool, dtype: str
) -> None:
    """Layers made in configure_model (after the model was cast) are made in the
    precision's dtype, on the device or the meta device: none stays float32."""
    (rank,) = run_processes(workers.late_dtypes, 1, precision, meta_init)
    assert rank == {"dtypes": {dtype}, "finite": True}


def test_a_full_checkpoint_loads_on_one_device_and_resumes_under_fsdp(tmp_path: Path) -> None:
    # state_dict_type="full": one ordinary file. One epoch (10 steps of 16 rows), then
    # resumed for 4 more: the uninterrupted 14 steps. Both first runs in one start.
    full = {"state_dict_type": "full"}
    uninterrupted, first = run_processes(
        workers.train_many, 2, [(full, 8, 14), (full, 8, 10, {}, {}, str(tmp_path / "a"))]
    )[0]
    path = first["last"]
    assert path and Path(path).is_file()
    # The file is an ordinary one: one device loads it, with the FSDP run's gathered weights.
    loaded = workers.Mlp.load_from_checkpoint(path)
    _assert_same_state(loaded.state_dict(), first["state"])
    # Resumed under FSDP(2) (full state loaded as shards, optimizer state included),
    # training continues to the uninterrupted run's parameters, bitwise.
    resumed = run_processes(workers.train, 2, full, 8, 14, {}, {}, str(tmp_path / "b"), path)[0]
    assert resumed["state"].keys() == uninterrupted["state"].keys()
    for key, value in uninterrupted["state"].items():
        assert torch.equal(resumed["state"][key], value), key


def test_the_name_fsdp_builds_the_strategy_with_one_process_per_device(
    started_as_a_script: None,
) -> None:
    from trainkit.launch import ScriptLauncher, select_launcher
    from trainkit.strategies import build_strategy, plan_devices
    from trainkit.strategies.fsdp import FSDPStrategy

    plan = plan_devices("fsdp", "cpu", 4)
    assert plan.processes == 4
    assert isinstance(build_strategy(plan), FSDPStrategy)
    assert isinstance(select_launcher("fsdp", 4), ScriptLauncher)


def test_a_mesh_that_does_not_fit_the_options_is_refused() -> None:
    from trainkit.strategies.fsdp import FSDPStrategy

    with pytest.raises(ValueError, match="replicate, shard"):
        FSDPStrategy(hsdp=(0, 2))
    with pytest.raises(ValueError, match="bf16-mixed"):
        from trainkit.distributed.sharding import mixed_precision_policy

        mixed_precision_policy("16-mixed")


def test_an_instance_with_devices_starts_that_many_processes(started_as_a_script: None) -> None:
    # As with strategy="fsdp": Trainer(strategy=FSDPStrategy(...), devices=4) runs four
    # processes, this one rank 0 (tests/strategies/test_fsdp_checkpoints.py runs such jobs).
    import trainkit
    from trainkit.launch import ScriptLauncher
    from trainkit.strategies.fsdp import FSDPStrategy

    trainer = trainkit.Trainer(strategy=FSDPStrategy(), devices=4, accelerator="cpu", logger=False)
    assert isinstance(trainer.launcher, ScriptLauncher)
    assert trainer.launcher.num_processes == 4
    assert (trainer.strategy.global_rank, trainer.strategy.world_size) == (0, 4)
    # An instance told its place (or devices="auto") starts nothing.
    placed = trainkit.Trainer(
        strategy=FSDPStrategy(rank=0, world_size=2), devices=2, accelerator="cpu", logger=False
    )
    assert placed.launcher is None
    assert trainkit.Trainer(strategy=FSDPStrategy(), logger=False).launcher is None

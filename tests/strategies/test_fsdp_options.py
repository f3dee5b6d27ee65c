"""FSDPStrategy's options over real gloo processes: mixed precision, activation
checkpointing, which modules become shard units, ``configure_sharding``,
``reshard_after_forward`` and ``Trainer(compile=...)``.

Process starts are slow on a loaded machine: the processes start once (2 ranks,
global batch 16) and run every case one after another (``run_cases``); the tests
then read their results. The float64 cases must equal one-device training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import trainkit
from tests.distributed import fsdp_option_workers as workers
from tests.distributed.spawn import run_processes
from tests.helpers import QUIET
from trainkit.distributed.sharding import mixed_precision_policy
from trainkit.strategies.fsdp import FSDPStrategy

STEPS = 10  # one epoch of 160 rows: the last checkpoint holds the final weights
BF16 = ({"precision": "bf16-mixed"}, {"dtype": "float32"})
ROOT_UNITS = ["", "blocks.0", "blocks.1", "head", "stem"]  # the default policy's units


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Rank 0's result of each case (full states are gathered on rank 0)."""
    root = tmp_path_factory.mktemp("fsdp-options")
    eager = {"backend": workers.counting_backend}  # aot_eager: no C++ to compile
    cases: dict[str, tuple[str, tuple[Any, ...]]] = {
        "default": ("train", ({}, STEPS)),
        "bf16-mixed": ("train", ({}, STEPS, *BF16)),
        "16-mixed": ("refused", ({}, {"precision": "16-mixed"})),
        "checkpointed": (
            "train",
            (
                {"activation_checkpointing": (workers.Block,), **workers.ONE_FILE},
                STEPS,
                {},
                {},
                str(root / "ac"),
            ),
        ),
        "by-class": ("train", ({"shard_modules": (nn.Linear,)}, STEPS)),
        "by-name": ("train", ({"shard_modules": ("blocks",)}, STEPS)),
        "name-and-class": ("train", ({"shard_modules": ("blocks", nn.Linear)}, STEPS)),
        "unknown-name": ("refused", ({"shard_modules": ("trunk",)},)),
        "selects-nothing": ("refused", ({"shard_modules": (nn.Conv2d,)},)),
        "configure_sharding": ("train", ({}, STEPS, {}, {}, None, True)),
        "no-reshard": ("train", ({"reshard_after_forward": False}, STEPS)),
        "compiled": (
            "train",
            (workers.ONE_FILE, STEPS, {"compile": eager}, {}, str(root / "compiled")),
        ),
    }
    ranks = run_processes(workers.run_cases, 2, cases, timeout=400)
    return ranks[0]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def one_device() -> dict[str, Any]:
    return workers.train(None, STEPS)


def _assert_close(actual: dict[str, Any], expected: dict[str, Any], **tolerance: float) -> None:
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        torch.testing.assert_close(actual[key], value, msg=key, **tolerance)


def _initial(**model_options: Any) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return workers.Net(**model_options).state_dict()


def test_bf16_mixed_computes_in_bfloat16_on_float32_shards(runs: dict[str, Any]) -> None:
    run = runs["bf16-mixed"]
    # The sharded masters and their gradients (reduced in float32) stay float32 ...
    assert run["parameter_dtypes"] == {"torch.float32"}
    assert run["gradient_dtypes"] == {"torch.float32"}
    # ... while the forward sees the gathered parameters in bfloat16 (FSDP's
    # MixedPrecisionPolicy, not autocast alone: autocast leaves weights float32).
    assert run["head_in_forward"] == {("torch.bfloat16", "torch.bfloat16")}
    policy = mixed_precision_policy("bf16-mixed")
    assert (policy.param_dtype, policy.reduce_dtype) == (torch.bfloat16, torch.float32)


def test_bf16_mixed_is_close_to_one_device_bf16_mixed(runs: dict[str, Any]) -> None:
    expected = workers.train(None, STEPS, *BF16)
    assert expected["head_in_forward"] == {("torch.float32", "torch.bfloat16")}  # autocast
    # Not equal: both round matmul inputs to bfloat16 (8 significant bits, ~4e-3
    # relative), but at different points (FSDP casts each unit's parameters once and
    # reduces two half-batch gradients; one device's autocast casts per operation and
    # differentiates the whole batch), so the runs drift apart by bfloat16 rounding.
    _assert_close(runs["bf16-mixed"]["state"], expected["state"], rtol=0.0, atol=1e-2)
    initial = _initial(dtype="float32")
    moved = max((expected["state"][k] - v).abs().max().item() for k, v in initial.items())
    assert moved > 0.1  # training moved the weights far more than the tolerance


def test_16_mixed_is_refused_with_what_to_use_instead(runs: dict[str, Any]) -> None:
    message = runs["16-mixed"]
    assert "precision='16-mixed' is not supported with strategy='fsdp'" in message
    assert "Use precision='bf16-mixed' or '32-true'" in message


def test_the_trainer_hands_the_strategy_its_precision() -> None:
    strategy = FSDPStrategy()
    assert strategy.precision == "32-true"
    trainer = trainkit.Trainer(strategy=strategy, precision="bf16", **QUIET)
    assert trainer.strategy.precision == "bf16-mixed"  # the canonical name


def test_the_default_policy_shards_each_layer_and_equals_one_device(
    runs: dict[str, Any], one_device: dict[str, Any]
) -> None:
    assert runs["default"]["units"] == ROOT_UNITS  # each child; each block of the list
    _assert_close(runs["default"]["state"], one_device["state"], rtol=1e-6, atol=1e-12)


def test_activation_checkpointing_recomputes_the_blocks_and_changes_no_result(
    runs: dict[str, Any], one_device: dict[str, Any]
) -> None:
    # Each block's forward runs again in backward: twice per step instead of once.
    assert one_device["block_calls"] == runs["default"]["block_calls"] == STEPS * 2
    assert runs["checkpointed"]["block_calls"] == STEPS * 2 * 2
    _assert_close(runs["checkpointed"]["state"], one_device["state"], rtol=1e-6, atol=1e-12)


def test_a_checkpoint_saved_with_activation_checkpointing_loads_without_it(
    runs: dict[str, Any],
) -> None:
    run = runs["checkpointed"]
    assert not any("_checkpoint_wrapped_module" in key for key in run["state"])
    loaded = workers.Net.load_from_checkpoint(run["last"])  # one device, no wrapper
    _assert_close(loaded.state_dict(), run["state"], rtol=0.0, atol=0.0)


@pytest.mark.parametrize(
    ("case", "units"),
    [
        # Each outermost Linear: inside the blocks, the Linear (not the Block).
        ("by-class", ["", "blocks.0.linear", "blocks.1.linear", "head", "stem"]),
        # Each child of the named submodule; stem and head stay in the root unit.
        ("by-name", ["", "blocks.0", "blocks.1"]),
        # Both, nested: the inner units are sharded before the blocks around them.
        (
            "name-and-class",
            ["", "blocks.0", "blocks.0.linear", "blocks.1", "blocks.1.linear", "head", "stem"],
        ),
    ],
)
def test_shard_modules_picks_the_units_and_equals_one_device(
    runs: dict[str, Any], one_device: dict[str, Any], case: str, units: list[str]
) -> None:
    assert runs[case]["units"] == units
    _assert_close(runs[case]["state"], one_device["state"], rtol=1e-6, atol=1e-12)


def test_shard_modules_that_name_no_submodule_or_select_nothing_are_refused(
    runs: dict[str, Any],
) -> None:
    assert "names 'trunk', which is not a submodule of Net" in runs["unknown-name"]
    assert "selects no submodule of Net" in runs["selects-nothing"]


def test_configure_sharding_is_used_instead_of_the_policy(
    runs: dict[str, Any], one_device: dict[str, Any]
) -> None:
    run = runs["configure_sharding"]
    assert run["sharded_on"] == (2,)  # the hook got the strategy's mesh
    # Only the blocks the hook sharded, and the root: not stem and head as the policy would.
    assert run["units"] == ["", "blocks.0", "blocks.1"]
    _assert_close(run["state"], one_device["state"], rtol=1e-6, atol=1e-12)


def test_reshard_after_forward_false_equals_one_device(
    runs: dict[str, Any], one_device: dict[str, Any]
) -> None:
    # By the head's forward the first block's forward is done: by default its
    # parameters are back to their shards; with reshard_after_forward=False they
    # stay gathered (whole tensors) until backward.
    assert runs["default"]["resharded_after_forward"] == {True}
    assert runs["no-reshard"]["resharded_after_forward"] == {False}
    assert runs["no-reshard"]["units"] == ROOT_UNITS
    _assert_close(runs["no-reshard"]["state"], one_device["state"], rtol=1e-6, atol=1e-12)


def test_a_compiled_fsdp_run_equals_the_uncompiled_one_and_loads_uncompiled(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    run = runs["compiled"]
    assert run["compiled_graphs"] > 0  # the forward went through torch.compile
    assert run["units"] == ROOT_UNITS
    _assert_close(run["state"], runs["default"]["state"], rtol=1e-6, atol=1e-12)
    # The checkpoint has the uncompiled names and loads into a one-device Module.
    loaded = workers.Net.load_from_checkpoint(run["last"])
    _assert_close(loaded.state_dict(), run["state"], rtol=0.0, atol=0.0)

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
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("processes", [2, 4])
def test_fsdp_matches_one_device(case: str, processes: int) -> None:
    settings, model_options = CASES[case]
    expected = workers.train(None, GLOBAL_BATCH, STEPS, settings, model_options)
    ranks = run_processes(
        workers.train, processes, {}, GLOBAL_BATCH // processes, STEPS, settings, model_options
    )
    _assert_same_state(ranks[0]["state"], expected["state"])  # gathered on rank 0
    assert all(not rank["state"] for rank in ranks[1:])  # the full state lives on rank 0 only

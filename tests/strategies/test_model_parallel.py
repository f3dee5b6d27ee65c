"""ModelParallelStrategy over real gloo processes: tensor parallel inside groups, FSDP2
across them, as the Module applies them in configure_model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tests.distributed import model_parallel_workers as workers
from tests.distributed.spawn import run_processes
from tests.helpers import Classifier
from trainkit.launch.environment import ClusterEnvironment
from trainkit.strategies.model_parallel import ModelParallelStrategy

STEPS = 6
GLOBAL_BATCH = 16
EPOCH = 192 // GLOBAL_BATCH  # steps in an epoch: a checkpoint at its end


def _assert_close(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        torch.testing.assert_close(actual[key], value, rtol=1e-4, atol=1e-6, msg=key)


def test_tensor_and_data_parallel_runs_match_one_device(tmp_path: Path) -> None:
    # In one start of four processes: a 2 x 2 mesh (tensor parallel in pairs, FSDP2
    # over the pairs) and a 1 x 4 one ("auto" on one machine: pure tensor parallel),
    # each training what one device trains on the whole batch; then a sharded
    # checkpoint of a 2 x 2 run's first epoch, resumed.
    single = workers.train(None, GLOBAL_BATCH, STEPS)
    epoch = workers.train(None, GLOBAL_BATCH, EPOCH)
    cases = [
        ((2, 2), GLOBAL_BATCH // 2, STEPS),
        (("auto", "auto"), GLOBAL_BATCH, STEPS, False),
        ((2, 2), GLOBAL_BATCH // 2, EPOCH, True, str(tmp_path / "run")),
        ((2, 2), GLOBAL_BATCH // 2, STEPS, True, str(tmp_path / "full"), False),
    ]
    ranks = run_processes(workers.train_many, 4, cases, timeout=400)
    two_by_two, tensor_only, first, full = ranks[0]
    for result in (two_by_two, tensor_only):
        _assert_close(result["state"], single["state"])
        assert result["mesh_seen"] == ("data_parallel", "tensor_parallel")
        assert result["val_loss"] == pytest.approx(single["val_loss"], rel=1e-4)
        assert result["validated"] == pytest.approx(single["validated"], rel=1e-4)
    _assert_close(first["state"], epoch["state"])
    # A tensor-parallel pair reads the same batches: 12 batches of 8 per data rank.
    assert two_by_two["batches"] == 192 // GLOBAL_BATCH and tensor_only["batches"] == 12
    # Each rank holds its split of the hidden layer: 32 rows over 2 (then sharded over
    # 2 more), or over 4.
    assert [rank[0]["local_up"] for rank in ranks] == [(8, 8)] * 4
    assert [rank[1]["local_up"] for rank in ranks] == [(8, 8)] * 4
    assert all(not rank[0]["state"] for rank in ranks[1:])  # gathered on rank 0 only

    # save_distributed_checkpoint=False: one ordinary file, gathered on rank 0, which
    # loads on one device.
    assert Path(full["last"]).is_file()
    one_file = workers.TensorParallelMlp.load_from_checkpoint(full["last"])
    _assert_close(one_file.state_dict(), single["state"])

    folder = Path(first["last"])
    assert folder.is_dir()  # one shard file per process, written by each
    # Resumed for two more steps, under the same 2 x 2 mesh and resharded to a 1 x 4
    # one (tensor parallel only): the uninterrupted 14 steps either way.
    resumes = [
        ((2, 2), GLOBAL_BATCH // 2, EPOCH + 2, True, None, True, str(folder)),
        ((1, 4), GLOBAL_BATCH, EPOCH + 2, False, None, True, str(folder)),
    ]
    uninterrupted = workers.train(None, GLOBAL_BATCH, EPOCH + 2)["state"]
    for resumed in run_processes(workers.train_many, 4, resumes, timeout=400)[0]:
        _assert_close(resumed["state"], uninterrupted)
    # The folder also loads on one device, into the unparallelized model.
    loaded = workers.TensorParallelMlp.load_from_checkpoint(folder)
    _assert_close(loaded.state_dict(), first["state"])


def test_what_cannot_make_a_mesh_or_a_parallel_model_is_refused() -> None:
    with pytest.raises(ValueError, match="tensor_parallel_size=0"):
        ModelParallelStrategy(tensor_parallel_size=0)
    with pytest.raises(ValueError, match="data_parallel_size='2'"):
        ModelParallelStrategy(data_parallel_size="2")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="configure_model"):
        _ = ModelParallelStrategy().device_mesh
    # Rank 0 of four processes (no group needed to find the sizes wrong).
    four = ClusterEnvironment.given(0, 4)
    with pytest.raises(ValueError, match="3 x 1 mesh, but the job has 4 processes"):
        ModelParallelStrategy(3, 1, environment=four)._build_mesh()
    with pytest.raises(TypeError, match="must define configure_model"):
        ModelParallelStrategy(environment=four).setup_module(Classifier())

"""FSDP's sharded checkpoints: killed and resumed bitwise, resumed under another number of
processes, folders that are never half there, and one-file exports."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.distributed import fsdp_resume_script as script
from tests.launch.running import Job, run_whole
from trainkit.checkpoint import sharded
from trainkit.checkpoint.files import CheckpointError, load
from trainkit.checkpoint.weights import resolve_path


def _command(root: Path, *extra: str) -> list[str]:
    module = "tests.distributed.fsdp_resume_script"
    return [sys.executable, "-m", module, "--root", str(root), *extra]


def _run(root: Path, *extra: str) -> dict[str, Any]:
    result = run_whole(_command(root, *extra), timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return torch.load(root / "final.pt", weights_only=True)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The uninterrupted FSDP(2) run, its checkpoints written in the background: its
    folder and its final state."""
    root = tmp_path_factory.mktemp("reference")
    return root, _run(root, "--devices", "2", "--async-save")


def test_sigkill_mid_epoch_resumes_bitwise_and_under_four_processes(
    tmp_path: Path, reference: tuple[Path, dict[str, Any]]
) -> None:
    expected = reference[1]
    killed = tmp_path / "two"
    job = Job(_command(killed, "--devices", "2", "--delay", "0.05"))
    job.wait_for("step 17")  # the newest checkpoint is step 15's: mid-epoch (10 steps each)
    job.kill()  # SIGKILL to every process of the job
    job.wait()
    last = killed / "checkpoints" / "last.ckpt"
    assert last.is_dir() and sharded.exists(last)
    assert not (killed / "final.pt").exists()
    four = tmp_path / "four"
    shutil.copytree(killed / "checkpoints", four / "checkpoints")
    saved = shutil.copytree(last, tmp_path / "saved.ckpt")  # the resumed runs replace last.ckpt

    resumed = _run(killed, "--devices", "2", "--resume")
    assert resumed["global_step"] == script.MAX_STEPS
    start = min(resumed["seen"])
    assert start in (15, 18)  # step 15's checkpoint (18's if that save beat the kill)
    for name, tensor in expected["state_dict"].items():
        assert torch.equal(resumed["state_dict"][name], tensor), name
    assert resumed["seen"] == {s: rows for s, rows in expected["seen"].items() if s >= start}

    # The same checkpoint under four processes (4 rows each: the same global batch),
    # resharded on load: the same rows at every step, the same parameters (float64).
    wider = _run(four, "--devices", "4", "--resume")
    assert wider["seen"] == resumed["seen"]
    for name, tensor in expected["state_dict"].items():
        torch.testing.assert_close(wider["state_dict"][name], tensor, rtol=1e-5, atol=1e-9)

    # Exported to one file, the checkpoint holds the weights the resumed runs started
    # from, and loads on one device.
    exported = trainkit.consolidate_checkpoint(saved, tmp_path / "one.ckpt")
    assert exported.is_file()
    model = script.Net.load_from_checkpoint(exported)
    for name, tensor in resumed["start_state"].items():
        assert torch.equal(model.state_dict()[name], tensor), name
    with pytest.raises(CheckpointError, match="exists already"):
        trainkit.consolidate_checkpoint(saved, exported)


def test_checkpoint_folders_are_kept_whole(
    tmp_path: Path, reference: tuple[Path, dict[str, Any]]
) -> None:
    folder = reference[0] / "checkpoints"
    # Written in the background, in order: the top-2 folders and last.ckpt; older folders
    # were removed, no staging folder is left; last.ckpt holds the final weights.
    names = sorted(entry.name for entry in folder.iterdir())
    assert names == ["epoch=2-step=21.ckpt", "epoch=2-step=24.ckpt", "last.ckpt"], names
    assert all(sharded.exists(folder / name) for name in names)
    whole = load(folder / "last.ckpt")
    for name, tensor in reference[1]["state_dict"].items():
        assert torch.equal(whole["state_dict"][name], tensor), name

    # A folder whose save never finished (no index file) is not a checkpoint: "last"
    # falls back to the newest complete one.
    copy = tmp_path / "checkpoints"
    shutil.copytree(folder, copy)
    (copy / "last.ckpt" / sharded.META_FILE).unlink()
    with pytest.raises(CheckpointError, match="not a complete checkpoint"):
        load(copy / "last.ckpt")
    assert resolve_path("last", [copy / "last.ckpt"], print) == copy / "epoch=2-step=24.ckpt"

    # A damaged shard is named, never loaded.
    shard = copy / "epoch=2-step=24.ckpt" / "__1_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"corrupt: its shard file\(s\) __1_0.distcp"):
        load(copy / "epoch=2-step=24.ckpt")


def test_the_command_consolidates_a_folder_into_one_file(
    tmp_path: Path, reference: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    from trainkit.cli.main import main

    folder = reference[0] / "checkpoints" / "last.ckpt"
    output = tmp_path / "last-one-file.ckpt"
    assert main(["consolidate", str(folder), str(output)]) == 0
    assert output.is_file()
    single = load(output)
    for name, tensor in reference[1]["state_dict"].items():
        assert torch.equal(single["state_dict"][name], tensor), name
    assert single["global_step"] == script.MAX_STEPS  # the training state came along
    # An existing file is never replaced without --overwrite: one line, exit 2.
    capsys.readouterr()
    assert main(["consolidate", str(folder), str(output)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("trainkit: error:") and "exists already" in error
    assert error.count("\n") == 1
    assert main(["consolidate", str(folder), str(output), "--overwrite"]) == 0


def test_consolidating_hyperparameters_that_are_objects_needs_trust(
    tmp_path: Path, reference: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    from trainkit.checkpoint.files import INTEGRITY_KEY, payload_digest
    from trainkit.cli.main import main

    folder = shutil.copytree(reference[0] / "checkpoints" / "last.ckpt", tmp_path / "objects")
    meta_file = folder / sharded.META_FILE
    meta = torch.load(meta_file, weights_only=False)
    meta["hyper_parameters"] = {"lr": 0.1, "loss": torch.nn.SmoothL1Loss(beta=0.5)}
    meta[INTEGRITY_KEY] = {"algorithm": "sha256", "digest": payload_digest(meta)}
    torch.save(meta, meta_file)
    output = tmp_path / "one.ckpt"
    # A safe read holds a stand-in for the loss: writing it again would lose it.
    capsys.readouterr()
    assert main(["consolidate", str(folder), str(output)]) == 2
    error = capsys.readouterr().err
    assert "hyperparameters hyper_parameters['loss'] are objects" in error
    assert "--trusted" in error and error.count("\n") == 1 and not output.exists()
    assert main(["consolidate", str(folder), str(output), "--trusted"]) == 0
    loss = torch.load(output, weights_only=False)["hyper_parameters"]["loss"]
    assert isinstance(loss, torch.nn.SmoothL1Loss) and loss.beta == 0.5

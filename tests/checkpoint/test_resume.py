"""Exact resume: a run killed with SIGKILL (or preempted) and resumed ends bitwise equal."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.helpers import repo_env

ROOT = Path(__file__).resolve().parents[2]
MAX_STEPS = 40


def _command(root: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tests.checkpoint.resume_script",
        "--root",
        str(root),
        "--max-steps",
        str(MAX_STEPS),
        *extra,
    ]


def _env() -> dict[str, str]:
    return repo_env(PYTHONUNBUFFERED="1")


def _run(root: Path, *extra: str) -> dict[str, Any]:
    result = subprocess.run(
        _command(root, *extra), cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return torch.load(root / "final.pt", weights_only=True)  # type: ignore[no-any-return]


def _start(root: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _command(root, *extra),
        cwd=ROOT,
        env=_env(),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _wait_for_step(process: subprocess.Popen[str], step: int) -> list[str]:
    """Read the child's output until it reports ``step``; return what it printed."""
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.strip() == f"step {step}":
            return lines
    process.kill()
    raise AssertionError(f"the run never reached step {step}:\n{''.join(lines[-40:])}")


def _assert_same_final_state(resumed: dict[str, Any], reference: dict[str, Any]) -> None:
    assert resumed["global_step"] == reference["global_step"] == MAX_STEPS
    for name, tensor in reference["state_dict"].items():
        assert torch.equal(resumed["state_dict"][name], tensor), f"{name} differs after resume"
    # Epoch means and the last validation are the same numbers too.
    assert resumed["metrics"] == reference["metrics"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The uninterrupted runs, one per data setup."""
    runs = {}
    for name, extra in (
        ("default", ()),
        ("workers", ("--num-workers", "2")),
        ("distributed", ("--sampler", "distributed")),
    ):
        runs[name] = _run(tmp_path_factory.mktemp(f"reference-{name}"), *extra)
    return runs


@pytest.mark.parametrize(
    ("setup", "extra", "seed"),
    [
        ("default", (), 0),
        ("workers", ("--num-workers", "2"), 1),
        ("distributed", ("--sampler", "distributed"), 2),
    ],
)
def test_sigkill_at_a_random_step_then_resume_is_bitwise_exact(
    tmp_path: Path,
    reference: dict[str, dict[str, Any]],
    setup: str,
    extra: tuple[str, ...],
    seed: int,
) -> None:
    # A random kill point after the first checkpoint (saved at step 3).
    kill_step = random.Random(seed).randint(5, MAX_STEPS - 3)
    process = _start(tmp_path, *extra, "--delay", "0.02")
    _wait_for_step(process, kill_step)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()
    assert not (tmp_path / "final.pt").exists()

    resumed = _run(tmp_path, *extra, "--resume")
    _assert_same_final_state(resumed, reference[setup])
    # The resumed run kept writing to the same logger version.
    assert Path(resumed["log_dir"]).name == "version_0"
    assert not (tmp_path / "logs" / "version_1").exists()


def test_top_k_after_interrupt_and_resume(
    tmp_path: Path, reference: dict[str, dict[str, Any]]
) -> None:
    process = _start(tmp_path, "--delay", "0.02")
    _wait_for_step(process, 23)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    resumed = _run(tmp_path, "--resume")

    files = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    kept = sorted(Path(p).name for p in resumed["best_k_models"])
    # Exactly the two best scored files and last.ckpt; nothing else, no stray temp files.
    assert files == sorted([*kept, "last.ckpt"]), files
    assert len(kept) == 2
    # The same two files (and best score) as the uninterrupted run chose.
    uninterrupted = reference["default"]
    assert kept == sorted(Path(p).name for p in uninterrupted["best_k_models"])
    assert Path(resumed["best_model_path"]).name == Path(uninterrupted["best_model_path"]).name
    assert resumed["best_model_score"] == pytest.approx(uninterrupted["best_model_score"])
    assert resumed["best_model_score"] == min(resumed["best_k_models"].values())


def test_sigterm_saves_at_a_resume_point_and_exits_cleanly(
    tmp_path: Path, reference: dict[str, dict[str, Any]]
) -> None:
    process = _start(tmp_path, "--delay", "0.02", "--every", "1000")
    lines = _wait_for_step(process, 10)
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=120)
    output = "".join(lines) + out
    assert process.returncode == 0, output
    assert "stopped by signal" in output and "ckpt_path='last'" in output
    # No scheduled checkpoint was due (every 1000 steps): last.ckpt is the preemption's.
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()
    resumed = _run(tmp_path, "--every", "1000", "--resume")
    _assert_same_final_state(resumed, reference["default"])


def test_sigkill_during_a_save_leaves_the_previous_checkpoint_loadable(tmp_path: Path) -> None:
    script = f"""
import os, sys, time, torch
sys.path.insert(0, {str(ROOT)!r})
from trainkit.checkpoint.files import FORMAT, save_atomic
path = {str(tmp_path / "last.ckpt")!r}
save_atomic({{"format": FORMAT, "step": 1, "weights": torch.ones(3)}}, path)
print("saved", flush=True)
# A large state: the write takes long enough to be killed in the middle.
save_atomic({{"format": FORMAT, "step": 2, "weights": torch.ones(150_000_000)}}, path)
print("second save finished", flush=True)
"""
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "saved"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        partial = [p for p in tmp_path.iterdir() if p.name.startswith(".last.ckpt.tmp-")]
        if partial and partial[0].stat().st_size > 1_000_000:
            break
        time.sleep(0.005)
    else:
        process.kill()
        raise AssertionError("the second save never started writing")
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL

    from trainkit.checkpoint.files import load

    survivor = load(tmp_path / "last.ckpt")
    assert survivor["step"] == 1 and torch.equal(survivor["weights"], torch.ones(3))


def test_five_sigkills_during_saves_leave_no_temporary_file_after_the_next_start(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "checkpoints"
    script = f"""
import torch
from trainkit.checkpoint.files import FORMAT, save_atomic
state = {{"format": FORMAT, "weights": torch.ones(12_500_000)}}  # 50 MB
print("saving", flush=True)
while True:
    save_atomic(state, {str(folder / "last.ckpt")!r})
"""
    for _ in range(5):
        process = subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=_env()
        )
        assert process.stdout is not None and process.stdout.readline().strip() == "saving"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            partial = [p for p in folder.glob(".last.ckpt.tmp-*") if str(process.pid) in p.name]
            if partial and partial[0].stat().st_size > 1_000_000:
                break
            time.sleep(0.002)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        assert process.returncode == -signal.SIGKILL
    assert list(folder.glob(".last.ckpt.tmp-*")), "no save was killed in the middle"

    # The next start: a fit whose ModelCheckpoint saves to that folder.
    import trainkit
    from tests.helpers import QUIET, Classifier, blobs, loader
    from trainkit.callbacks import ModelCheckpoint

    callback = ModelCheckpoint(dirpath=folder, every_n_epochs=0, save_last=False)
    trainer = trainkit.Trainer(max_steps=1, callbacks=[callback], **QUIET)
    trainer.fit(Classifier(), loader(blobs(64), 32))
    assert [p.name for p in folder.iterdir() if ".tmp-" in p.name] == []

"""Elastic restarts: a job torchrun restarts continues from its last checkpoint, exactly."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.distributed.spawn import free_port
from tests.helpers import repo_env
from tests.launch.running import run_whole
from trainkit.launch.environment import restart_count, resume_on_restart

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "tests" / "launch" / "elastic_script.py")


def _torchrun(
    root: Path, *extra: str, rendezvous: str = "c10d"
) -> subprocess.CompletedProcess[str]:
    root.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    command += ["--max-restarts", "2"]
    if rendezvous == "c10d":  # torch's dynamic rendezvous, the documented recipe
        command += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}"]
    else:  # the static one
        command += ["--master-port", str(free_port())]
    return run_whole([*command, SCRIPT, "--root", str(root), *extra], timeout=180)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, torch.Tensor]:
    """The final weights of the job (2 processes x 16 samples) when nothing fails."""
    root = tmp_path_factory.mktemp("whole")
    whole = _torchrun(root)
    assert whole.returncode == 0, (whole.stdout + whole.stderr)[-4000:]
    assert (root / "starts.txt").read_text().splitlines() == ["0 2"]
    return torch.load(root / "final.pt", weights_only=True)  # type: ignore[no-any-return]


@pytest.mark.parametrize("rendezvous", ["c10d", "static"])
def test_a_killed_worker_is_restarted_and_the_run_ends_bitwise_equal(
    tmp_path: Path, rendezvous: str, uninterrupted: dict[str, torch.Tensor]
) -> None:
    # Each attempt meets in a namespace of its own in torchrun's store: without it
    # a restarted rank can read its dead predecessor's address and fail to connect
    # (gloo's "connectFullMesh failed ... Connection refused"), by chance.
    root = tmp_path / "killed"
    killed = _torchrun(root, "--kill-step", "5", rendezvous=rendezvous)
    output = killed.stdout + killed.stderr
    assert killed.returncode == 0, output[-4000:]
    # The first attempt started at step 0; the restart continued from the checkpoint
    # at step 4 (saved every 2 steps), not from the beginning.
    assert (root / "starts.txt").read_text().splitlines() == ["0 2", "4 2"]
    assert "this job was restarted (" in output
    restarted = torch.load(root / "final.pt", weights_only=True)
    for name, value in uninterrupted.items():
        assert torch.equal(restarted[name], value), name


def _agent(root: Path, endpoint: str, node: str, host: bool) -> list[str]:
    # One node of a job of one or two nodes (one process each), restarted up to 3 times.
    # The ``host`` agent serves the rendezvous store; the other connects to it, waiting
    # for it to listen (both share one address: who hosts is not left to who binds first).
    conf = "keep_alive_interval=1,keep_alive_max_attempt=3,last_call_timeout=10"
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes", "1:2", "--nproc-per-node", "1", "--max-restarts", "3",
        "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", f"job-{node}",
        # A lost node is noticed after 3 missed 1-second heartbeats; a round waits 10 s
        # for more nodes once one is there (torch's defaults: 15 s and 30 s).
        "--rdzv-conf", f"{conf},is_host={int(host)}",
        SCRIPT, "--root", str(root), "--global-batch", "32", "--kill-node", "--kill-step", "5",
    ]  # fmt: skip


def test_a_lost_node_the_job_goes_on_alone_and_continues_the_same_samples(
    tmp_path: Path, uninterrupted: dict[str, torch.Tensor]
) -> None:
    # Two torchrun agents (two "nodes" of one process each) under --nnodes 1:2. At
    # step 5, node b's agent and worker are SIGKILLed; torchrun restarts node a's
    # worker alone (world size 2 -> 1), which resumes from the step-4 checkpoint
    # with no ckpt_path, at the same sample, at the same global batch (32).
    root = tmp_path / "lost"
    root.mkdir()
    endpoint = f"127.0.0.1:{free_port()}"
    env = repo_env()
    a = subprocess.Popen(
        _agent(root, endpoint, "x", host=True), cwd=ROOT, env={**env, "TRAINKIT_TEST_NODE": "a"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    b = subprocess.Popen(  # node a hosts the rendezvous store; node b joins it
        _agent(root, endpoint, "x", host=False), cwd=ROOT, env={**env, "TRAINKIT_TEST_NODE": "b"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        output, _ = a.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(a.pid, signal.SIGKILL)
        output, _ = a.communicate()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(b.pid, signal.SIGKILL)
    assert a.returncode == 0, output[-4000:]
    starts = (root / "starts.txt").read_text().splitlines()
    assert starts[0] == "0 2" and starts[-1] == "4 1", starts  # resumed at step 4, alone
    assert "this job was restarted (" in output
    resumed = torch.load(root / "final.pt", weights_only=True)
    # The uninterrupted job ran 2 processes x 16: the same global batch.
    for name, value in uninterrupted.items():
        torch.testing.assert_close(resumed[name], value, rtol=1e-5, atol=1e-6)


def test_only_a_restarted_job_given_no_checkpoint_resumes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    assert restart_count() == 0 and resume_on_restart(None) is None
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")  # a job SLURM requeued
    assert restart_count() == 2 and resume_on_restart(None) == "last"
    assert resume_on_restart("mine.ckpt") == "mine.ckpt"  # an explicit file is kept
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    assert restart_count() == 1

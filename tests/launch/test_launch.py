"""The same script under torchrun; a failing rank ends every rank promptly."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.distributed.spawn import free_port
from tests.helpers import repo_env

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "tests" / "distributed" / "script.py")


def _torchrun(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(free_port()),
        SCRIPT,
        "--root",
        str(root),
        *extra,
    ]
    return _run(command, root)


def _python(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, SCRIPT, "--root", str(root), *extra], root)


def _run(command: list[str], root: Path) -> subprocess.CompletedProcess[str]:
    root.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env=repo_env(EXIT_RECORD_DIR=str(root)),
    )


def _both_ranks_trained_and_only_rank_zero_wrote(root: Path, launched: bool = True) -> None:
    # 128 samples, 16 per rank and step: 4 steps an epoch, 3 epochs, on both ranks.
    assert (root / "rank0.txt").read_text() == "12"
    assert (root / "rank1.txt").read_text() == "12"
    # lightning_utilities' rank (torchmetrics and projects log by it): set from the
    # launcher's variables when trainkit is imported (a spawned rank is told its
    # rank only later), then to the global rank once the processes are set up.
    for rank in (0, 1):
        at_import = str(rank) if launched else "0"
        assert (root / f"ranks{rank}.txt").read_text() == f"{at_import} {rank} {rank}"
    assert sorted(p.name for p in (root / "logs").iterdir()) == ["version_0"]
    assert (root / "checkpoints" / "last.ckpt").is_file()
    # Each rank ran its exit handlers and had left the process group by its last
    # one: a group left to the interpreter's shutdown can abort a process
    # (SIGABRT) whose training had succeeded.
    assert (root / "exit0.txt").read_text() == "left"
    assert (root / "exit1.txt").read_text() == "left"


def test_under_torchrun_both_ranks_train_and_only_rank_zero_writes(tmp_path: Path) -> None:
    result = _torchrun(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    _both_ranks_trained_and_only_rank_zero_wrote(tmp_path)


def test_a_rank_raising_ends_the_run_quickly_with_its_traceback(tmp_path: Path) -> None:
    start = time.monotonic()
    result = _torchrun(tmp_path, "--fail-rank", "1")
    elapsed = time.monotonic() - start
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert elapsed < 60, f"took {elapsed:.0f} s"
    assert "deliberate failure on rank 1 at step 5" in output
    assert "Traceback" in output
    assert not (tmp_path / "rank0.txt").exists() and not (tmp_path / "rank1.txt").exists()


def test_two_nodes_of_one_process_through_torchrun_rendezvous(tmp_path: Path) -> None:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "2",
        "--nproc-per-node",
        "1",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--rdzv-id",
        "trainkit-test",
        SCRIPT,
        "--root",
        str(tmp_path),
    ]
    env = repo_env()
    nodes = [
        subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(2)
    ]
    outputs = [node.communicate(timeout=240)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], "\n".join(o[-2000:] for o in outputs)
    assert (tmp_path / "rank0.txt").read_text() == "12"
    assert (tmp_path / "rank1.txt").read_text() == "12"
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["version_0"]


@pytest.fixture(scope="module")
def plain_python_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The script run with plain ``python`` and two devices (``ddp``): its root.

    Two tests read it (one job start fewer): the run itself, and the reference a
    ``ddp_spawn`` run's caller is compared with.
    """
    root = tmp_path_factory.mktemp("plain-python")
    result = _python(root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root


def test_plain_python_with_two_devices_starts_the_second_process(plain_python_run: Path) -> None:
    _both_ranks_trained_and_only_rank_zero_wrote(plain_python_run)


def test_spawned_ranks_train_and_hand_the_result_back(
    tmp_path: Path, plain_python_run: Path
) -> None:
    spawned = tmp_path / "spawned"
    result = _python(spawned, "--strategy", "ddp_spawn")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    _both_ranks_trained_and_only_rank_zero_wrote(spawned, launched=False)
    # The calling process took no part, yet ends with the trained weights and
    # counters: the same as rank 0 of a `ddp` run from the same seed.
    assert (spawned / "caller.txt").read_text() == (plain_python_run / "caller.txt").read_text()
    assert (spawned / "caller.txt").read_text().startswith("12 ")


def test_a_spawned_rank_raising_ends_the_run_with_its_traceback(tmp_path: Path) -> None:
    start = time.monotonic()
    result = _python(tmp_path, "--strategy", "ddp_spawn", "--fail-rank", "1")
    elapsed = time.monotonic() - start
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert elapsed < 60, f"took {elapsed:.0f} s"
    assert "deliberate failure on rank 1 at step 5" in output
    assert not (tmp_path / "caller.txt").exists()

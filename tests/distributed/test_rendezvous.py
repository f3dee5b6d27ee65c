"""DDPStrategy(init_method=...): processes started by hand meet over tcp:// or file://."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import torch

from tests.distributed import workers
from tests.distributed.spawn import free_port, run_by_hand
from trainkit.strategies.ddp import DDPStrategy

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "tests" / "distributed" / "init_script.py")


def _start_by_hand(init_method: str, out: Path) -> None:
    command = [SCRIPT, "--init-method", init_method, "--world-size", "2", "--out", str(out)]
    run_by_hand([[*command, "--rank", str(rank)] for rank in range(2)], timeout=180)


@pytest.mark.parametrize("scheme", ["tcp", "file"])
def test_two_processes_started_by_hand_match_one_process(tmp_path: Path, scheme: str) -> None:
    init_method = (
        f"tcp://127.0.0.1:{free_port()}" if scheme == "tcp" else f"file://{tmp_path / 'rendezvous'}"
    )
    _start_by_hand(init_method, tmp_path / "final.pt")
    two = torch.load(tmp_path / "final.pt", weights_only=True)
    # One process at the same global batch (32), drawing the same order.
    one = workers.train("single_device", 32, 8, None)["state"]
    for name, value in one.items():
        torch.testing.assert_close(two[name], value, rtol=1e-5, atol=1e-6)


def test_an_unreachable_address_is_named_within_the_timeout() -> None:
    strategy = DDPStrategy(
        "cpu", init_method="tcp://127.0.0.1:1", rank=1, world_size=2, timeout=timedelta(seconds=3)
    )
    with pytest.raises(
        RuntimeError, match=r"Rank 1 of 2 could not join .* at tcp://127\.0\.0\.1:1"
    ):
        strategy.setup_environment()


def test_a_local_rank_without_its_cuda_device_is_named_before_joining() -> None:
    # Local rank 1 computes on cuda:1: with fewer CUDA devices (none, on a CPU machine)
    # it says so before it tries to join (it would wait for the others, then fail in CUDA).
    have = torch.cuda.device_count()
    strategy = DDPStrategy("cuda", init_method="tcp://127.0.0.1:1", rank=have, world_size=have + 1)
    message = rf"local rank {have} computes on cuda:{have}, but this machine has {have} CUDA"
    with pytest.raises(RuntimeError, match=message):
        strategy.setup_environment()
    assert not torch.distributed.is_initialized()


def test_a_file_in_a_missing_folder_is_named_at_once(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder" / "rendezvous"
    strategy = DDPStrategy(init_method=f"file://{missing}", rank=0, world_size=2)
    with pytest.raises(RuntimeError, match=r"the folder .*no-such-folder does not exist"):
        strategy.setup_environment()


@pytest.mark.parametrize(
    ("init_method", "problem"),
    [("udp://host:1", "is not one of"), ("tcp://host", "needs a host and a port")],
)
def test_a_malformed_init_method_is_refused_when_built(init_method: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        DDPStrategy(init_method=init_method)
    with pytest.raises(ValueError, match="both rank and world_size"):
        DDPStrategy(init_method="env://", rank=0)

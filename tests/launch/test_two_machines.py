"""Two machines for real: two network namespaces joined by a virtual cable (a veth pair).

Each namespace has its own network stack: machine ``a`` is 10.77.0.1 and
machine ``b`` 10.77.0.2, and every byte the job sends between them crosses the
cable (so a cable can be cut: ``ip link set ... down``). On each machine a
torchrun agent starts the processes of its node; they meet at the c10d
rendezvous hosted by machine a's agent, as on a cluster. Needs root and
``ip netns`` (iproute2); skipped otherwise.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from tests.distributed.spawn import free_port
from tests.launch.running import ROOT, Job, run_whole, still_alive

SCRIPT = str(ROOT / "tests" / "launch" / "node_script.py")
ADDRESSES = {"a": "10.77.0.1", "b": "10.77.0.2"}
#: The promise for a machine that dies: the other's processes end within this long.
ENDS_WITHIN_S = 10.0
#: The process-group timeout the link-down test gives the Trainer.
TIMEOUT_S = 20.0
#: How long a process that has said why it failed may take to exit.
WORKER_EXIT_S = 15.0
# A lost node is noticed after 3 missed 1-second heartbeats; a rendezvous round waits
# 10 s for more nodes once enough are there (torch's defaults: 15 s and 30 s).
RDZV_CONF = "keep_alive_interval=1,keep_alive_max_attempt=3,last_call_timeout=10"


def _ip(*arguments: str) -> None:
    subprocess.run(["ip", *arguments], check=True, capture_output=True, timeout=30)


@dataclass
class Machines:
    """The two namespaces: ``names["a"]`` is machine a's, ``veths["a"]`` its end of the cable."""

    names: dict[str, str]
    veths: dict[str, str]

    def pids(self, machine: str) -> list[int]:
        """Every process running in ``machine``'s namespace."""
        listed = subprocess.run(
            ["ip", "netns", "pids", self.names[machine]], capture_output=True, text=True
        )
        return [int(pid) for pid in listed.stdout.split()]

    def kill(self, machine: str) -> None:
        """SIGKILL every process of ``machine``, as a machine losing power."""
        for pid in self.pids(machine):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def cut_cable(self, machine: str) -> None:
        """Take ``machine``'s network interface down: its packets go nowhere."""
        _ip("-n", self.names[machine], "link", "set", self.veths[machine], "down")

    def node(
        self,
        machine: str,
        root: Path,
        port: int,
        *script_arguments: str,
        nnodes: str = "2",
        nproc: int = 1,
        torchrun_arguments: tuple[str, ...] = (),
    ) -> Job:
        """Start torchrun on ``machine``: one node of a job meeting at machine a."""
        # Machine a hosts the rendezvous (it cannot tell from the hostname, which both
        # namespaces share); each agent gives its own address as the one to reach it
        # at, and gloo uses the cable's interface (not the hostname's 127.0.0.1).
        command = ["ip", "netns", "exec", self.names[machine], "env"]
        command += [f"GLOO_SOCKET_IFNAME={self.veths[machine]}", f"TRAINKIT_TEST_NODE={machine}"]
        command += [sys.executable, "-m", "torch.distributed.run", "--nnodes", nnodes]
        command += ["--nproc-per-node", str(nproc), "--rdzv-backend", "c10d"]
        command += ["--rdzv-endpoint", f"{ADDRESSES['a']}:{port}", "--rdzv-id", "two-machines"]
        command += ["--rdzv-conf", f"{RDZV_CONF},is_host={int(machine == 'a')}"]
        command += ["--local-addr", ADDRESSES[machine], *torchrun_arguments]
        command += [SCRIPT, "--root", str(root), *script_arguments]
        return Job(command)


@pytest.fixture
def machines() -> Iterator[Machines]:
    if os.geteuid() != 0:
        pytest.skip("making network namespaces needs root")
    if shutil.which("ip") is None:
        pytest.skip("the ip command (iproute2) is not installed")
    tag = f"tk{os.getpid() % 100000}{int(time.monotonic() * 1000) % 1000}"
    names = {machine: f"{tag}{machine}" for machine in ADDRESSES}
    veths = {machine: f"{tag}v{machine}" for machine in ADDRESSES}
    made: list[str] = []
    try:
        for machine in ADDRESSES:
            try:
                _ip("netns", "add", names[machine])
            except subprocess.CalledProcessError as error:
                pytest.skip(f"ip netns add failed: {error.stderr.decode().strip()}")
            made.append(names[machine])
        _ip("link", "add", veths["a"], "type", "veth", "peer", "name", veths["b"])
        for machine, address in ADDRESSES.items():
            name, veth = names[machine], veths[machine]
            _ip("link", "set", veth, "netns", name)
            _ip("-n", name, "addr", "add", f"{address}/24", "dev", veth)
            _ip("-n", name, "link", "set", "lo", "up")
            _ip("-n", name, "link", "set", veth, "up")
        yield Machines(names, veths)
    finally:
        # Every process started in a namespace ends with it (a torchrun agent left
        # waiting for its rendezvous store would otherwise outlive the test).
        for machine, name in names.items():
            if name in made:
                Machines(names, veths).kill(machine)
        for name in made:
            # Deleting a namespace deletes its end of the cable, and so the cable.
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> dict[str, torch.Tensor]:
    """The final weights of one process (plain python) at the same global batch (32)."""
    root = tmp_path_factory.mktemp("one")
    result = run_whole([sys.executable, SCRIPT, "--root", str(root)], timeout=240)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return torch.load(root / "final.pt", weights_only=True)  # type: ignore[no-any-return]


def _assert_same_weights(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name].dtype == torch.float64
        torch.testing.assert_close(got[name], value, rtol=1e-5, atol=1e-8, msg=name)


def _both(a: Job, b: Job) -> tuple[int, int]:
    (code_a, _), (code_b, _) = a.wait(), b.wait()
    return code_a, code_b


@pytest.mark.parametrize("nproc", [1, 2])
def test_two_machines_train_as_one_process_and_only_rank_0_writes(
    machines: Machines, tmp_path: Path, one_process: dict[str, torch.Tensor], nproc: int
) -> None:
    # Each machine has a root of its own (its local disk): only rank 0's has logs.
    port = free_port()
    roots = {machine: tmp_path / machine for machine in ADDRESSES}
    a = machines.node("a", roots["a"], port, nproc=nproc)
    b = machines.node("b", roots["b"], port, nproc=nproc)
    codes = _both(a, b)
    assert codes == (0, 0), a.output[-3000:] + b.output[-3000:]
    world = 2 * nproc
    steps = {
        int(path.name[4:-4]): path.read_text()
        for root in roots.values()
        for path in root.glob("rank*.txt")
    }
    assert steps == {rank: "12" for rank in range(world)}  # every rank trained 12 steps
    # Each machine ran nproc processes, and the node that holds rank 0 wrote everything.
    first, second = sorted(roots.values(), key=lambda root: not (root / "rank0.txt").exists())
    assert len(list(first.glob("rank*.txt"))) == len(list(second.glob("rank*.txt"))) == nproc
    assert sorted(p.name for p in (first / "logs").iterdir()) == ["version_0"]
    assert (first / "checkpoints" / "last.ckpt").is_file()
    assert (first / "starts.txt").read_text() == f"0 {world}\n"
    assert sorted(p.name for p in second.iterdir()) == sorted(
        f"rank{rank}.txt" for rank in range(world) if (second / f"rank{rank}.txt").exists()
    )  # the other machine: nothing but its ranks' own records
    _assert_same_weights(torch.load(first / "final.pt", weights_only=True), one_process)


def test_a_machine_killed_mid_run_ends_the_other_within_seconds_naming_it(
    machines: Machines, tmp_path: Path
) -> None:
    port = free_port()
    arguments = ("--max-steps", "400", "--delay", "0.2", "--timeout", "120")
    a = machines.node("a", tmp_path / "a", port, *arguments, nproc=2)
    b = machines.node("b", tmp_path / "b", port, *arguments, nproc=2)
    a.wait_for("node a rank")
    b.wait_for("step 5")
    killed_at = time.monotonic()
    machines.kill("b")
    code, ended_at = a.wait()
    output = a.output
    assert code != 0, output[-3000:]
    # Far sooner than the process-group timeout (120 s): the kernel closed the dead
    # machine's connections, and each process of machine a says whose they were.
    assert ended_at - killed_at < ENDS_WITHIN_S, f"ended {ended_at - killed_at:.1f} s after"
    # gloo's own line names the dead machine's address; its wording depends on where
    # the connection broke ("Connection closed by peer [ADDR]" or "Read error [ADDR]:
    # ... Connection reset by peer").
    lost = [line for _, line in a.lines if f"[{ADDRESSES['b']}]" in line and "by peer" in line]
    assert lost, output[-3000:]
    # Each process of machine a names machine b's ranks. One blocked a moment longer
    # on its neighbour on a (which holds its connections open while it waits for the
    # reports) may name that neighbour too: the line reads "did not report in time"
    # (docs/multi-node.md). The one that failed last has heard from the other.
    said = [line for _, line in a.lines if "stopped answering" in line]
    assert said and all(_names(line, [2, 3], "b", at_least=True) for line in said), said
    assert any(_names(line, ranks=[2, 3], machine="b") for line in said), said
    assert not machines.pids("a")


@pytest.mark.slow
def test_a_lost_machine_the_job_resumes_alone_from_its_checkpoint_with_the_same_result(
    machines: Machines, tmp_path: Path, one_process: dict[str, torch.Tensor]
) -> None:
    # --nnodes 1:2 --max-restarts 1: when machine b dies, machine a's agent restarts
    # its process alone (world size 2 -> 1); with no ckpt_path, fit continues from the
    # last checkpoint in the shared folder (the same path on both: a shared disk).
    port = free_port()
    elastic = ("--max-restarts", "1")
    arguments = ("--delay", "0.3")
    a = machines.node("a", tmp_path, port, *arguments, nnodes="1:2", torchrun_arguments=elastic)
    b = machines.node("b", tmp_path, port, *arguments, nnodes="1:2", torchrun_arguments=elastic)
    b.wait_for("step 5")  # a checkpoint is saved every 2 steps: at step 4 by now
    machines.kill("b")
    code, _ = a.wait()
    output = a.output
    assert code == 0, output[-4000:]
    assert "this job was restarted (1 time(s))" in output
    starts = (tmp_path / "starts.txt").read_text().splitlines()
    assert starts[0] == "0 2" and len(starts) == 2, starts
    resumed_at, world = map(int, starts[1].split())
    assert world == 1 and resumed_at >= 4 and resumed_at % 2 == 0, starts
    _assert_same_weights(torch.load(tmp_path / "final.pt", weights_only=True), one_process)


@pytest.mark.slow
def test_a_cut_cable_ends_both_machines_within_the_timeout_naming_the_silent_peer(
    machines: Machines, tmp_path: Path
) -> None:
    port = free_port()
    arguments = ("--max-steps", "1000", "--delay", "0.2", "--timeout", str(TIMEOUT_S))
    a = machines.node("a", tmp_path / "a", port, *arguments)
    b = machines.node("b", tmp_path / "b", port, *arguments)
    a.wait_for("step 5")
    cut_at = time.monotonic()
    machines.cut_cable("b")
    # No connection closes: the processes wait in the gradient all-reduce until the
    # process-group timeout, then fail saying which process stopped answering.
    code, ended_at = a.wait()
    output = a.output
    assert code != 0, output[-3000:]
    assert TIMEOUT_S - 2 < ended_at - cut_at < TIMEOUT_S + 25, f"{ended_at - cut_at:.1f} s"
    said_a, said_b = a.wait_for("stopped answering"), b.wait_for("stopped answering")
    assert said_b - cut_at < TIMEOUT_S + 25, f"machine b's process said so {said_b - cut_at:.1f} s"
    # Each side names the other: machine a the rank it lost, machine b (which cannot
    # reach the rendezvous store on rank 0's machine either) that store's address.
    for job, other in ((a, "b"), (b, "a")):
        line = _line(job, "stopped answering")
        rank = int(line.split("trainkit: rank ")[1].split()[0])
        assert _names(line, ranks=[1 - rank], machine=other), line
    assert said_a - cut_at >= TIMEOUT_S - 2
    # Machine b's worker ends (it does not wait on for the store it cannot reach; its
    # exit takes ~0.5 s here, longer on a loaded machine); its torchrun agent waits on
    # for the rendezvous store (torch's, not trainkit's: the fixture ends it).
    workers = [
        pid
        for pid in machines.pids("b")
        if "node_script" in _cmdline(pid) and "torch.distributed.run" not in _cmdline(pid)
    ]
    running = still_alive(workers, within_s=WORKER_EXIT_S)
    assert not running, f"machine b's worker still runs {WORKER_EXIT_S:.0f} s after its line"


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    return ""


def _line(job: Job, text: str) -> str:
    return next(line for _, line in job.lines if text in line)


def _names(line: str, ranks: list[int], machine: str, at_least: bool = False) -> bool:
    """Whether trainkit's line names ``ranks`` as silent, or else ``machine``'s store.

    Which machine's processes get rank 0 (and so host the store) is the rendezvous'
    choice: a process cut off from the store names the store's address instead.
    ``at_least``: others may be named with ``ranks``.
    """
    if f"store at {ADDRESSES[machine]}:" in line:
        return True
    named = re.search(r"ranks? ([\d, ]+) stopped answering", line)
    if named is None:
        return False
    silent = {int(rank) for rank in named.group(1).split(", ")}
    return set(ranks) <= silent if at_least else set(ranks) == silent

"""Running a job as a user would, and watching its output, with the time of each line."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.helpers import repo_env

ROOT = Path(__file__).resolve().parents[2]
FAULT_SCRIPT = str(ROOT / "tests" / "launch" / "fault_script.py")
#: How long a test waits for a job to reach a point (the machine may be loaded).
PATIENCE_S = 240.0


class Job:
    """A command run in a session of its own (its process group, as a terminal's job is).

    A thread reads its output (every process of the job shares it) as it comes:
    :attr:`closed_at` is when the last process holding it ended.
    """

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=repo_env(PYTHONUNBUFFERED="1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[tuple[float, str]] = []
        self.closed_at: float | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def python(cls, root: Path, *arguments: str) -> Job:
        """``python fault_script.py --root ROOT ...`` (strategy ``ddp``: trainkit starts rank 1)."""
        root.mkdir(parents=True, exist_ok=True)
        return cls([sys.executable, FAULT_SCRIPT, "--root", str(root), *arguments])

    @classmethod
    def torchrun(cls, root: Path, port: int, *arguments: str) -> Job:
        """The same script under ``torchrun --nproc-per-node 2``."""
        root.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
        command += ["--master-port", str(port), FAULT_SCRIPT, "--root", str(root), *arguments]
        return cls(command)

    @classmethod
    def slurm(cls, root: Path, port: int, *arguments: str) -> Job:
        """The script as two tasks of a SLURM job step, started as ``srun --ntasks 2`` does.

        The stand-in for srun sets each task's SLURM variables, waits for both and
        exits with the first non-zero status; like srun without
        ``--kill-on-bad-exit`` it ends no task itself.
        """
        root.mkdir(parents=True, exist_ok=True)
        tasks = [FAULT_SCRIPT, "--root", str(root), *arguments]
        srun = (
            "import os, subprocess, sys\n"
            "tasks = [subprocess.Popen([sys.executable, *sys.argv[1:]], env={**os.environ,\n"
            "    'SLURM_PROCID': str(r), 'SLURM_LOCALID': str(r), 'SLURM_NTASKS': '2',\n"
            "    'SLURM_JOB_ID': '4242', 'SLURM_JOB_NAME': 'train',\n"
            f"    'MASTER_ADDR': '127.0.0.1', 'MASTER_PORT': '{port}'}}) for r in range(2)]\n"
            "codes = [task.wait() for task in tasks]\n"
            "sys.exit(next((code for code in codes if code), 0) and 1)\n"
        )
        return cls([sys.executable, "-c", srun, *tasks])

    @property
    def output(self) -> str:
        return "".join(line for _, line in self.lines)

    def wait_for(self, text: str) -> float:
        """When a line containing ``text`` appeared (waiting for it)."""
        deadline = time.monotonic() + PATIENCE_S
        seen = 0
        while time.monotonic() < deadline:
            for at, line in self.lines[seen:]:
                if text in line:
                    return at
                seen += 1
            if self.closed_at is not None and seen == len(self.lines):
                break
            time.sleep(0.02)
        self.kill()
        raise AssertionError(f"no line with {text!r}:\n{self.output[-4000:]}")

    def wait(self) -> tuple[int, float]:
        """The job's exit status, and when its last process ended."""
        try:
            code = self.process.wait(timeout=PATIENCE_S)
        finally:
            self._reader.join(timeout=PATIENCE_S)
        if self.closed_at is None:
            self.kill()
            raise AssertionError(f"a process of the job outlived it:\n{self.output[-4000:]}")
        return code, self.closed_at

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the job's first process only."""
        self.process.send_signal(signum)

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to every process of the job, as a terminal's Ctrl-C does."""
        os.killpg(self.process.pid, signum)

    def kill(self) -> None:
        """End every process of the job (clean-up after a failed test)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append((time.monotonic(), line))
        self.closed_at = time.monotonic()


def alive(pid: int) -> bool:
    """Whether process ``pid`` is running (a zombie, ended but not reaped, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def still_alive(pids: list[int], within_s: float) -> list[int]:
    """The processes among ``pids`` still running ``within_s`` seconds from now at most.

    A process killed because its parent died (``PR_SET_PDEATHSIG``) is signalled
    as the parent exits, and ends when the kernel next schedules it: on a loaded
    machine, a moment after the parent's exit status is already known.
    """
    deadline = time.monotonic() + within_s
    while (running := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return running


def rank_pids(root: Path) -> list[int]:
    """The process ids the job's ranks wrote (``pid<rank>.txt``)."""
    return [int(path.read_text()) for path in sorted(root.glob("pid*.txt"))]


def descendants(pid: int) -> list[int]:
    """Every living process started by ``pid`` or by one of its descendants (from /proc)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # "pid (name) state ppid ...": the name may hold spaces, so split after ")".
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def run_whole(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``command`` from the repository root in a session of its own, to the end.

    On a timeout the whole session (a torchrun agent and every worker it started)
    is killed, so no process outlives the test; the result then has a negative
    return code.

    Args:
        command: the command line.
        timeout: seconds to wait for it.
    """
    job = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=repo_env(),
        start_new_session=True,
    )
    try:
        stdout, stderr = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # torchrun starts each worker in a session of its own: end them by ancestry.
        for pid in [*descendants(job.pid), job.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        stdout, stderr = job.communicate()
    return subprocess.CompletedProcess(command, job.returncode, stdout, stderr)

"""Everything a GPU session should prove, in one command, into one report.

1. ``pytest -m gpu tests`` (every other GPU test of the suite), then
   ``pytest tests/trainer/test_devices.py`` (the CPU and CUDA cases of the device tests,
   the host-sync test included);
2. ``benchmarks/gpu.py`` (ResNet-18 images/s: trainkit vs a hand-written loop vs
   Lightning, bf16/fp16, eager and compiled; the CIFAR-10 recipe's epoch);
3. with ``--suite SECONDS``, the whole test suite on the machine's cores.

It writes ``DIR/report.md`` and ``DIR/report.json``: each part's pass/fail, exit
status, time and output tail (its whole output in ``DIR/<part>.log``), every figure
of the benchmark, and the GPU's name, the driver, CUDA and torch versions. It exits
non-zero if any part failed.

``--dry-run`` runs the same parts on the CPU: the GPU tests are collected and
deselected or skipped, and the benchmark runs with ``--quick`` (CI runs this, so the script
cannot rot). Run from the repository root, without installing trainkit::

    PYTHONPATH=. python benchmarks/gpu_check.py --out DIR [--dry-run] [--budget SECONDS]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _report  # benchmarks/_report.py, beside this script

TAIL = 4000  # characters of each part's output kept in the report
# Seconds each part may take on the GPU machine (19 minutes in all); --budget scales them.
LIMITS = {"gpu tests": 240, "device tests": 240, "benchmark": 660}
# Seconds one test may take before pytest-timeout (where installed) fails it, so that a
# hung collective costs one test rather than its part's whole limit.
TEST_TIMEOUT = 120


def gpu_info() -> dict[str, Any]:
    """GPU name, driver, CUDA and torch versions (what there is without a GPU)."""
    import torch

    info: dict[str, Any] = {"torch": torch.__version__, "cuda_build": torch.version.cuda}
    info["cuda_available"] = torch.cuda.is_available()
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
        info["gpu_count"] = torch.cuda.device_count()
        info["capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        info["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        info["nvidia_smi"] = f"not run: {error}"
    return info


def failed_tests(output: str) -> list[str]:
    """The tests pytest reported failed or in error, from its verbose lines (printed as
    each test ends, so named even when the run is cut) and its summary.

    Example:
        >>> failed_tests("[gw1] [ 5%] FAILED tests/a.py::test_x[cuda] \\n"
        ...              "tests/b.py::test_y ERROR [ 9%]\\nFAILED tests/a.py::test_x[cuda] - boom")
        ['tests/a.py::test_x[cuda]', 'tests/b.py::test_y']
    """
    named = re.findall(r"(?:FAILED|ERROR) (tests/\S+::\S+)", output)
    named += re.findall(r"(tests/\S+::\S+) (?:FAILED|ERROR)", output)
    return sorted(set(named))


def run_part(
    name: str, command: list[str], limit: float, env: dict[str, str], out: Path
) -> dict[str, Any]:
    """Run one part; its status, time and output tail (the whole output in ``out/NAME.log``)."""
    print(f"== {name}: {' '.join(command)}", flush=True)
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=limit, env=env, check=False
        )
        status, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as error:
        status = 124
        output = f"{error.stdout or ''}{error.stderr or ''}\n[timed out after {limit:.0f} s]"
        output = output if isinstance(output, str) else output.decode(errors="replace")
    seconds = time.perf_counter() - start
    (out / f"{name.replace(' ', '-')}.log").write_text(output)
    print(output[-TAIL:], flush=True)
    print(f"== {name}: exit {status} in {seconds:.1f} s", flush=True)
    return {
        "command": command,
        "exit": status,
        "passed": status == 0,
        "seconds": seconds,
        "failed": failed_tests(output),
        "tail": output[-TAIL:],
    }


def write_report(out: Path, report: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [
        "# trainkit GPU check",
        "",
        f"- command: `{report['command']}`",
        f"- dry run: {report['dry_run']}",
        f"- result: {'PASS' if report['passed'] else 'FAIL'}",
        "",
        "## Machine",
        "",
        *(f"- {key}: {value}" for key, value in {**report["gpu"], **report["machine"]}.items()),
    ]
    for name, part in report["parts"].items():
        verdict = "passed" if part["passed"] else f"FAILED (exit {part['exit']})"
        lines += ["", f"## {name}: {verdict}, {part['seconds']:.1f} s", ""]
        if part["failed"]:
            lines += ["Failed:", "", *(f"- `{test}`" for test in part["failed"]), ""]
        lines += [f"`{' '.join(part['command'])}`", "", "```", part["tail"].rstrip(), "```"]
    figures = report.get("benchmark")
    if figures:
        lines += ["", "## Figures", ""]
        if report["dry_run"]:
            lines += ["A dry run: tiny sizes on the CPU, to check the code; not measurements.", ""]
        lines += ["| variant | images/s (median) | ratio to raw |"]
        lines += ["| --- | --- | --- |"]
        for key, rate in figures["images_per_s_median"].items():
            lines.append(f"| {key} | {rate:,.0f} | {figures['ratios_to_raw'][key]:.3f} |")
        recipe = figures.get("recipe")
        if recipe:
            lines += [
                "",
                f"CIFAR-10 recipe: one epoch over {recipe['train_images']:,} synthetic images "
                f"{recipe['epoch_s']:.1f} s, 24 epochs projected "
                f"{recipe['projected_24_epochs_s'] / 60:.1f} min.",
            ]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print(f"report written to {out / 'report.md'} and {out / 'report.json'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for report.md/.json")
    parser.add_argument("--dry-run", action="store_true", help="on the CPU, tiny sizes")
    parser.add_argument(
        "--budget", type=float, default=sum(LIMITS.values()),
        help=f"seconds for all parts together; each part's limit scales with it "
        f"(default {sum(LIMITS.values())})",
    )  # fmt: skip
    parser.add_argument(
        "--suite", type=float, default=0, metavar="SECONDS",
        help="also run the whole test suite, for at most SECONDS (0: not)",
    )  # fmt: skip
    parser.add_argument(
        "--benchmark-args", default="",
        help='more arguments for benchmarks/gpu.py, e.g. "--repeats 2 --compile-repeats 0"',
    )  # fmt: skip
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    os.chdir(root)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    # Deterministic cuBLAS needs its workspace set before the process's first cuBLAS call.
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

    import torch

    if not args.dry_run and not torch.cuda.is_available():
        parser.error("No CUDA device here. Run on a GPU machine, or pass --dry-run.")
    args.out.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    # One process (-n 0): the tests share one GPU, and each part's time is its own.
    timeout = []
    if importlib.util.find_spec("pytest_timeout") is not None:
        timeout = [f"--timeout={TEST_TIMEOUT}"]
    # -v: each test's verdict as it ends, so a part cut by its limit still names failures.
    flags = ["-p", "no:cacheprovider", "-p", "no:benchmark", "-v", "-rfEs"]
    pytest = [python, "-m", "pytest", *flags, "-n", "0", *timeout]
    # Every GPU test of the suite (in the dry run all of them skip or deselect), then
    # the device tests' CPU and CUDA cases together.
    gpu_tests = [*pytest, "-m", "gpu", "tests", "--ignore=tests/trainer/test_devices.py"]
    device_tests = [*pytest, "tests/trainer/test_devices.py"]
    figures_file = args.out / "benchmark.json"
    benchmark = [python, "benchmarks/gpu.py", "--json", str(figures_file)]
    if args.dry_run:
        benchmark.append("--quick")
    benchmark += shlex.split(args.benchmark_args)
    scale = args.budget / sum(LIMITS.values())
    limits = {name: limit * scale for name, limit in LIMITS.items()}

    parts = {
        "gpu tests": run_part("gpu tests", gpu_tests, limits["gpu tests"], env, args.out),
        "device tests": run_part(
            "device tests", device_tests, limits["device tests"], env, args.out
        ),
        "benchmark": run_part("benchmark", benchmark, limits["benchmark"], env, args.out),
    }
    if args.suite:
        # The whole suite on this machine's cores, a test per worker at a time (--dist
        # load); failures named as they happen (-v) and in the summary (-rfE).
        workers = str(max(2, min(15, (os.cpu_count() or 2) - 1)))
        suite = [python, "-m", "pytest", *flags, *timeout, "-n", workers, "--dist", "load"]
        parts["suite"] = run_part("suite", suite, args.suite, env, args.out)
    report: dict[str, Any] = {
        "command": _report.exact_command(),
        "dry_run": args.dry_run,
        "passed": all(part["passed"] for part in parts.values()),
        "gpu": gpu_info(),
        "machine": _report.machine_info(),
        "parts": parts,
        "benchmark": json.loads(figures_file.read_text()) if figures_file.exists() else None,
    }
    write_report(args.out, report)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""Two checkouts of trainkit, side by side on ``overhead.py``'s workload.

A change to the per-step path moves ``overhead.py``'s ratios by a fraction of a
percent, less than the VM's drift between two runs of the script minutes apart.
This runs ``overhead.py``'s variants for each checkout in its own fresh process,
alternating the checkouts process by process (A B, B A, A B, ...), and reports
for each checkout the mean over its processes of the ratio of medians to the
same process's raw loop, with the spread of the per-process ratios: a drift of
the machine's speed then moves both checkouts alike.

Each process times ``--rounds`` rounds of the variants (rotating their order)
after one untimed warm-up run of each. Every checkout runs the *same*
benchmark, this checkout's ``overhead.py``, against its own ``trainkit``.

Run from the repository root (``--base``: another checkout, e.g. a
``git worktree add ../base HEAD~3``)::

    python benchmarks/overhead_ab.py --base ../base [--processes 6] [--rounds 8]
        [--variants raw bare default]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import _report  # benchmarks/_report.py, beside this script

HERE = Path(__file__).resolve().parent


def worker(tree: Path, variants: list[str], rounds: int) -> None:
    """Inside one process: time ``variants`` with ``tree``'s trainkit; print the times as JSON."""
    sys.path.insert(0, str(tree))  # this checkout's trainkit, before any installed one
    import overhead  # benchmarks/overhead.py, beside this script
    import torch

    import trainkit

    if not Path(trainkit.__file__).resolve().is_relative_to(tree):
        raise RuntimeError(f"imported trainkit from {trainkit.__file__}, not from {tree}")
    torch.set_num_threads(1)  # as overhead.py runs it
    times, _ = overhead.timed_rounds(variants, overhead.build_dataset(20_000), rounds)
    print(json.dumps({"trainkit": str(Path(trainkit.__file__).parent), "times": times}))


def _run_process(tree: Path, variants: list[str], rounds: int) -> dict[str, list[float]]:
    command = [sys.executable, __file__, "--worker", str(tree), *variants, "--rounds", str(rounds)]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    environment.pop("PYTHONPATH", None)  # the worker puts the checkout first itself
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the run of {tree} failed:\n{done.stderr[-3000:]}")
    times: dict[str, list[float]] = json.loads(lines[-1])["times"]
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="the other checkout (its repository root)")
    parser.add_argument("--processes", type=int, default=6, help="processes per checkout")
    parser.add_argument("--rounds", type=int, default=8, help="timed rounds per process")
    parser.add_argument("--variants", nargs="+", default=["raw", "bare", "default"])
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("worker_variants", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker.resolve(), args.worker_variants, args.rounds)
        return 0
    if args.base is None or not (args.base / "trainkit" / "__init__.py").is_file():
        parser.error("--base must be another checkout's root (a folder holding trainkit/).")
    if args.variants[0] != "raw" or args.processes < 1 or args.rounds < 1:
        parser.error("--variants must start with raw; --processes and --rounds must be >= 1.")
    trees = {"this checkout": HERE.parent, "base": args.base.resolve()}
    print(f"command: {_report.exact_command()}")
    print(f"checkouts: this {trees['this checkout']}, base {trees['base']}")
    print(f"{args.processes} processes per checkout, alternating; {args.rounds} rounds each")
    print()
    runs: dict[str, list[dict[str, list[float]]]] = {name: [] for name in trees}
    for index in range(args.processes):
        order = list(trees) if index % 2 == 0 else list(reversed(trees))
        for name in order:
            runs[name].append(_run_process(trees[name], args.variants, args.rounds))
    result: dict[str, dict[str, dict[str, float | list[float]]]] = {}
    for name, processes in runs.items():
        print(f"{name}:")
        result[name] = {}
        for variant in args.variants[1:]:
            ratios = [
                statistics.median(times[variant]) / statistics.median(times["raw"])
                for times in processes
            ]
            mean = statistics.mean(ratios)
            spread = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
            result[name][variant] = {"mean_ratio": mean, "stdev": spread, "ratios": ratios}
            shown = " ".join(f"{ratio:.3f}" for ratio in ratios)
            print(f"  {variant:<10} {mean:.4f} +- {spread:.4f}  (per process: {shown})")
    print()
    for variant in args.variants[1:]:
        change = (
            result["this checkout"][variant]["mean_ratio"]  # type: ignore[operator]
            - result["base"][variant]["mean_ratio"]
        )
        print(f"{variant}: this checkout - base = {change:+.4f} (in ratio to the raw loop)")
    if args.json is not None:
        _report.write_json(args.json, {"command": _report.exact_command(), "result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Instructions per training step of overhead.py's variants, counted by callgrind.

Wall-clock ratios on a shared machine move by several percent between runs;
instruction counts do not depend on the machine's speed or load. For each
variant of ``benchmarks/overhead.py`` (raw, bare, default), this runs the
variant under ``valgrind --tool=callgrind --instr-atstart=no``: two warm-up
runs of 5 steps (imports, lazy set-up) are not counted; instrumentation is
switched on with ``callgrind_control`` around one measured run of N steps. The
per-step count is the difference between a short and a long run divided by the
difference in steps, so one-off costs cancel. (``default`` writes to its
loggers every 50 steps: give it runs that both pass step 50, e.g. 60 and 160.)

Run from the repository root (needs valgrind; each run takes a minute or two)::

    PYTHONPATH=. python benchmarks/overhead_instructions.py [--steps 20 60] [--variants raw bare]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import _report  # benchmarks/_report.py, beside this script


def worker(variant: str, steps: int) -> None:
    """Run inside valgrind: warm up, then count one run of ``steps`` steps."""
    import overhead  # benchmarks/overhead.py, beside this script
    import torch

    torch.set_num_threads(1)  # as overhead.py runs it

    run = overhead.RUNNERS[variant]
    with (
        tempfile.TemporaryDirectory() as root,
        open(os.devnull, "w") as sink,
        contextlib.redirect_stdout(sink),
        contextlib.redirect_stderr(sink),
    ):
        for _ in range(2):
            run(overhead.build_dataset(overhead.BATCH_SIZE * 5), Path(root))
        dataset = overhead.build_dataset(overhead.BATCH_SIZE * steps)
        gc.collect()
        gc.freeze()  # no collection of earlier garbage inside the measured run
        pid = str(os.getpid())
        subprocess.run(["callgrind_control", "-i", "on", pid], check=True, stdout=sink)
        run(dataset, Path(root))
        subprocess.run(["callgrind_control", "-i", "off", pid], check=True, stdout=sink)


def count(variant: str, steps: int, folder: Path) -> int:
    """Instructions callgrind counted in one measured run."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={folder / f'{variant}.{steps}.out'}",
        sys.executable,
        __file__,
        "--worker",
        variant,
        str(steps),
    ]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run of {variant} ({steps} steps) failed:\n{done.stderr}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs=2, default=(20, 60), metavar=("SHORT", "LONG"))
    parser.add_argument("--variants", nargs="+", default=["raw", "bare", "default"])
    parser.add_argument("--worker", nargs=2, metavar=("VARIANT", "STEPS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]))
        return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind (with callgrind_control) is not installed; nothing measured.")
        return
    import torch

    torch.set_num_threads(1)  # what the measured runs use
    print(f"command: {_report.exact_command()}")
    for key, value in _report.machine_info().items():
        print(f"{key}: {value}")
    short, long = args.steps
    per_step: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        for variant in args.variants:
            counts = [count(variant, steps, Path(folder)) for steps in (short, long)]
            per_step[variant] = (counts[1] - counts[0]) / (long - short)
            print(f"{variant:8s} {counts[0]:>13,} ({short} steps)  {counts[1]:>13,} ({long} steps)")
    print()
    for variant, value in per_step.items():
        extra = f"   {value - per_step['raw']:+,.0f} vs raw" if "raw" in per_step else ""
        print(f"{variant:8s} {value:>12,.0f} instructions per step{extra}")


if __name__ == "__main__":
    main()

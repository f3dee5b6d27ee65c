"""What ``import trainkit`` costs on top of ``import torch``.

``import trainkit`` imports its public names on first use, so the statement
timed is ``import torch, trainkit; trainkit.Trainer``: the import a user pays
for before building a Trainer. It times ``python -c "import torch"`` and that
statement in fresh interpreter processes (a module imported once is cached, so only a new
process measures a real import), alternating the two, and compares medians.
It also lists which heavy optional packages (tensorboard, omegaconf, tqdm,
yaml) are in ``sys.modules`` after ``import trainkit``, separating those that
``import torch`` already loads from those trainkit adds: trainkit must add none,
as it imports them only when a feature needs them (DESIGN.md).

Run from the repository root::

    PYTHONPATH=. python benchmarks/import_time.py [--repeats 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _report  # benchmarks/_report.py, beside this script

TARGET_DIFFERENCE_S = 0.25
HEAVY_MODULES = ("tensorboard", "omegaconf", "tqdm", "yaml")
STATEMENTS = {
    "torch": "import torch",
    "torch+trainkit": "import torch, trainkit; trainkit.Trainer",
}
# Run in a fresh process: the heavy modules present after `import torch` and
# those `import trainkit` adds. Only the latter are trainkit's doing: torch.hub,
# for one, imports tqdm whenever it is installed.
_PROBE = f"""
import json, sys
heavy = {HEAVY_MODULES!r}
def loaded():
    return {{n for n in sys.modules if any(n == h or n.startswith(h + ".") for h in heavy)}}
import torch
by_torch = loaded()
import trainkit
trainkit.Trainer
print(json.dumps({{
    "trainkit": trainkit.__file__,
    "by_torch": sorted(by_torch),
    "by_trainkit": sorted(loaded() - by_torch),
}}))
"""


def time_statement(statement: str) -> float:
    """Wall time of a fresh ``python -c statement``, interpreter start-up included."""
    start = time.perf_counter()
    # The child inherits our environment (PYTHONPATH included), so it imports
    # the same trainkit this script would.
    subprocess.run([sys.executable, "-c", statement], check=True)
    return time.perf_counter() - start


def heavy_modules_after_import() -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE], check=True, capture_output=True, text=True
    )
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def top_level(names: list[str]) -> list[str]:
    """``["tqdm", "tqdm.auto", "yaml"]`` -> ``["tqdm", "yaml"]``."""
    return sorted({name.split(".")[0] for name in names})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeats", type=int, default=10, help="timed runs of each statement (default 10)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1.")

    command = _report.exact_command()
    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }
    print(f"command: {command}")
    for key, value in info.items():
        print(f"{key}: {value}")

    probe = heavy_modules_after_import()
    print(f"trainkit: {Path(probe['trainkit']).parent}")
    print()

    # Untimed warm-up: the first import after a while reads torch's files from
    # disk; later ones hit the page cache, which is what a user sees day to day.
    for statement in STATEMENTS.values():
        time_statement(statement)
    times: dict[str, list[float]] = {name: [] for name in STATEMENTS}
    for _ in range(args.repeats):
        # Alternate, so that drifting machine load affects both alike.
        for name, statement in STATEMENTS.items():
            times[name].append(time_statement(statement))

    medians = {name: statistics.median(samples) for name, samples in times.items()}
    difference = medians["torch+trainkit"] - medians["torch"]
    time_passed = difference <= TARGET_DIFFERENCE_S
    loaded = probe["by_trainkit"]
    heavy_passed = not loaded

    for name, statement in STATEMENTS.items():
        samples = times[name]
        print(
            f'python -c "{statement}": median {medians[name]:.3f}s '
            f"(min {min(samples):.3f}s, max {max(samples):.3f}s, {len(samples)} runs)"
        )
    print(
        f"difference (trainkit's own cost): {difference:+.3f}s "
        f"(target <= {TARGET_DIFFERENCE_S:.2f}s) {'PASS' if time_passed else 'MISS'}"
    )
    by_torch = top_level(probe["by_torch"])
    print(f"heavy modules already loaded by `import torch`: {', '.join(by_torch) or 'none'}")
    if heavy_passed:
        print(f"heavy modules added by `import trainkit`: none of {', '.join(HEAVY_MODULES)} PASS")
    else:
        print(
            f"heavy modules added by `import trainkit`: {', '.join(top_level(loaded))} MISS "
            f"({len(loaded)} modules: {', '.join(loaded[:8])}{' ...' if len(loaded) > 8 else ''})"
        )

    if args.json is not None:
        result = {
            "command": command,
            "machine": info,
            "repeats": args.repeats,
            "times_s": times,
            "median_s": medians,
            "difference_s": difference,
            "target_difference_s": TARGET_DIFFERENCE_S,
            "heavy_modules_loaded_by_torch": probe["by_torch"],
            "heavy_modules_added_by_trainkit": loaded,
            "passed": {"import_time": time_passed, "no_heavy_modules": heavy_passed},
        }
        _report.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

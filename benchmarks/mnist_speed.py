"""The README's first command, timed end to end beside a hand-written loop doing the same work.

Runs, alternating, each in a fresh process (start-up included, as a user sees it):

* the recipe: ``trainkit fit recipes/mnist/config.yaml`` (fit, then ``test_after_fit``
  tests the best checkpoint on all 10,000 test images), its runs written to a
  temporary folder;
* the anchor: ``benchmarks/mnist_anchor.py``, the same network, data, optimizer,
  schedule, epochs, validation and test as a plain PyTorch loop.

It prints each run's wall time and test accuracy, and the ratio of the medians.
Targets (issue: a fast first run): the recipe within 30 s wall on two CPU cores,
at >= 99.0% test accuracy.

    TRAINKIT_DATA_DIR=../shared/data python benchmarks/mnist_speed.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _recipe(root: str) -> tuple[float, float]:
    command = [
        sys.executable,
        "-m",
        "trainkit",
        "fit",
        "recipes/mnist/config.yaml",
        f"trainer.default_root_dir={root}",
        "trainer.enable_progress_bar=false",
    ]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the recipe failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    printed = done.stdout[done.stdout.index("{", done.stdout.index("test_after_fit")) :]
    return seconds, float(json.loads(printed)["test/acc"])


def _anchor() -> tuple[float, float]:
    command = [sys.executable, "benchmarks/mnist_anchor.py", "--json"]
    # The anchor imports the recipe's data code (recipes/ is not an installed package).
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "PYTHONPATH": path}
    start = time.perf_counter()
    done = subprocess.run(
        command, cwd=ROOT, env=environment, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the anchor failed:\n{done.stderr[-2000:]}")
    return seconds, float(json.loads(done.stdout.strip().splitlines()[-1])["test_acc"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="runs of each, alternated")
    args = parser.parse_args()
    print(f"platform: {platform.platform()} | cpus: {os.cpu_count()} | python {sys.version[:6]}")
    recipe: list[float] = []
    anchor: list[float] = []
    for repeat in range(args.repeats):
        with tempfile.TemporaryDirectory() as root:
            seconds, accuracy = _recipe(root)
        recipe.append(seconds)
        print(f"run {repeat}: recipe (trainkit fit) {seconds:.1f} s wall, test/acc {accuracy:.4f}")
        seconds, accuracy = _anchor()
        anchor.append(seconds)
        print(f"run {repeat}: anchor (plain loop)   {seconds:.1f} s wall, test/acc {accuracy:.4f}")
    mine, theirs = statistics.median(recipe), statistics.median(anchor)
    print(
        f"median: recipe {mine:.1f} s, anchor {theirs:.1f} s, recipe/anchor {mine / theirs:.2f}"
        " (target: recipe <= 30 s at test/acc >= 0.990)"
    )


if __name__ == "__main__":
    main()

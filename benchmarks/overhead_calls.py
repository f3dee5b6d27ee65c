"""What each of the default Trainer's per-step calls costs inside the training loop.

``overhead.py`` times whole runs; ``overhead_instructions.py`` counts
instructions. Neither says which call a step's extra time goes to, and the two
disagree: between a step's kernels the framework's calls run with cold caches,
so they cost several times what their instructions suggest. This script runs
``overhead.py``'s default variant (``--fits`` fits of one epoch) with a clock
around each per-step function the Trainer calls, and prints the median time of
one call as measured there, beside the same call repeated in a tight loop where
one can be built. As a direct check of the cold-cache reading, at each logging
step it also writes the step's TensorBoard event twice in a row and reports
both times (the second write is of the same values; both land in the run's
event file).

Run from the repository root::

    PYTHONPATH=. python benchmarks/overhead_calls.py [--fits 5] [--samples 20000] [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _report  # benchmarks/_report.py, beside this script
import overhead  # benchmarks/overhead.py, beside this script
import torch

from trainkit.callbacks.checkpoint import ModelCheckpoint
from trainkit.callbacks.nonfinite import NonFiniteLoss
from trainkit.callbacks.progress import TQDMProgressBar
from trainkit.core.module import Module
from trainkit.loggers._event_file import EventFile
from trainkit.loops import fit as fit_loop
from trainkit.loops import hooks
from trainkit.loops.results import Results
from trainkit.loops.step import Optimization
from trainkit.strategies.base import Strategy
from trainkit.strategies.single import SingleDeviceStrategy

# (label, owner, attribute): the functions timed inside the loop.
TIMED: list[tuple[str, Any, str]] = [
    ("Strategy.batch_to_device", Strategy, "batch_to_device"),
    ("the batch's move without an accelerator", hooks, "_on_cpu_already"),
    ("Results.enter_training_step", Results, "enter_training_step"),
    ("Optimization.plain (the whole step)", Optimization, "plain"),
    ("NonFiniteLoss.observe", NonFiniteLoss, "observe"),
    ("Module.log", Module, "log"),
    ("TQDMProgressBar.on_train_batch_end", TQDMProgressBar, "on_train_batch_end"),
    ("the resume point", fit_loop, "_resume_point"),
    ("ModelCheckpoint.on_resume_point", ModelCheckpoint, "on_resume_point"),
    ("Optimization._after_step (logging steps)", Optimization, "_after_step"),
]


def _timed(durations: list[int], function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter_ns()
        try:
            return function(*args, **kwargs)
        finally:
            durations.append(time.perf_counter_ns() - start)

    return wrapper


def _written_twice(first: list[int], second: list[int]) -> Callable[..., None]:
    add_scalars = EventFile.add_scalars

    def write(self: EventFile, values: Any, step: int) -> None:
        start = time.perf_counter_ns()
        add_scalars(self, values, step)
        middle = time.perf_counter_ns()
        add_scalars(self, values, step)
        first.append(middle - start)
        second.append(time.perf_counter_ns() - middle)

    return write


def _tight_loop_us() -> dict[str, float]:
    """The same calls, repeated in a tight loop (warm caches), in microseconds."""
    x = torch.randn(overhead.BATCH_SIZE, overhead.IN_FEATURES)
    y = torch.randint(0, overhead.CLASSES, (overhead.BATCH_SIZE,))
    strategy = SingleDeviceStrategy(torch.device("cpu"))
    loss = torch.nn.functional.cross_entropy(overhead.build_network()(x), y)
    check = NonFiniteLoss()
    number = 20_000
    calls: dict[str, Callable[[], Any]] = {
        "Strategy.batch_to_device": lambda: strategy.batch_to_device([x, y], 0),
        "NonFiniteLoss.observe": lambda: check.observe(loss, 1),
    }
    return {
        label: min(timeit.repeat(call, number=number, repeat=5)) / number * 1e6
        for label, call in calls.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fits", type=int, default=5, help="timed fits (default 5)")
    parser.add_argument(
        "--samples", type=int, default=20_000, help="training samples (default 20000)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)
    if args.fits < 1 or args.samples < overhead.BATCH_SIZE:
        parser.error(f"--fits must be >= 1 and --samples >= {overhead.BATCH_SIZE}.")

    torch.set_num_threads(1)  # as overhead.py runs it
    command = _report.exact_command()
    info = _report.machine_info()
    print(f"command: {command}")
    for key, value in info.items():
        print(f"{key}: {value}")
    steps = -(-args.samples // overhead.BATCH_SIZE)
    print(f"workload: overhead.py's default variant, {steps} steps, {args.fits} fits")
    print()

    dataset = overhead.build_dataset(args.samples)
    durations: dict[str, list[int]] = {label: [] for label, _, _ in TIMED}
    first: list[int] = []
    second: list[int] = []
    originals = [(owner, name, getattr(owner, name)) for _, owner, name in TIMED]
    originals.append((EventFile, "add_scalars", EventFile.add_scalars))
    with tempfile.TemporaryDirectory(prefix="trainkit-calls-") as scratch:
        overhead.run_default(dataset, Path(scratch) / "warm-up")  # imports, lazy set-up
        try:
            for label, owner, name in TIMED:
                setattr(owner, name, _timed(durations[label], getattr(owner, name)))
            EventFile.add_scalars = _written_twice(first, second)  # type: ignore[method-assign]
            for index in range(args.fits):
                overhead.run_default(dataset, Path(scratch) / f"fit_{index}")
        finally:
            for owner, name, original in originals:
                setattr(owner, name, original)
    tight = _tight_loop_us()

    print(f"{'call':<44} {'calls/fit':>9} {'median':>10} {'mean':>10} {'tight loop':>11}")
    result: dict[str, Any] = {}
    for label, samples in durations.items():
        if not samples:
            continue
        median_us = statistics.median(samples) / 1e3
        mean_us = statistics.mean(samples) / 1e3
        hot = f"{tight[label]:>9.2f}us" if label in tight else f"{'':>11}"
        print(
            f"{label:<44} {len(samples) / args.fits:>9.0f} {median_us:>8.2f}us "
            f"{mean_us:>8.2f}us {hot}"
        )
        result[label] = {"median_us": median_us, "mean_us": mean_us, "calls": len(samples)}
    if first:
        first_us, second_us = statistics.median(first) / 1e3, statistics.median(second) / 1e3
        print()
        print(
            f"the logging step's TensorBoard write, twice in a row: first {first_us:.1f}us, "
            f"second {second_us:.1f}us (medians of {len(first)})"
        )
        result["event_write_first_us"], result["event_write_second_us"] = first_us, second_us
    print("(The resume point and ModelCheckpoint.on_resume_point include the end-of-epoch save")
    print(" in their means; their medians are a step's check. _after_step includes the second,")
    print(" added TensorBoard write.)")

    if args.json is not None:
        _report.write_json(
            args.json,
            {"command": command, "machine": info, "tight_loop_us": tight, "calls": result},
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Step time of a small conv net under Trainer(compile=...): eager vs torch.compile.

Each variant is a separate ``fit`` of the same net on the same random images: eager
(``compile=False``) and compiled (``compile=True``, torch's default inductor backend).
A callback times each step (``on_train_batch_start`` to ``on_train_batch_end``:
forward, backward, optimizer step; not data loading). The compiled fit's first step
includes compiling the forward and its backward: that is the compile time. A fit's
steady-state step time is the median after the warm-up steps; the ratio is compiled
over eager, from the same run. Variants alternate for ``--repeats`` rounds, on CPU
and, when CUDA is available, on the GPU. No target: it measures. In the first round
the compiled run's weights are checked against the eager run's (same steps, same
data), and a difference raises.

Run from the repository root::

    PYTHONPATH=. python benchmarks/compile.py [--steps 30] [--repeats 3] [--threads N]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
from pathlib import Path
from typing import Any

import _report  # benchmarks/_report.py, beside this script
import torch
from _conv import BATCH_SIZE, CLASSES, LR, SEED, WARMUP_STEPS, Batch, ConvModule, StepTimer
from torch.utils.data import DataLoader, TensorDataset

import trainkit

VARIANTS = {"eager": False, "compiled": True}


def run_fit(
    variant: str, device: str, loader: DataLoader[Batch], steps: int
) -> tuple[float, float, dict[str, torch.Tensor]]:
    """One fit: (first step's time, median step time after warm-up, final weights)."""
    torch._dynamo.reset()  # every compiled fit compiles from scratch (its first step)
    module = ConvModule()
    timer = StepTimer(device)
    with tempfile.TemporaryDirectory(prefix="trainkit-compile-") as root:
        trainer = trainkit.Trainer(
            max_steps=WARMUP_STEPS + steps, accelerator=device, compile=VARIANTS[variant],
            callbacks=[timer], logger=False, enable_progress_bar=False,
            enable_model_summary=False, enable_checkpointing=False, default_root_dir=root,
        )  # fmt: skip
        gc.collect()
        trainer.fit(module, loader)
    if len(timer.durations) != WARMUP_STEPS + steps:
        raise AssertionError(f"{len(timer.durations)} steps timed, expected {WARMUP_STEPS + steps}")
    weights = {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}
    return timer.durations[0], statistics.median(timer.durations[WARMUP_STEPS:]), weights


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="timed steps per fit (default 30)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.repeats < 1 or (args.threads is not None and args.threads < 1):
        parser.error("--steps, --repeats and --threads must be >= 1.")
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    cuda = torch.cuda.get_device_name() if torch.cuda.is_available() else "not available"
    info = _report.machine_info(cuda=cuda)
    command = _report.exact_command()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"command: {command}")
    for key, value in info.items():
        print(f"{key}: {value}")
    print(
        f"workload: conv net 3->32->64->128 (BN, ReLU, maxpool) -> linear {CLASSES}, random "
        f"3x32x32 images, batch {BATCH_SIZE}, SGD lr {LR} momentum 0.9, {WARMUP_STEPS} "
        f"warm-up + {args.steps} timed steps per fit, {args.repeats} rounds; compiled: "
        "Trainer(compile=True) (inductor)"
    )
    print()

    generator = torch.Generator().manual_seed(SEED)
    samples = (WARMUP_STEPS + args.steps) * BATCH_SIZE
    images = torch.randn(samples, 3, 32, 32, generator=generator)
    labels = torch.randint(0, CLASSES, (samples,), generator=generator)
    loader = DataLoader(TensorDataset(images, labels), batch_size=BATCH_SIZE)

    steps: dict[str, dict[str, list[float]]] = {}
    firsts: dict[str, dict[str, list[float]]] = {}
    for device in devices:
        steps[device] = {v: [] for v in VARIANTS}
        firsts[device] = {v: [] for v in VARIANTS}
        for round_index in range(args.repeats):
            order = list(VARIANTS) if round_index % 2 == 0 else list(reversed(VARIANTS))
            weights = {}
            for variant in order:
                first, step, weights[variant] = run_fit(variant, device, loader, args.steps)
                firsts[device][variant].append(first)
                steps[device][variant].append(step)
            if round_index == 0:
                for key, value in weights["eager"].items():
                    # Compiled kernels reorder float sums: equal within float32 tolerance.
                    torch.testing.assert_close(
                        weights["compiled"][key], value, rtol=1e-3, atol=1e-3
                    )
                print(f"check ({device}, round 1): compiled weights equal eager weights")

    results: dict[str, Any] = {}
    print()
    print(f"{'device':<6} {'variant':<9} {'first step':>11} {'median step':>12} {'ratio':>7}")
    for device in devices:
        eager = statistics.median(steps[device]["eager"])
        for variant in VARIANTS:
            median = statistics.median(steps[device][variant])
            first = statistics.median(firsts[device][variant])
            ratio = median / eager
            print(f"{device:<6} {variant:<9} {first:>10.2f}s {median * 1e3:>10.2f}ms {ratio:>7.2f}")
            results[f"{device}/{variant}"] = {
                "first_step_s": first, "median_step_s": median, "ratio_to_eager": ratio,
            }  # fmt: skip
        compile_s = statistics.median(firsts[device]["compiled"]) - eager
        print(f"{device}: compile time (compiled first step minus an eager step) {compile_s:.1f}s")
        results[f"{device}/compile_time_s"] = compile_s
    if args.json is not None:
        _report.write_json(args.json, {"command": command, "machine": info, "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

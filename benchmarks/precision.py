"""Step time of a small conv net under Trainer(precision=...): 32-true vs mixed precision.

Each precision is a separate ``fit`` of the same net on the same random images. A
callback times each step (``on_train_batch_start`` to ``on_train_batch_end``: forward,
backward, optimizer step; not data loading); a fit's step time is the median after
the warm-up steps. Precisions alternate for ``--repeats`` rounds: on CPU "32-true"
and "bf16-mixed"; with CUDA also "32-true", "16-mixed", "bf16-mixed" on the GPU.
No target: it measures. In the first round a forward hook checks that the first
conv runs in the precision's dtype, and raises if not.

Run from the repository root::

    PYTHONPATH=. python benchmarks/precision.py [--steps 30] [--repeats 3] [--threads N]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import _report  # benchmarks/_report.py, beside this script
import torch
from _conv import BATCH_SIZE, CLASSES, LR, SEED, WARMUP_STEPS, Batch, ConvModule, StepTimer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit

# The dtype the first conv's output must have under each precision.
CONV_DTYPE = {"32-true": torch.float32, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}
DEVICE_PRECISIONS = {
    "cpu": ("32-true", "bf16-mixed"),
    "cuda": ("32-true", "16-mixed", "bf16-mixed"),
}


def run_fit(
    precision: str, device: str, loader: DataLoader[Batch], steps: int, check: bool
) -> float:
    """One fit; returns the median step time after the warm-up steps."""
    module = ConvModule()
    timer = StepTimer(device)
    seen: list[torch.dtype] = []
    if check:
        # Removes itself after the first call, so only one forward pays for it.
        def record(conv: nn.Module, inputs: Any, output: torch.Tensor) -> None:
            seen.append(output.dtype)
            handle.remove()

        handle = module.network[0].register_forward_hook(record)
    with tempfile.TemporaryDirectory(prefix="trainkit-precision-") as root:
        trainer = trainkit.Trainer(
            max_steps=WARMUP_STEPS + steps, accelerator=device, precision=precision,
            callbacks=[timer], logger=False, enable_progress_bar=False,
            enable_model_summary=False, enable_checkpointing=False, default_root_dir=root,
        )  # fmt: skip
        gc.collect()  # not during the fit: one fit must not pay for another's garbage
        trainer.fit(module, loader)
    if check and seen != [CONV_DTYPE[precision]]:
        # Timing a precision that is not in effect would report a lie.
        raise AssertionError(
            f"{device} {precision}: first conv output dtypes {seen}, expected "
            f"[{CONV_DTYPE[precision]}]; the precision is not active in training_step."
        )
    if len(timer.durations) != WARMUP_STEPS + steps:
        raise AssertionError(f"{len(timer.durations)} steps timed, expected {WARMUP_STEPS + steps}")
    return statistics.median(timer.durations[WARMUP_STEPS:])


def machine_info() -> dict[str, Any]:
    # Whether the CPU has native bf16 units decides whether bf16-mixed can win there.
    cpuinfo = Path("/proc/cpuinfo")
    words = set(cpuinfo.read_text().split()) if cpuinfo.exists() else set()
    wanted = ("avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16")
    cuda = torch.cuda.get_device_name() if torch.cuda.is_available() else "not available"
    return _report.machine_info(
        **{"cpu_flags (bf16-related)": " ".join(f for f in wanted if f in words) or "none"},
        cuda=cuda,
    )


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

    info = machine_info()  # after set_num_threads: torch_threads is the count used
    config = dict(batch=BATCH_SIZE, warmup=WARMUP_STEPS, steps=args.steps, repeats=args.repeats)
    command = _report.exact_command()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"command: {command}")
    for key, value in info.items():
        print(f"{key}: {value}")
    print(
        f"workload: conv net 3->32->64->128 (BN, ReLU, maxpool) -> linear {CLASSES}, "
        f"random 3x32x32 images, batch {BATCH_SIZE}, SGD lr {LR} momentum 0.9, "
        f"{WARMUP_STEPS} warm-up + {args.steps} timed steps per fit, {args.repeats} rounds"
    )
    print()

    generator = torch.Generator().manual_seed(SEED)
    samples = (WARMUP_STEPS + args.steps) * BATCH_SIZE
    images = torch.randn(samples, 3, 32, 32, generator=generator)
    labels = torch.randint(0, CLASSES, (samples,), generator=generator)
    loader = DataLoader(TensorDataset(images, labels), batch_size=BATCH_SIZE)

    times: dict[str, dict[str, list[float]]] = {}
    for device in devices:
        precisions = DEVICE_PRECISIONS[device]
        times[device] = {precision: [] for precision in precisions}
        for round_index in range(args.repeats):
            # Rotate the starting precision, so that none always runs first.
            shift = round_index % len(precisions)
            for precision in precisions[shift:] + precisions[:shift]:
                step_s = run_fit(precision, device, loader, args.steps, check=round_index == 0)
                times[device][precision].append(step_s)
        expected = ", ".join(f"{p}: {CONV_DTYPE[p]}" for p in precisions)
        print(f"check ({device}, round 1): first conv output dtype is right ({expected})")

    medians = {d: {p: statistics.median(t) for p, t in ts.items()} for d, ts in times.items()}
    ratios = {d: {p: m[p] / m["32-true"] for p in m if p != "32-true"} for d, m in medians.items()}
    print()
    print(f"{'device':<6} {'precision':<11} {'median step':>12} {'min':>10} {'max':>10}")
    for device, per_precision in times.items():
        for precision, samples_s in per_precision.items():
            print(
                f"{device:<6} {precision:<11} {medians[device][precision] * 1e3:>10.2f}ms "
                f"{min(samples_s) * 1e3:>8.2f}ms {max(samples_s) * 1e3:>8.2f}ms"
            )
    print()
    for device, device_ratios in ratios.items():
        for precision, ratio in device_ratios.items():
            print(f"{device} {precision}/32-true = {ratio:.3f} (< 1: faster than float32)")

    if args.json is not None:
        result = {
            "command": command,
            "machine": info,
            "config": config,
            "step_median_s_per_fit": times,
            "median_step_s": medians,
            "ratios_vs_32_true": ratios,
        }
        _report.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

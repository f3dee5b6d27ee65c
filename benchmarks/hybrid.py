"""Pipeline step time of the hybrid strategy's balanced stage split vs an even split.

The model is an ``nn.Sequential`` of layers with very uneven costs: cheap
Linear(256, 256) + ReLU layers and two heavy blocks side by side, so that an even
split (the same number of layers per stage) puts both heavy blocks in one stage.
The balanced split is what ``HybridStrategy(balance="time")`` chooses:
``balance_layers(layers, S, "time", sample)``.

On one CPU every stage shares the same cores: stages cannot overlap, both splits
do the same total work, and their step times are equal. What balancing changes is
the pipeline's critical path, so that is what is measured:

1. Modelled (always): each stage's forward+backward wall time on one micro-batch
   (the stage's layers run on the output of the stages before it; median over
   ``--repeats``), and from it the GPipe step time the split would have on S
   devices running at once, ``(m + S - 1) * max stage time`` for m micro-batches.
   The script prints both splits and balanced/even (lower is better).
2. Real, on S CUDA devices (when ``torch.cuda.device_count() >= S``): training steps
   (forward, MSE loss, backward, SGD step, synchronised) of ``PipelinedSequential``
   over ``cuda:0..S-1`` for both splits, balanced on ``cuda:0``; median step times
   and balanced/even. Skipped, with the reason printed, otherwise.
3. Sanity check on the CPU: the same real training steps with every stage on
   ``"cpu"``. Both splits must give the same loss at every step (raises if not);
   their step time ratio (about 1.0: same device, no overlap possible) is printed.

Run from the repository root::

    PYTHONPATH=. python benchmarks/hybrid.py [--repeats 20] [--stages 4] [--micro-batches 4]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import gc
import itertools
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _report  # benchmarks/_report.py, beside this script
import torch
import torch.nn.functional as F
from torch import nn

from trainkit.pipelining.balance import balance_layers
from trainkit.pipelining.pipe import PipelinedSequential

SEED = 0
BATCH_SIZE = 256
WIDTH = 256
WIDE_HIDDEN = 2048  # the wide block: about 16 cheap layers' worth of multiply-adds
REPEATS_IN_BLOCK = 20  # the repeated block: 20 cheap layers' worth
CHEAP_BEFORE, CHEAP_AFTER = 4, 6  # cheap layers before / after the two heavy blocks
WARMUP = 3  # untimed runs before each timed series
LR = 0.01


# ------------------------------------------------------------------ the model
class Repeated(nn.Module):
    """One Linear(width, width) applied ``times`` times: ``times`` cheap layers' work in one."""

    def __init__(self, width: int, times: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)
        # Orthogonal weights keep the activations' size over the repeats, so the
        # values neither blow up nor decay towards denormals (slow on some CPUs).
        nn.init.orthogonal_(self.linear.weight)
        self.times = times

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.times):
            x = self.linear(x)
        return x


def cheap() -> nn.Sequential:
    return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU())


def build_layers() -> nn.Sequential:
    """The uneven model, initialised from ``SEED``: cheap, 2 heavy blocks, cheap."""
    torch.manual_seed(SEED)
    wide = nn.Sequential(nn.Linear(WIDTH, WIDE_HIDDEN), nn.ReLU(), nn.Linear(WIDE_HIDDEN, WIDTH))
    return nn.Sequential(
        *[cheap() for _ in range(CHEAP_BEFORE)],
        Repeated(WIDTH, REPEATS_IN_BLOCK),
        wide,
        *[cheap() for _ in range(CHEAP_AFTER)],
    )


def even_sizes(layer_count: int, stages: int) -> tuple[int, ...]:
    """The same number of layers per stage (the first stages take one more if uneven)."""
    base, extra = divmod(layer_count, stages)
    return tuple(base + (stage < extra) for stage in range(stages))


def stage_bounds(sizes: Sequence[int]) -> list[tuple[int, int]]:
    """``[start, stop)`` layer indices of each stage."""
    stops = list(itertools.accumulate(sizes))
    return list(zip([0, *stops[:-1]], stops, strict=True))


def synchronize(device: torch.device) -> None:
    # CUDA kernels run asynchronously: without a sync the clock would stop when
    # the work is queued, not when it is done.
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ------------------------------------------------------- 1. modelled critical path
def stage_inputs(
    layers: nn.Sequential, sizes: Sequence[int], sample: torch.Tensor
) -> list[torch.Tensor]:
    """The micro-batch each stage receives: ``sample`` run through the stages before it."""
    inputs = []
    with torch.no_grad():
        x = sample
        for start, stop in stage_bounds(sizes):
            inputs.append(x)
            for layer in layers[start:stop]:
                x = layer(x)
    return inputs


def stage_forward_backward(stage_layers: nn.Sequential, x: torch.Tensor, first: bool) -> None:
    """One micro-batch's forward and backward through one stage, as the pipeline runs it.

    The first stage's input is data (no gradient); later stages also send the
    gradient of their input back. ``autograd.grad`` writes no ``.grad``.
    """
    x = x.detach().requires_grad_(not first)
    output = stage_layers(x)
    wrt = [*([] if first else [x]), *stage_layers.parameters()]
    upstream = torch.ones_like(output)
    torch.autograd.grad(output, wrt, grad_outputs=upstream)


def measure_stage_times(
    layers: nn.Sequential,
    splits: dict[str, tuple[int, ...]],
    sample: torch.Tensor,
    repeats: int,
) -> dict[str, list[float]]:
    """Median forward+backward seconds of each stage of each split, on one micro-batch."""
    runs: dict[str, list[list[float]]] = {
        name: [[] for _ in sizes] for name, sizes in splits.items()
    }
    stages = {
        name: [layers[start:stop] for start, stop in stage_bounds(sizes)]
        for name, sizes in splits.items()
    }
    inputs = {name: stage_inputs(layers, sizes, sample) for name, sizes in splits.items()}
    names = list(splits)
    for round_index in range(WARMUP + repeats):
        # Rotate the starting split, so that neither always runs first.
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            for stage, (stage_layers, x) in enumerate(zip(stages[name], inputs[name], strict=True)):
                synchronize(sample.device)
                start = time.perf_counter()
                stage_forward_backward(stage_layers, x, first=stage == 0)
                synchronize(sample.device)
                if round_index >= WARMUP:
                    runs[name][stage].append(time.perf_counter() - start)
    return {name: [statistics.median(r) for r in per_stage] for name, per_stage in runs.items()}


def gpipe_step_time(stage_times: Sequence[float], micro_batches: int) -> float:
    """GPipe's step time on concurrent devices: m + S - 1 ticks of the slowest stage."""
    return (micro_batches + len(stage_times) - 1) * max(stage_times)


# ----------------------------------------------------------- 2./3. real steps
def time_real_steps(
    splits: dict[str, tuple[int, ...]],
    devices: Sequence[torch.device],
    micro_batches: int,
    repeats: int,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Step times and losses of real training steps of ``PipelinedSequential``, per split.

    Each split trains its own copy of the same initial model on the same batches,
    so the losses must agree step by step.
    """
    generator = torch.Generator().manual_seed(SEED + 1)
    batches = [
        (
            torch.randn(BATCH_SIZE, WIDTH, generator=generator),
            torch.randn(BATCH_SIZE, WIDTH, generator=generator),
        )
        for _ in range(WARMUP + repeats)
    ]
    template = build_layers()
    models = {
        name: PipelinedSequential(copy.deepcopy(template), sizes, devices, micro_batches)
        for name, sizes in splits.items()
    }
    optimizers = {
        name: torch.optim.SGD(model.parameters(), lr=LR) for name, model in models.items()
    }
    times: dict[str, list[float]] = {name: [] for name in splits}
    losses: dict[str, list[float]] = {name: [] for name in splits}
    first, last = devices[0], devices[-1]
    names = list(splits)
    for step, (x, y) in enumerate(batches):
        x, y = x.to(first), y.to(last)
        shift = step % len(names)
        for name in names[shift:] + names[:shift]:
            model, optimizer = models[name], optimizers[name]
            gc.collect()  # not during the step: one split must not pay for the other's garbage
            for device in set(devices):
                synchronize(device)
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            loss = F.mse_loss(model(x), y)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            for device in set(devices):
                synchronize(device)
            elapsed = time.perf_counter() - start
            losses[name].append(loss.item())
            if step >= WARMUP:
                times[name].append(elapsed)
    return times, losses


def check_same_losses(losses: dict[str, list[float]], where: str) -> None:
    """Raise if the splits' losses differ: a split changes where layers run, not the math."""
    balanced, even = torch.tensor(losses["balanced"]), torch.tensor(losses["even"])
    if not (balanced.isfinite().all() and even.isfinite().all()):
        raise AssertionError(f"{where}: a loss is not finite; the benchmark's training diverged.")
    if not torch.allclose(balanced, even, rtol=1e-5, atol=0.0):
        step = int((balanced - even).abs().argmax())
        raise AssertionError(
            f"{where}: the balanced and even splits give different losses at step {step} "
            f"({balanced[step].item():.8g} vs {even[step].item():.8g}); the pipeline's "
            "result depends on the split."
        )


# ---------------------------------------------------------------- reporting
def print_stage_table(
    stage_times: dict[str, list[float]], splits: dict[str, tuple[int, ...]]
) -> None:
    print(f"{'split':<9} {'sizes':<16} stage forward+backward per micro-batch (median)")
    for name, times in stage_times.items():
        bottleneck = max(range(len(times)), key=times.__getitem__)
        cells = " ".join(
            f"{t * 1e3:7.2f}ms{'*' if stage == bottleneck else ' '}"
            for stage, t in enumerate(times)
        )
        print(f"{name:<9} {list(splits[name])!s:<16} {cells}")
    print("(* = bottleneck stage)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="timed rounds (default 20)")
    parser.add_argument("--stages", type=int, default=4, help="pipeline stages (default 4)")
    parser.add_argument(
        "--micro-batches", type=int, default=4, help="micro-batches per batch (default 4)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)
    layer_count = len(build_layers())
    if args.repeats < 1 or args.micro_batches < 1 or not 2 <= args.stages <= layer_count:
        parser.error(
            f"--repeats and --micro-batches must be >= 1, --stages between 2 and {layer_count}."
        )
    stages, micro_batches = args.stages, args.micro_batches

    # One thread: less noise. Every stage then also runs on the same single core,
    # which is the situation the modelled critical path below corrects for.
    torch.set_num_threads(1)
    info = _report.machine_info(cuda_devices=torch.cuda.device_count())
    command = _report.exact_command()
    print(f"command: {command}")
    for key, value in info.items():
        print(f"{key}: {value}")
    print("torch threads set to 1 for timing stability")
    print(
        f"workload: {layer_count} layers of width {WIDTH}: {CHEAP_BEFORE} x [Linear+ReLU], "
        f"[Linear applied {REPEATS_IN_BLOCK}x], [Linear {WIDTH}->{WIDE_HIDDEN}, ReLU, Linear "
        f"{WIDE_HIDDEN}->{WIDTH}], {CHEAP_AFTER} x [Linear+ReLU]; batch {BATCH_SIZE}, "
        f"{stages} stages, {micro_batches} micro-batches, MSE loss, SGD lr {LR}; "
        f"{WARMUP} warm-up + {args.repeats} timed rounds"
    )
    print()

    # The sample is one micro-batch: what each stage processes per pipeline tick.
    generator = torch.Generator().manual_seed(SEED)
    batch = torch.randn(BATCH_SIZE, WIDTH, generator=generator)
    sample = torch.tensor_split(batch, micro_batches)[0]
    layers = build_layers()
    balanced = balance_layers(list(layers), stages, "time", sample)
    even = balance_layers(list(layers), stages, list(even_sizes(layer_count, stages)))
    splits = {"balanced": balanced.sizes, "even": even.sizes}
    print("balanced split (balance_layers(..., 'time', one micro-batch)):")
    print(balanced.describe())
    print("even split (same number of layers per stage; costs here are layer counts):")
    print(even.describe())
    print()

    # 1. The critical path on S concurrent devices, from measured stage times.
    stage_times = measure_stage_times(layers, splits, sample, args.repeats)
    modelled = {name: gpipe_step_time(t, micro_batches) for name, t in stage_times.items()}
    one_device = {name: micro_batches * sum(t) for name, t in stage_times.items()}
    modelled_ratio = modelled["balanced"] / modelled["even"]
    print("1. modelled: GPipe step time on concurrent devices, from measured CPU stage times")
    print_stage_table(stage_times, splits)
    ticks = micro_batches + stages - 1
    for name in splits:
        print(
            f"{name:<9} ({micro_batches} + {stages} - 1) x {max(stage_times[name]) * 1e3:.2f}ms "
            f"= {modelled[name] * 1e3:7.2f}ms per step   [one device, no pipeline: "
            f"{micro_batches} x sum = {one_device[name] * 1e3:.2f}ms]"
        )
    print(
        f"modelled balanced/even = {modelled_ratio:.3f} (lower is better; {ticks} ticks of the "
        "slowest stage each)"
    )
    print()

    # 2. Real steps on S GPUs, where the stages do run at the same time.
    real_gpu: dict[str, Any]
    print(f"2. real steps on {stages} CUDA devices")
    if torch.cuda.device_count() >= stages:
        devices = [torch.device("cuda", index) for index in range(stages)]
        # Balanced where it runs: layer times on a GPU are not those on the CPU.
        gpu_layers = build_layers().to(devices[0])
        gpu_balanced = balance_layers(list(gpu_layers), stages, "time", sample.to(devices[0]))
        gpu_splits = {"balanced": gpu_balanced.sizes, "even": even.sizes}
        print(f"balanced on {devices[0]}:")
        print(gpu_balanced.describe())
        gpu_times, gpu_losses = time_real_steps(gpu_splits, devices, micro_batches, args.repeats)
        check_same_losses(gpu_losses, "cuda")
        gpu_medians = {name: statistics.median(t) for name, t in gpu_times.items()}
        gpu_ratio = gpu_medians["balanced"] / gpu_medians["even"]
        for name, median in gpu_medians.items():
            print(f"{name:<9} {list(gpu_splits[name])!s:<16} median step {median * 1e3:8.2f}ms")
        print(f"measured balanced/even on {stages} GPUs = {gpu_ratio:.3f} (lower is better)")
        real_gpu = {
            "devices": [str(d) for d in devices],
            "partition": {"sizes": gpu_balanced.sizes, "costs": gpu_balanced.costs},
            "sizes": gpu_splits,
            "step_times_s": gpu_times,
            "median_step_s": gpu_medians,
            "ratio": gpu_ratio,
        }
    else:
        reason = (
            f"skipped: needs {stages} CUDA devices (one per stage) for the stages to run at "
            f"the same time; found {torch.cuda.device_count()}"
        )
        print(reason)
        real_gpu = {"skipped": reason}
    print()

    # 3. Sanity check: real steps with every stage on the CPU.
    cpu_devices = [torch.device("cpu")] * stages
    cpu_times, cpu_losses = time_real_steps(splits, cpu_devices, micro_batches, args.repeats)
    check_same_losses(cpu_losses, "cpu")
    cpu_medians = {name: statistics.median(t) for name, t in cpu_times.items()}
    cpu_ratio = cpu_medians["balanced"] / cpu_medians["even"]
    print('3. real steps, all stages on "cpu" (same device, no overlap possible)')
    for name, median in cpu_medians.items():
        samples_s = cpu_times[name]
        print(
            f"{name:<9} {list(splits[name])!s:<16} median step {median * 1e3:8.2f}ms "
            f"(min {min(samples_s) * 1e3:.2f}ms, max {max(samples_s) * 1e3:.2f}ms)"
        )
    print(
        f"check: both splits give the same loss at all {WARMUP + args.repeats} steps "
        "(allclose, rtol 1e-5)"
    )
    print(
        f"same-device balanced/even = {cpu_ratio:.3f} (expected about 1.0: the same work on "
        "the same cores; not a measure of balancing)"
    )

    if args.json is not None:
        result = {
            "command": command,
            "machine": info,
            "config": {
                "layers": layer_count,
                "batch_size": BATCH_SIZE,
                "stages": stages,
                "micro_batches": micro_batches,
                "repeats": args.repeats,
                "warmup": WARMUP,
                "torch_threads": 1,
            },
            "partitions": {
                "balanced": {"sizes": balanced.sizes, "costs": balanced.costs, "unit": "s"},
                "even": {"sizes": even.sizes},
            },
            "modelled": {
                "stage_times_s": stage_times,
                "gpipe_step_s": modelled,
                "one_device_step_s": one_device,
                "ratio": modelled_ratio,
            },
            "real_gpu": real_gpu,
            "real_cpu_same_device": {
                "step_times_s": cpu_times,
                "median_step_s": cpu_medians,
                "ratio": cpu_ratio,
                "losses": cpu_losses,
            },
        }
        _report.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

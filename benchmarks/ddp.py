"""DDP overhead: trainkit's Trainer(strategy="ddp") against a hand-written DDP loop.

Two gloo processes on CPU (one torch thread each) train one epoch of

- ``mlp``: the tiny MLP of overhead.py (32->64->10, SGD lr 0.1, per-rank batch 64,
  20,000 random samples), where any per-step framework work shows;
- ``cnn``: a small conv net (Conv 1->16, Conv 16->32, Linear 1568->10 on random
  1x28x28 images, 6,000 samples, per-rank batch 64),

two ways: ``raw`` (init_process_group("gloo", "env://"), DistributedDataParallel,
a DistributedSampler with set_epoch, zero_grad/backward/step) and ``trainkit``
(``Trainer(strategy="ddp", accelerator="cpu", devices=2, seed=0)``, logger,
progress bar, summary and checkpointing off).

Both variants run in the same processes: each model gets two fresh
``torch.distributed.run`` launches of this script in ``--worker`` mode, one
starting with ``raw`` and one with ``trainkit``. A launch runs an untimed first
round (its parameters are compared across the variants; its first variant gives
that variant's start-up time), then ``--repeats`` timed rounds alternating which
variant goes first. Timing both variants in the same processes reduces the
launch-to-launch differences (core placement, the agent's activity), which on a
2-core machine are larger than the difference measured.

Run from the repository root::

    PYTHONPATH=. python benchmarks/ddp.py [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import time

# Taken before any import, for startup_s (process start -> first training step).
PROCESS_START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

SEED = 0
BATCH_SIZE = 64  # per rank
LR = 0.1
WORLD_SIZE = 2
VARIANTS = ("raw", "trainkit")
MODELS = ("mlp", "cnn")
SAMPLES = {"mlp": 20_000, "cnn": 6_000}
# Largest acceptable median(trainkit) / median(raw), per model.
TARGET = 1.05
REPO_ROOT = Path(__file__).resolve().parent.parent

Batch = tuple[torch.Tensor, ...]


# ------------------------------------------------------------ models and data
def build_network(model: str) -> nn.Sequential:
    """The network both variants train, initialised from ``SEED``."""
    torch.manual_seed(SEED)
    if model == "mlp":
        return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 10),
    )


def build_dataset(model: str) -> TensorDataset:
    """The same random samples on every rank and in every variant."""
    generator = torch.Generator().manual_seed(SEED)
    samples = SAMPLES[model]
    shape = (samples, 32) if model == "mlp" else (samples, 1, 28, 28)
    x = torch.randn(*shape, generator=generator)
    y = torch.randint(0, 10, (samples,), generator=generator)
    return TensorDataset(x, y)


# -------------------------------------------------------------------- workers
def run_raw(model: str) -> tuple[float, float, nn.Module]:
    """A hand-written DDP epoch; returns (epoch_s, startup_s, network)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DistributedSampler

    if not dist.is_initialized():  # the first variant of a launch sets the group up
        dist.init_process_group(backend="gloo", init_method="env://")
    dataset = build_dataset(model)
    network = build_network(model)
    ddp = DistributedDataParallel(network)
    sampler = DistributedSampler(
        dataset,
        num_replicas=dist.get_world_size(),
        rank=dist.get_rank(),
        shuffle=True,
        seed=SEED,
    )
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=LR)
    ddp.train()
    dist.barrier()
    start = time.perf_counter()
    sampler.set_epoch(0)
    startup = time.perf_counter() - PROCESS_START
    for x, y in loader:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
    dist.barrier()
    elapsed = time.perf_counter() - start
    return elapsed, startup, network


def run_trainkit(model: str) -> tuple[float, float, nn.Module]:
    """The same epoch through trainkit; returns (epoch_s, startup_s, network)."""
    import torch.distributed as dist

    import trainkit

    class Network(trainkit.Module):
        def __init__(self, network: nn.Sequential) -> None:
            super().__init__()
            self.network = network  # built outside: the raw variant's exact weights

        def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
            x, y = batch
            return F.cross_entropy(self.network(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=LR)

    class Clock(trainkit.Callback):
        """Starts the epoch clock after a barrier; notes the first step's time."""

        start = 0.0
        startup: float | None = None

        def on_train_epoch_start(self, trainer: Any, module: Any) -> None:
            dist.barrier()
            self.start = time.perf_counter()

        def on_train_batch_start(self, trainer: Any, module: Any, batch: Any, idx: int) -> None:
            if self.startup is None:
                self.startup = time.perf_counter() - PROCESS_START

    clock = Clock()
    dataset = build_dataset(model)
    network = build_network(model)
    module = Network(network)
    trainer = trainkit.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=WORLD_SIZE,
        max_epochs=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        seed=SEED,
        callbacks=[clock],
    )
    trainer.fit(module, DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True))
    dist.barrier()
    elapsed = time.perf_counter() - clock.start
    assert clock.startup is not None, "no training step ran"
    return elapsed, clock.startup, network


def worker(args: argparse.Namespace) -> int:
    """One launch: an untimed round, then ``args.rounds`` timed ones, both variants each."""
    torch.set_num_threads(1)
    runners = {"raw": run_raw, "trainkit": run_trainkit}
    first = args.first
    other = VARIANTS[1] if first == VARIANTS[0] else VARIANTS[0]
    epoch: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    startup_s = 0.0
    rank = int(os.environ["RANK"])
    for round_index in range(args.rounds + 1):
        order = (first, other) if round_index % 2 == 0 else (other, first)
        for variant in order:
            epoch_s, started_s, network = runners[variant](args.model)
            if round_index == 0:
                if variant == first:
                    startup_s = started_s  # only the launch's first variant started cold
                if rank == 0:
                    torch.save(network.state_dict(), args.params / f"{variant}.pt")
            else:
                epoch[variant].append(epoch_s)
    if rank == 0:
        args.out.write_text(json.dumps({"epoch_s": epoch, "startup_s": startup_s}))
    # Timings are written: end here, without the interpreter's shutdown. A gloo
    # worker thread still releasing the last collective then can abort the
    # process (SIGABRT) and fail the launch although the epochs were measured.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# --------------------------------------------------------------- orchestrator
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def launch(first: str, model: str, rounds: int, scratch: Path) -> dict[str, Any]:
    """One torch.distributed.run launch of two workers; rank 0's timings and parameters."""
    out = scratch / f"{first}_{model}.json"
    params = scratch / f"{first}_{model}"
    params.mkdir()
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        str(WORLD_SIZE),
        "--master-port",
        str(free_port()),
        str(Path(__file__).resolve()),
        "--worker",
        "--first",
        first,
        "--model",
        model,
        "--rounds",
        str(rounds),
        "--out",
        str(out),
        "--params",
        str(params),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, cwd=scratch, capture_output=True, text=True)
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(
            f"{model} workers ({first} first) failed (exit {done.returncode}):\n"
            f"{done.stdout}\n{done.stderr}"
        )
    result: dict[str, Any] = json.loads(out.read_text())
    check_same_parameters(model, params / "raw.pt", params / "trainkit.pt")
    return result


def check_same_parameters(model: str, raw: Path, trainkit_: Path) -> None:
    """Raise unless both variants ended with the same parameters on rank 0."""
    expected = torch.load(raw, weights_only=True)
    got = torch.load(trainkit_, weights_only=True)
    if expected.keys() != got.keys():
        raise AssertionError(f"{model}: parameter names differ: {list(got)} vs {list(expected)}")
    for name, want in expected.items():
        if not torch.allclose(got[name], want, rtol=1e-6, atol=0.0):
            difference = (got[name] - want).abs().max().item()
            raise AssertionError(
                f"{model}: parameter {name} differs from the raw DDP loop's after one epoch "
                f"(max abs difference {difference:.3g}); trainkit does not train like it."
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeats", type=int, default=5, help="timed rounds per launch; 2 launches (default 5)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--first", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--model", choices=MODELS, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--params", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1.")

    import _report  # benchmarks/_report.py, beside this script

    info = _report.machine_info(world_size=f"{WORLD_SIZE} processes, gloo, 1 thread each")
    command = _report.exact_command()
    print(f"command: {command}")
    for key, value in info.items():
        print(f"{key}: {value}")
    for model in MODELS:
        steps = -(-SAMPLES[model] // (BATCH_SIZE * WORLD_SIZE))
        print(
            f"workload {model}: {SAMPLES[model]} samples, per-rank batch {BATCH_SIZE}, "
            f"{steps} steps per rank, SGD lr {LR}, 1 epoch, "
            f"2 launches x {args.repeats} timed rounds"
        )
    print()

    epoch: dict[str, dict[str, list[float]]] = {m: {v: [] for v in VARIANTS} for m in MODELS}
    startup: dict[str, dict[str, list[float]]] = {m: {v: [] for v in VARIANTS} for m in MODELS}
    with tempfile.TemporaryDirectory(prefix="trainkit-ddp-") as name:
        scratch = Path(name)
        for model in MODELS:
            for first in VARIANTS:
                result = launch(first, model, args.repeats, scratch)
                for variant in VARIANTS:
                    epoch[model][variant] += result["epoch_s"][variant]
                startup[model][first].append(result["startup_s"])
            print(f"{model}: both variants end the untimed round with the same parameters")

    median_epoch = {m: {v: statistics.median(t) for v, t in d.items()} for m, d in epoch.items()}
    median_start = {m: {v: statistics.median(t) for v, t in d.items()} for m, d in startup.items()}
    ratios = {m: median_epoch[m]["trainkit"] / median_epoch[m]["raw"] for m in MODELS}
    passed = {m: ratios[m] <= TARGET for m in MODELS}

    print()
    print(f"{'model':<5} {'variant':<9} {'epoch median':>13} {'min':>9} {'max':>9} {'startup':>9}")
    for model in MODELS:
        for variant in VARIANTS:
            samples = epoch[model][variant]
            print(
                f"{model:<5} {variant:<9} {median_epoch[model][variant] * 1e3:>11.1f}ms "
                f"{min(samples) * 1e3:>7.1f}ms {max(samples) * 1e3:>7.1f}ms "
                f"{median_start[model][variant]:>8.2f}s"
            )
    print()
    for model in MODELS:
        verdict = "PASS" if passed[model] else "MISS"
        startup_delta = median_start[model]["trainkit"] - median_start[model]["raw"]
        print(
            f"{model}: trainkit/raw = {ratios[model]:.3f} (target <= {TARGET:.2f}) {verdict}"
            f"  [startup {startup_delta:+.2f}s]"
        )

    if args.json is not None:
        result = {
            "command": command,
            "machine": info,
            "config": {
                "samples": SAMPLES,
                "batch_size_per_rank": BATCH_SIZE,
                "world_size": WORLD_SIZE,
                "repeats": args.repeats,
            },
            "epoch_s": epoch,
            "startup_s": startup,
            "median_epoch_s": median_epoch,
            "median_startup_s": median_start,
            "ratios": ratios,
            "target": TARGET,
            "passed": passed,
        }
        _report.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

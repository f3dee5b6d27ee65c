"""Overhead of trainkit's Trainer over a hand-written training loop.

Trains the same tiny MLP for one epoch three ways and compares wall times:

- ``raw``: a hand-written loop (optimizer construction + the loop are timed);
- ``bare``: a Trainer with logger, progress bar and model summary off, and a
  module that does not call ``self.log`` (Trainer construction + fit are timed);
- ``default``: a Trainer with every default (TensorBoard logger, progress bar,
  model summary), the module logging its loss to the progress bar every step.

With ``--lightning`` (Lightning installed), the same two Trainers under
Lightning run in the same rounds, for scale: ``lightning-bare`` and
``lightning-default``, built with the same options from Lightning's own API.

With ``--features``, what each part of the default costs: the default Trainer
with one of its parts off (``default-no-checkpoint``, ``default-no-logger``,
``default-no-bar``, ``default-no-summary``), the default Trainer writing to its
logger every step instead of every 50 (``default-log-every-step``), the bare
Trainer with the default variant's module, which calls ``self.log`` every step
(``bare-log``), and the bare variant's module driven by a hand-written loop
(``module-loop``: its ``configure_optimizers`` and ``training_step`` called
directly, no Trainer), which is what calling a Module's methods costs by
itself, the floor under any Trainer; all in the same rounds, for scale.

With ``--split``, each round also runs every variant on one batch: a one-batch
fit's extra time over the raw loop's one step is the variant's fixed cost
(Trainer construction, set-up, the end-of-epoch checkpoint, teardown), and the
rest of its extra time, spread over the other steps, its cost per step.

The model is tiny on purpose: its steps take tens of microseconds, so any
per-step work the framework adds shows up instead of disappearing behind the
math. That is promise 1 in DESIGN.md, and the targets below are its numbers.

Run from the repository root::

    PYTHONPATH=. python benchmarks/overhead.py [--repeats 15] [--samples 20000] [--json out.json]
    PYTHONPATH=. python benchmarks/overhead.py --lightning   # Lightning installed
    PYTHONPATH=. python benchmarks/overhead.py --features    # the default's parts, one at a time
    PYTHONPATH=. python benchmarks/overhead.py --split       # fixed cost apart from per-step cost
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import _report  # benchmarks/_report.py, beside this script
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit

SEED = 0
BATCH_SIZE = 64
LR = 0.1
IN_FEATURES = 32
HIDDEN = 64
CLASSES = 10
VARIANTS = ("raw", "bare", "default")
# Run with --lightning only: the same Trainers under Lightning, for scale (no target).
LIGHTNING_VARIANTS = ("lightning-bare", "lightning-default")
# Largest acceptable median(variant) / median(raw).
TARGETS = {"bare": 1.02, "default": 1.05}

Batch = tuple[torch.Tensor, ...]  # (inputs, targets)
# A timed run returns its wall time and the trained parameters (for the equality check).
RunResult = tuple[float, list[torch.Tensor]]


# ------------------------------------------------------------------ the model
def build_network() -> nn.Sequential:
    """The MLP every variant trains, initialised from ``SEED``."""
    torch.manual_seed(SEED)
    return nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))


class BareModule(trainkit.Module):
    """The MLP as a trainkit Module, without logging."""

    def __init__(self, network: nn.Sequential) -> None:
        super().__init__()
        # The network is built outside and passed in, so its initial weights are
        # exactly those of the raw variant, whatever Module.__init__ does.
        self.network = network

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self.network(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=LR)


class LoggingModule(BareModule):
    """The same module, logging its loss to the progress bar every step.

    Its step is written out rather than calling ``super().training_step``: as
    in the Lightning variants' module, the only difference from the bare step is
    the ``self.log`` call (a ``super()`` call and its frame cost ~3 us a step
    here, which no Trainer adds).
    """

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self.network(x), y)
        self.log("loss", loss, prog_bar=True)
        return loss


# ------------------------------------------------------------------- the data
def build_dataset(samples: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(SEED)
    x = torch.randn(samples, IN_FEATURES, generator=generator)
    y = torch.randint(0, CLASSES, (samples,), generator=generator)
    return TensorDataset(x, y)


def build_loader(dataset: TensorDataset) -> DataLoader[Batch]:
    # A private, freshly seeded generator gives every variant the same shuffle,
    # independent of how much of torch's global RNG anything else consumed.
    generator = torch.Generator().manual_seed(SEED)
    return DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True, generator=generator)


# --------------------------------------------------------------- the variants
@contextlib.contextmanager
def collected_garbage() -> Iterator[None]:
    # Collect before the clock starts, so that one run does not pay for the
    # garbage of the previous (possibly different) variant.
    gc.collect()
    yield


# The bare variants' Trainer options (trainkit's and Lightning's names are the same).
QUIET: dict[str, Any] = {
    "logger": False,
    "enable_progress_bar": False,
    "enable_model_summary": False,
    "enable_checkpointing": False,
}
# Run with --features only: the default Trainer with one part off, or logging every
# step (no targets).
FEATURE_OPTIONS: dict[str, dict[str, Any]] = {
    "default-no-checkpoint": {"enable_checkpointing": False},
    "default-no-logger": {"logger": False},
    "default-no-bar": {"enable_progress_bar": False},
    "default-no-summary": {"enable_model_summary": False},
    "default-log-every-step": {"log_every_n_steps": 1},
}
# Also with --features: the bare variant run with the default variant's module, and the
# bare variant's module driven by a hand-written loop.
FEATURE_VARIANTS = (*FEATURE_OPTIONS, "bare-log", "module-loop")


def time_silenced(fit: Callable[[], object]) -> float:
    """Seconds that ``fit()`` takes, with stdout and stderr sent to os.devnull.

    The default variants print (progress bar, model summary, Lightning's device
    summary): the terminal's drawing speed is not what is measured. stdout is then
    not a terminal, so the progress bar runs in its plain-line mode, as in a batch
    job: the tqdm drawing path is not timed here.
    """
    with (
        open(os.devnull, "w") as sink,
        contextlib.redirect_stdout(sink),
        contextlib.redirect_stderr(sink),
        collected_garbage(),
    ):
        start = time.perf_counter()
        fit()
        return time.perf_counter() - start


def run_raw(dataset: TensorDataset, root: Path) -> RunResult:
    del root  # the same signature as the other runners; the raw loop writes nothing
    network = build_network()
    loader = build_loader(dataset)
    with collected_garbage():
        start = time.perf_counter()
        optimizer = torch.optim.SGD(network.parameters(), lr=LR)
        for x, y in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(network(x), y)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
        elapsed = time.perf_counter() - start
    return elapsed, [p.detach().clone() for p in network.parameters()]


def run_module_loop(dataset: TensorDataset, root: Path) -> RunResult:
    """The bare variant's module, its methods called by a hand-written loop (no Trainer).

    The raw loop's work plus what calling a Module costs (the method calls, the
    submodule looked up through ``nn.Module.__getattr__``): the floor under any
    Trainer that runs the same module. Timed as ``raw`` is: the optimizer's
    construction (here ``configure_optimizers``) and the loop.
    """
    del root  # writes nothing
    module = BareModule(build_network())
    loader = build_loader(dataset)
    with collected_garbage():
        start = time.perf_counter()
        optimizer = module.configure_optimizers()
        for batch_idx, batch in enumerate(loader):
            optimizer.zero_grad(set_to_none=True)
            loss = module.training_step(batch, batch_idx)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
        elapsed = time.perf_counter() - start
    return elapsed, [p.detach().clone() for p in module.network.parameters()]


def run_bare(
    dataset: TensorDataset, root: Path, module_class: type[BareModule] = BareModule
) -> RunResult:
    """The bare variant; ``module_class=LoggingModule`` adds ``self.log`` every step."""
    module = module_class(build_network())
    loader = build_loader(dataset)
    with collected_garbage():
        start = time.perf_counter()
        # Nothing should be written; if something is, keep it out of the cwd.
        trainer = trainkit.Trainer(max_epochs=1, default_root_dir=root, **QUIET)
        trainer.fit(module, loader)
        elapsed = time.perf_counter() - start
    return elapsed, [p.detach().clone() for p in module.network.parameters()]


def run_default(dataset: TensorDataset, root: Path, **options: Any) -> RunResult:
    """The default variant; ``options`` (Trainer keywords) switch parts of it off."""
    module = LoggingModule(build_network())
    loader = build_loader(dataset)
    elapsed = time_silenced(
        lambda: trainkit.Trainer(max_epochs=1, default_root_dir=root, **options).fit(module, loader)
    )
    return elapsed, [p.detach().clone() for p in module.network.parameters()]


def _feature_runner(options: dict[str, Any]) -> Callable[[TensorDataset, Path], RunResult]:
    return lambda dataset, root: run_default(dataset, root, **options)


def _lightning_module(network: nn.Sequential, log: bool) -> Any:
    """The same module under Lightning (imported here: Lightning is optional)."""
    import lightning.pytorch as pl

    class LightningMLP(pl.LightningModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.network = network

        def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
            x, y = batch
            loss = F.cross_entropy(self.network(x), y)
            if log:
                self.log("loss", loss, prog_bar=True)
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=LR)

    return LightningMLP()


def _run_lightning(dataset: TensorDataset, root: Path, default: bool) -> RunResult:
    import lightning.pytorch as pl

    module = _lightning_module(build_network(), log=default)
    loader = build_loader(dataset)
    options = {} if default else QUIET
    elapsed = time_silenced(
        lambda: pl.Trainer(max_epochs=1, default_root_dir=root, **options).fit(module, loader)
    )
    return elapsed, [p.detach().clone() for p in module.network.parameters()]


def run_lightning_bare(dataset: TensorDataset, root: Path) -> RunResult:
    return _run_lightning(dataset, root, default=False)


def run_lightning_default(dataset: TensorDataset, root: Path) -> RunResult:
    return _run_lightning(dataset, root, default=True)


RUNNERS: dict[str, Callable[[TensorDataset, Path], RunResult]] = {
    "raw": run_raw,
    "bare": run_bare,
    "default": run_default,
    "lightning-bare": run_lightning_bare,
    "lightning-default": run_lightning_default,
    **{variant: _feature_runner(options) for variant, options in FEATURE_OPTIONS.items()},
    # Timed exactly as bare is, so that the difference is self.log every step.
    "bare-log": lambda dataset, root: run_bare(dataset, root, LoggingModule),
    "module-loop": run_module_loop,
}


def _silence_lightning() -> None:
    # Lightning logs its device summary through `logging` (not through stderr
    # alone) and warns about worker counts; neither belongs in the timings.
    import logging
    import warnings

    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"lightning(\..*)?$")


def check_same_parameters(results: dict[str, list[torch.Tensor]]) -> None:
    """Raise if any variant ended with parameters different from the raw loop's.

    Same seed, same batches, same math: the Trainer must reproduce the raw loop
    bit for bit. A difference means the framework changed the training itself
    (an extra step, a different zero_grad, a reordered batch...).
    """
    expected = results["raw"]
    for variant, parameters in results.items():
        if len(parameters) != len(expected):
            raise AssertionError(
                f"{variant}: {len(parameters)} parameter tensors, raw has {len(expected)}."
            )
        for index, (got, want) in enumerate(zip(parameters, expected, strict=True)):
            if not torch.equal(got, want):
                difference = (got - want).abs().max().item()
                raise AssertionError(
                    f"{variant}: parameter {index} differs from the raw loop's after one "
                    f"epoch (max abs difference {difference:.3g}); the Trainer does not "
                    "train exactly like the hand-written loop."
                )


def timed_rounds(
    variants: tuple[str, ...] | list[str],
    dataset: TensorDataset,
    rounds: int,
    one_batch: TensorDataset | None = None,
    check: bool = False,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each variant's wall times over ``rounds`` rounds, after one untimed warm-up run each.

    Args:
        variants: names in :data:`RUNNERS`.
        dataset: what each timed run trains on.
        rounds: how many times each variant is timed.
        one_batch: also time a run on this (one batch) after each run (``--split``).
        check: raise if the warm-up runs do not all end with the raw loop's parameters.

    Returns:
        The times of the runs on ``dataset``, and of those on ``one_batch`` (empty
        lists without it), by variant.
    """
    times: dict[str, list[float]] = {variant: [] for variant in variants}
    short_times: dict[str, list[float]] = {variant: [] for variant in variants}
    with tempfile.TemporaryDirectory(prefix="trainkit-overhead-") as scratch:
        run_index = 0

        def run(variant: str, data: TensorDataset = dataset) -> RunResult:
            nonlocal run_index
            # A fresh folder per run, made before the clock starts, so no run
            # scans or appends to the logs of earlier ones.
            root = Path(scratch) / f"run_{run_index}"
            root.mkdir()
            run_index += 1
            return RUNNERS[variant](data, root)

        # Warm-up, untimed: the first default run imports tensorboard and tqdm
        # (about a second), a once-per-process cost, not per-run overhead. The
        # warm-up is also where correctness is checked.
        warmed = {variant: run(variant)[1] for variant in variants}
        if check:
            check_same_parameters(warmed)

        # The imports above left a few hundred thousand objects for the garbage
        # collector to scan; a full collection (before every run, see
        # collected_garbage) would take ~0.2 s each. Freezing them exempts them
        # from collection, so what is collected is what the runs create.
        gc.collect()
        gc.freeze()
        try:
            for round_index in range(rounds):
                # Rotate the starting variant each round, so that no variant always
                # runs right after the same neighbour (caches, the logger's writer
                # thread finishing) and position effects average out.
                shift = round_index % len(variants)
                for variant in [*variants[shift:], *variants[:shift]]:
                    times[variant].append(run(variant)[0])
                    if one_batch is not None:
                        short_times[variant].append(run(variant, one_batch)[0])
        finally:
            gc.unfreeze()
    return times, short_times


# ---------------------------------------------------------------- reporting


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed rounds (default 15)")
    parser.add_argument(
        "--samples", type=int, default=20_000, help="training samples (default 20000)"
    )
    parser.add_argument(
        "--lightning",
        action="store_true",
        help="also run the bare and default Trainers under Lightning, for scale",
    )
    parser.add_argument(
        "--features",
        action="store_true",
        help="also run the default Trainer with each of its parts off, for scale",
    )
    parser.add_argument(
        "--split",
        action="store_true",
        help="also time one-batch fits, to report each variant's fixed and per-step cost",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.samples < BATCH_SIZE:
        parser.error(f"--repeats must be >= 1 and --samples >= {BATCH_SIZE}.")
    variants: tuple[str, ...] = VARIANTS
    if args.lightning:
        try:
            import lightning.pytorch  # noqa: F401
        except ImportError:
            parser.error("--lightning needs Lightning installed: pip install lightning")
        _silence_lightning()
        variants = VARIANTS + LIGHTNING_VARIANTS
    if args.features:
        variants = variants + FEATURE_VARIANTS

    # One thread: less noise, and bit-identical results across variants.
    torch.set_num_threads(1)
    info = _report.machine_info()
    command = _report.exact_command()
    steps = -(-args.samples // BATCH_SIZE)
    print(f"command: {command}")
    for key, value in info.items():
        print(f"{key}: {value}")
    print(
        f"workload: MLP {IN_FEATURES}->{HIDDEN}->{CLASSES}, SGD lr {LR}, batch {BATCH_SIZE}, "
        f"{args.samples} samples ({steps} steps), 1 epoch, {args.repeats} rounds"
    )
    print()

    dataset = build_dataset(args.samples)
    one_batch = build_dataset(BATCH_SIZE) if args.split else None
    times, short_times = timed_rounds(variants, dataset, args.repeats, one_batch, check=True)
    print("warm-up: all variants end with identical parameters (torch.equal)")

    medians = {variant: statistics.median(samples) for variant, samples in times.items()}
    compared = [variant for variant in variants if variant != "raw"]
    ratios = {variant: medians[variant] / medians["raw"] for variant in compared}
    # On a shared VM noise only ever adds time, so the ratio of the fastest runs is
    # printed beside the ratio of medians (the verdict uses the medians).
    minimums = {variant: min(samples) for variant, samples in times.items()}
    min_ratios = {variant: minimums[variant] / minimums["raw"] for variant in compared}
    # Each round runs every variant within a second: the ratio to the same round's raw
    # run cancels the VM's slower drifts in speed, which move all three together.
    paired = {
        variant: statistics.median(
            time_s / raw_s for time_s, raw_s in zip(times[variant], times["raw"], strict=True)
        )
        for variant in compared
    }
    passed = {variant: ratios[variant] <= target for variant, target in TARGETS.items()}

    print()
    width = max(len(variant) for variant in variants)
    print(f"{'variant':<{width}} {'median':>10} {'min':>10} {'max':>10} {'per step':>10}")
    for variant in variants:
        samples = times[variant]
        per_step_us = medians[variant] / steps * 1e6
        print(
            f"{variant:<{width}} {medians[variant] * 1e3:>8.1f}ms {min(samples) * 1e3:>8.1f}ms "
            f"{max(samples) * 1e3:>8.1f}ms {per_step_us:>8.1f}us"
        )
    print()
    for variant in compared:
        extra_us = (medians[variant] - medians["raw"]) / steps * 1e6
        target = TARGETS.get(variant)
        verdict = (
            f"(target <= {target:.2f}) {'PASS' if passed[variant] else 'MISS'}"
            if target is not None
            else "(for scale)"
        )
        print(
            f"{variant}/raw = {ratios[variant]:.3f} {verdict}"
            f"  [{extra_us:+.1f}us per step; ratio of minimums {min_ratios[variant]:.3f}; "
            f"median of per-round ratios {paired[variant]:.3f}]"
        )

    split: dict[str, dict[str, float]] = {}
    if args.split:
        short = {variant: statistics.median(samples) for variant, samples in short_times.items()}
        print()
        print("fixed cost (a one-batch fit over the raw loop's one step) and cost per step:")
        for variant in compared:
            fixed = short[variant] - short["raw"]
            per_step = (medians[variant] - short[variant] - medians["raw"] + short["raw"]) / (
                steps - 1
            )
            split[variant] = {"fixed_ms": fixed * 1e3, "per_step_us": per_step * 1e6}
            print(
                f"{variant:<{width}} fixed {fixed * 1e3:+7.2f}ms "
                f"({fixed / medians['raw'] * 100:+5.1f}% of the raw run)   "
                f"per step {per_step * 1e6:+6.1f}us "
                f"({per_step * (steps - 1) / medians['raw'] * 100:+5.1f}%)"
            )

    if args.json is not None:
        result = {
            "command": command,
            "machine": info,
            "config": {
                "samples": args.samples,
                "batch_size": BATCH_SIZE,
                "steps": steps,
                "repeats": args.repeats,
                "lightning": args.lightning,
                "features": args.features,
                "split": args.split,
            },
            "times_s": times,
            "median_s": medians,
            "ratios": ratios,
            "min_ratios": min_ratios,
            "paired_ratios": paired,
            "targets": TARGETS,
            "passed": passed,
            "split": split,
            "one_batch_times_s": short_times if args.split else {},
        }
        _report.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

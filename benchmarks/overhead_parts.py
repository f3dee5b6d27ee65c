"""Where a Trainer's per-step overhead goes: the default Trainer with one part off at a time.

Trains a ``Linear(8, 2)`` on pre-collated batches (a list, so that no DataLoader
time or noise is in the way) with a hand-written loop and with Trainers that
differ by one part: the bare Trainer, the bare one without the NaN check, and
the default Trainer (TensorBoard logger, progress bar, checkpointing, a module
calling ``self.log`` every step) with each of those parts switched off in turn.
The variants alternate within each round; the minimum over rounds is reported,
since noise only ever adds time. Each figure is the variant's extra time per
step over the raw loop, set-up included (Trainer construction, fit's set-up,
the end-of-epoch checkpoint), spread over the steps.

Run from the repository root::

    PYTHONPATH=. python benchmarks/overhead_parts.py [--steps 2000] [--repeats 9] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _report  # benchmarks/_report.py, beside this script
import torch
import torch.nn.functional as F

import trainkit
from trainkit.callbacks.slots import StepSlots

Batch = tuple[torch.Tensor, torch.Tensor]


class Net(trainkit.Module):
    """A ``Linear(8, 2)``, optionally logging its loss to the progress bar every step."""

    def __init__(self, log: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(8, 2)
        self.log_loss = log

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        loss = F.cross_entropy(self.layer(batch[0]), batch[1])
        if self.log_loss:
            self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class NoNaNCheck(trainkit.Callback):
    """Fills the step's non-finite slot with a part that does nothing."""

    vetoes_steps = False

    def configure_step(self, slots: StepSlots) -> None:
        slots.set_nonfinite(self)  # type: ignore[arg-type]

    def observe(self, loss: torch.Tensor, global_step: int) -> None:
        pass

    def allow_step(self, global_step: int) -> bool:
        return True

    def end_window(self) -> None:
        pass


QUIET = {"logger": False, "enable_progress_bar": False, "enable_checkpointing": False}
# Variant -> (Trainer options, whether the module logs every step).
VARIANTS: dict[str, tuple[dict[str, Any], bool]] = {
    "bare": (QUIET, False),
    "bare without the NaN check": ({**QUIET, "callbacks": "no-nan"}, False),
    "default": ({}, True),
    "default without self.log": ({}, False),
    "default without TensorBoard": ({"logger": False}, True),
    "default without checkpointing": ({"enable_checkpointing": False}, True),
    "default without the progress bar": ({"enable_progress_bar": False}, True),
}


def run_raw(batches: list[Batch]) -> float:
    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 2)
    start = time.perf_counter()
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    for x, y in batches:
        loss = F.cross_entropy(layer(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        optimizer.zero_grad()
    return time.perf_counter() - start


def run_trainer(name: str, batches: list[Batch], root: Path) -> float:
    options, log = VARIANTS[name]
    options = dict(options)
    if options.get("callbacks") == "no-nan":
        options["callbacks"] = [NoNaNCheck()]
    module = Net(log)
    with tempfile.TemporaryDirectory(dir=root) as folder:
        start = time.perf_counter()
        trainer = trainkit.Trainer(
            max_epochs=1,
            accelerator="cpu",
            enable_model_summary=False,
            default_root_dir=folder,
            **options,
        )
        trainer.fit(module, batches)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"command: {_report.exact_command()}")
    for key, value in _report.machine_info().items():
        print(f"{key}: {value}")
    x = torch.randn(args.steps * 16, 8, generator=torch.Generator().manual_seed(0))
    y = (x[:, 0] > 0).long()
    batches = [(x[i * 16 : (i + 1) * 16], y[i * 16 : (i + 1) * 16]) for i in range(args.steps)]
    times: dict[str, list[float]] = {"raw": [], **{name: [] for name in VARIANTS}}
    with tempfile.TemporaryDirectory() as root:
        for _ in range(args.repeats):
            for name in times:
                gc.collect()
                with contextlib.redirect_stdout(io.StringIO()):
                    if name == "raw":
                        times[name].append(run_raw(batches))
                    else:
                        times[name].append(run_trainer(name, batches, Path(root)))
    raw_min, raw_median = min(times["raw"]), statistics.median(times["raw"])
    per_step = 1e6 / args.steps
    print(f"\nraw: {raw_min * per_step:.1f} us per step (minimum of {args.repeats} rounds)")
    result: dict[str, Any] = {"raw_us_per_step": raw_min * per_step, "extra_us_per_step": {}}
    for name in VARIANTS:
        extra = (min(times[name]) - raw_min) * per_step
        median = (statistics.median(times[name]) - raw_median) * per_step
        result["extra_us_per_step"][name] = extra
        print(f"{name:34s} +{extra:6.1f} us per step over raw (minimum; median +{median:.1f})")
    if args.json is not None:
        _report.write_json(args.json, result)


if __name__ == "__main__":
    sys.exit(main())

"""Images/s of ResNet-18 on CIFAR-shaped data: trainkit's default Trainer vs a hand-written loop.

Three variants train ``torchvision.models.resnet18(num_classes=10)`` (channels_last,
SGD lr 0.1 momentum 0.9 nesterov) on random 3x32x32 images held on the device, in
batches of ``--batch`` (512), under "bf16-mixed" and "16-mixed":

- ``raw``: a hand-written loop doing the same work (autocast; for float16 a
  GradScaler with unscale/step/update; zero_grad(set_to_none=True));
- ``trainkit``: ``trainkit.Trainer`` with every default (TensorBoard logger,
  progress bar, model summary, checkpointing) and ``self.log("loss", ...)`` each step;
- ``lightning``: the same with ``lightning.pytorch`` when it is importable.

Each fit runs ``--warmup`` untimed steps, then ``--steps`` timed ones; the clock
reads follow a device synchronisation. The variants alternate (the first one
rotating) for ``--repeats`` rounds; the script prints median images/s and the
ratios to ``raw`` from the same run. Then the CIFAR-10 recipe
(``recipes/cifar10/config.yaml``, through ``trainkit fit``) trains one epoch on
synthetic files of the real size in CIFAR-10's on-disk format; the script prints the
epoch's time and 24 times it (the config's epochs; the first epoch also pays for
start-up, so this errs long). Last, compiled (``--compile-repeats`` rounds, default 1,
because each compiled fit compiles anew): ``raw`` uses ``torch.compile(model)`` and
``trainkit`` ``Trainer(compile=True)``; Lightning is timed eagerly only. ``--json``
is rewritten after each phase, so a run stopped at a time limit keeps what it measured.

``--quick`` runs tiny sizes on whatever device there is (the CPU in CI's dry run).

Run from the repository root::

    PYTHONPATH=. python benchmarks/gpu.py [--steps 50] [--repeats 3] [--precisions 16-mixed]
        [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _report  # benchmarks/_report.py, beside this script
import torch
import torch.nn.functional as F
from torch import nn

import trainkit

SEED = 0
LR = 0.1
# Float16 autocast on the CPU runs few kernels in float16: the dry run checks the code
# path, not the speed.
PRECISIONS = ("bf16-mixed", "16-mixed")
Batch = tuple[torch.Tensor, torch.Tensor]


def build_network(device: torch.device) -> nn.Module:
    from torchvision.models import resnet18

    torch.manual_seed(SEED)
    return resnet18(num_classes=10).to(device, memory_format=torch.channels_last)


def build_optimizer(network: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(network.parameters(), lr=LR, momentum=0.9, nesterov=True)


def build_batches(device: torch.device, batch: int, count: int) -> list[Batch]:
    """``count`` batches of random images and labels, already on ``device``."""
    generator = torch.Generator().manual_seed(SEED)
    images = torch.randn(count * batch, 3, 32, 32, generator=generator)
    images = images.to(device).contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 10, (count * batch,), generator=generator).to(device)
    return [
        (images[i * batch : (i + 1) * batch], labels[i * batch : (i + 1) * batch])
        for i in range(count)
    ]


class Batches:
    """An iterable over prepared batches, with a length, as a DataLoader is."""

    def __init__(self, batches: list[Batch]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[Batch]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Clock:
    """Start after the warm-up steps, stop after the last step (both synchronised)."""

    def __init__(self, device: torch.device, warmup: int) -> None:
        self.device, self.warmup = device, warmup
        self.start = self.stop = 0.0

    def batch_start(self, batch_idx: int) -> None:
        if batch_idx == self.warmup:
            synchronize(self.device)
            self.start = time.perf_counter()

    def batch_end(self) -> None:
        synchronize(self.device)  # every step: the last one's reading is kept
        self.stop = time.perf_counter()

    @property
    def seconds(self) -> float:
        return self.stop - self.start


# ------------------------------------------------------------------ variants
def run_raw(
    device: torch.device, batches: list[Batch], precision: str, warmup: int, compiled: Any
) -> float:
    network = build_network(device)
    # compiled: False, or torch.compile's keyword arguments ({}: its defaults).
    model: Any = network if compiled is False else torch.compile(network, **compiled)
    optimizer = build_optimizer(network)
    dtype = torch.float16 if precision == "16-mixed" else torch.bfloat16
    scaler = torch.amp.GradScaler(device.type) if precision == "16-mixed" else None
    clock = Clock(device, warmup)
    network.train()
    for batch_idx, (x, y) in enumerate(batches):
        # The clock reads the time after its synchronisation; only the last stop counts.
        clock.batch_start(batch_idx)
        with torch.autocast(device.type, dtype=dtype):
            loss = F.cross_entropy(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if batch_idx == len(batches) - 1:
            clock.batch_end()
    if not torch.isfinite(loss):
        raise AssertionError(f"raw {precision}: the loss is {loss.item()}")
    return clock.seconds


def _module_class(base: type) -> type:
    """The ResNet-18 module for trainkit's or Lightning's Module class ``base``."""

    class ResNetModule(base):  # type: ignore[misc,valid-type]
        def __init__(self, network: nn.Module) -> None:
            super().__init__()
            self.network = network

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.network(x)  # type: ignore[no-any-return]

        def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
            x, y = batch
            loss = F.cross_entropy(self(x), y)
            self.log("loss", loss, prog_bar=True)
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return build_optimizer(self)

    return ResNetModule


def _clock_callback(base: type, clock: Clock) -> Any:
    class ClockCallback(base):  # type: ignore[misc,valid-type]
        def on_train_batch_start(self, trainer: Any, module: Any, batch: Any, idx: int) -> None:
            clock.batch_start(idx)

        def on_train_batch_end(self, *args: Any) -> None:
            clock.batch_end()

    return ClockCallback()


def run_framework(
    framework: str,
    device: torch.device,
    batches: list[Batch],
    precision: str,
    warmup: int,
    compiled: Any,
) -> float:
    """One fit with a default Trainer of ``framework`` ("trainkit" or "lightning")."""
    if framework == "trainkit":
        trainer_class, module_base, callback_base = (
            trainkit.Trainer,
            trainkit.Module,
            trainkit.Callback,
        )
        # True for torch.compile's defaults; Trainer(compile=...) takes its kwargs too.
        extra: dict[str, Any] = {"compile": compiled if compiled is False else compiled or True}
    else:
        import lightning.pytorch as pl

        trainer_class, module_base, callback_base = pl.Trainer, pl.LightningModule, pl.Callback
        extra = {}
    clock = Clock(device, warmup)
    module = _module_class(module_base)(build_network(device))
    with tempfile.TemporaryDirectory(prefix=f"trainkit-gpu-{framework}-") as root:
        trainer = trainer_class(
            accelerator=device.type, devices=1, precision=precision, max_steps=len(batches),
            default_root_dir=root, callbacks=[_clock_callback(callback_base, clock)], **extra,
        )  # fmt: skip
        # One loader that yields the batches: Lightning reads a plain list as a list of loaders.
        trainer.fit(module, Batches(batches))
    loss = trainer.callback_metrics["loss"]
    if not torch.isfinite(loss):
        raise AssertionError(f"{framework} {precision}: the loss is {loss}")
    return clock.seconds


# ---------------------------------------------------------------- the recipe
def recipe_epoch(device: torch.device, quick: bool, root: Path) -> dict[str, Any]:
    """One epoch of the CIFAR-10 recipe's config on synthetic files of CIFAR-10's size."""
    import numpy as np
    import torchvision.datasets.cifar as cifar

    from recipes.cifar10 import data as cifar_data
    from tests.recipes.test_cifar10 import CONFIG, LABEL_NAMES, _write_batch
    from trainkit.cli.main import main as trainkit_main

    per_file, test_images = (20, 30) if quick else (10_000, 10_000)
    folder = root / cifar_data.FOLDER
    folder.mkdir(parents=True)
    rng = np.random.default_rng(SEED)
    for i in range(1, 6):
        _write_batch(folder / f"data_batch_{i}", f"training batch {i} of 5", per_file, rng)
    _write_batch(folder / "test_batch", "testing batch 1 of 1", test_images, rng)
    meta = {"num_cases_per_batch": per_file, "label_names": LABEL_NAMES, "num_vis": 3072}
    import pickle

    with open(folder / "batches.meta", "wb") as file:
        pickle.dump(meta, file)

    # Synthetic files cannot match CIFAR-10's MD5 sums; torchvision's checks go
    # through this one function (the loading path is otherwise the recipe's).
    def file_exists(fpath: str, md5: str | None = None) -> bool:
        return Path(fpath).is_file()

    cifar.check_integrity = file_exists
    overrides = [
        f"trainer.accelerator={device.type}",
        f"trainer.default_root_dir={root / 'run'}",
        "trainer.max_epochs=1",
        f"data.init_args.data_dir={root}",
    ]
    if quick:
        overrides += [
            f"trainer.precision={'bf16-mixed' if device.type == 'cpu' else '16-mixed'}",
            "data.init_args.batch_size=16", "data.init_args.val_size=20",
            "data.init_args.num_workers=0", "model.init_args.width=8",
        ]  # fmt: skip
    synchronize(device)
    start = time.perf_counter()
    status = trainkit_main(["fit", str(CONFIG), *overrides])
    synchronize(device)
    seconds = time.perf_counter() - start
    if status != 0:
        raise AssertionError(f"trainkit fit of the recipe exited {status}")
    return {
        "train_images": 5 * per_file,
        "overrides": overrides,
        "epoch_s": seconds,
        "projected_24_epochs_s": 24 * seconds,
    }


def time_fits(
    args: argparse.Namespace,
    device: torch.device,
    batches: list[Batch],
    variants: list[str],
    compiled: Any,
    rounds: int,
    seconds: dict[str, list[float]],
    images: int,
) -> None:
    """``rounds`` alternated rounds of every variant and precision; times into ``seconds``."""
    for round_index in range(rounds):
        for precision in args.precisions:
            names = [v for v in variants if compiled is False or v != "lightning"]
            shift = round_index % len(names)
            for variant in names[shift:] + names[:shift]:
                if compiled is not False:
                    torch._dynamo.reset()  # every compiled fit compiles from scratch
                gc.collect()
                if variant == "raw":
                    took = run_raw(device, batches, precision, args.warmup, compiled)
                else:
                    took = run_framework(variant, device, batches, precision, args.warmup, compiled)
                key = f"{variant} {precision}{'' if compiled is False else ' compiled'}"
                seconds.setdefault(key, []).append(took)
                print(f"  {key}: {images / took:,.0f} images/s", flush=True)


# ---------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="timed steps per fit (default 50)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first (default 10)")
    parser.add_argument("--batch", type=int, default=512, help="batch size (default 512)")
    parser.add_argument("--repeats", type=int, default=3, help="eager rounds (default 3)")
    parser.add_argument("--compile-repeats", type=int, default=1, help="compiled rounds (0: none)")
    parser.add_argument("--no-recipe", action="store_true", help="skip the CIFAR-10 recipe epoch")
    parser.add_argument(
        "--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS),
        help="the precisions to time (default: both)",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CI's dry run, on CPU)")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.warmup, args.batch, args.repeats = 1, 1, 2, 1
        args.compile_repeats = min(args.compile_repeats, 1)
    if min(args.steps, args.warmup, args.batch, args.repeats) < 1 or args.compile_repeats < 0:
        parser.error("--steps, --warmup, --batch and --repeats must be >= 1.")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu" and not args.quick:
        parser.error("No CUDA device: this benchmark measures a GPU. Pass --quick for a CPU check.")
    cuda = torch.cuda.get_device_name() if device.type == "cuda" else "not available"
    info = _report.machine_info(cuda=cuda, cuda_version=torch.version.cuda)
    command = _report.exact_command()
    variants = ["raw", "trainkit"]
    if importlib.util.find_spec("lightning") is not None:
        variants.append("lightning")
    print(f"command: {command}")
    for key, value in info.items():
        print(f"{key}: {value}")
    print(
        f"workload: resnet18(num_classes=10), channels_last, random 3x32x32 images on "
        f"{device.type}, batch {args.batch}, SGD lr {LR} nesterov, {args.warmup} warm-up + "
        f"{args.steps} timed steps per fit; variants {variants}"
    )

    batches = build_batches(device, args.batch, args.warmup + args.steps)
    images = args.steps * args.batch
    seconds: dict[str, list[float]] = {}
    result: dict[str, Any] = {
        "command": command,
        "machine": info,
        "config": {
            "batch": args.batch, "warmup": args.warmup, "steps": args.steps,
            "repeats": args.repeats, "compile_repeats": args.compile_repeats,
            "quick": args.quick, "device": device.type, "variants": variants,
            "precisions": args.precisions,
        },
        "seconds_per_fit": seconds,
        "images_per_s_median": {},
        "ratios_to_raw": {},
        "recipe": None,
    }  # fmt: skip

    def save() -> None:
        """Tabulate what has run so far and write it (a run cut short keeps its figures)."""
        rates = {key: images / statistics.median(values) for key, values in seconds.items()}
        ratios = {}
        for key, rate in rates.items():
            rest = key.split(" ", 1)[1]
            ratios[key] = rate / rates[f"raw {rest}"]
        result["images_per_s_median"], result["ratios_to_raw"] = rates, ratios
        if args.json is not None:
            _report.write_json(args.json, result)

    def table() -> None:
        print(f"\n{'variant':<32} {'images/s (median)':>18} {'ratio to raw':>13}")
        for key, rate in result["images_per_s_median"].items():
            print(f"{key:<32} {rate:>18,.0f} {result['ratios_to_raw'][key]:>13.3f}")

    # torch.compile's keyword arguments: inductor (the default) on the GPU; the dry
    # run takes the "eager" backend, as inductor would compile ResNet-18 for minutes.
    compile_kwargs: dict[str, Any] = {"backend": "eager"} if args.quick else {}
    # Eager rounds, the recipe, then compiled rounds: compiling is the slowest part, so
    # a run stopped at a time limit has lost the least.
    time_fits(args, device, batches, variants, False, args.repeats, seconds, images)
    save()
    table()

    if not args.no_recipe:
        with tempfile.TemporaryDirectory(prefix="trainkit-gpu-recipe-") as root:
            recipe = recipe_epoch(device, args.quick, Path(root))
        result["recipe"] = recipe
        save()
        print(
            f"\nCIFAR-10 recipe: one epoch over {recipe['train_images']:,} synthetic images "
            f"(validation included) {recipe['epoch_s']:.1f} s; 24 epochs projected "
            f"{recipe['projected_24_epochs_s'] / 60:.1f} min"
        )

    if args.compile_repeats:
        rounds = args.compile_repeats
        time_fits(args, device, batches, variants, compile_kwargs, rounds, seconds, images)
        save()
        table()
    return 0


if __name__ == "__main__":
    sys.exit(main())

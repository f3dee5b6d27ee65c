"""Small models and data shared by the tests."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from trainkit.loggers import Logger

ROOT = Path(__file__).resolve().parents[1]  # the repository


#: Skips a test that needs the ``rich`` extra where it is not installed: a
#: newcomer's ``pip install -e ".[dev]"`` leaves it out; CI installs it (and the
#: root conftest.py refuses a CI run without it).
NEEDS_RICH = "needs rich: pip install 'trainkit[rich]'"
needs_rich = pytest.mark.skipif(importlib.util.find_spec("rich") is None, reason=NEEDS_RICH)


def repo_env(*paths: str | Path, **extra: str) -> dict[str, str]:
    """This process's environment for a child Python that imports trainkit from this checkout.

    The repository, then ``paths``, go first on PYTHONPATH; what was on it stays after
    them, so packages this process finds through it (a machine's extra site folder, say)
    the child finds too. ``extra`` variables are set last.
    """
    entries = [str(ROOT), *map(str, paths), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(entries), **extra}


def event_file_events(path: str) -> list[Any]:
    """The events TensorBoard's record reader finds in an event file now (it checks every CRC)."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2

    return [event_pb2.Event.FromString(record) for record in RawEventFileLoader(path).Load()]


#: The Trainer options that take None for their default, as Lightning's Optional
#: arguments do (a config Lightning saved writes them as null); the ``logger``
#: component does too.
NONE_FOR_THE_DEFAULT = (
    "precision",
    "limit_train_batches",
    "limit_val_batches",
    "limit_test_batches",
    "limit_predict_batches",
    "val_check_interval",
    "num_sanity_val_steps",
    "log_every_n_steps",
    "enable_checkpointing",
    "enable_progress_bar",
    "enable_model_summary",
    "gradient_clip_algorithm",
    "deterministic",
)

QUIET: dict[str, Any] = {
    "logger": False,
    "enable_progress_bar": False,
    "enable_model_summary": False,
    "enable_checkpointing": False,
    "accelerator": "cpu",
}


def blobs(n: int = 512, features: int = 8, classes: int = 3, seed: int = 0) -> TensorDataset:
    """A linearly separable classification task (labels from a fixed random projection)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=generator)
    weights = torch.randn(features, classes, generator=torch.Generator().manual_seed(1234))
    return TensorDataset(x, (x @ weights).argmax(dim=1))


def loader(dataset: TensorDataset, batch_size: int = 32, shuffle: bool = False) -> DataLoader[Any]:
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle)


class Classifier(trainkit.Module):
    """A small MLP that logs train/loss, val/loss, val/acc, test/acc."""

    def __init__(self, features: int = 8, classes: int = 3, lr: float = 0.1) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(features, 32), torch.nn.ReLU(), torch.nn.Linear(32, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # type: ignore[no-any-return]

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self(x), y)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def _evaluate(self, batch: Any, prefix: str) -> None:
        x, y = batch
        logits = self(x)
        self.log(f"{prefix}/loss", torch.nn.functional.cross_entropy(logits, y))
        self.log(f"{prefix}/acc", (logits.argmax(dim=1) == y).float().mean(), prog_bar=True)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self._evaluate(batch, "test")

    def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x = batch[0] if isinstance(batch, (tuple, list)) else batch
        return self(x).argmax(dim=1)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class BlobData(trainkit.DataModule):
    """A DataModule over :func:`blobs` that records which hooks ran."""

    def __init__(self, batch_size: int = 32) -> None:
        self.batch_size = batch_size
        self.calls: list[str] = []

    def prepare_data(self) -> None:
        self.calls.append("prepare_data")

    def setup(self, stage: str) -> None:
        self.calls.append(f"setup:{stage.value}")
        self.train = blobs(512, seed=0)
        self.val = blobs(200, seed=1)

    def train_dataloader(self) -> DataLoader[Any]:
        return loader(self.train, self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader[Any]:
        return loader(self.val, 50)

    def test_dataloader(self) -> DataLoader[Any]:
        return loader(self.val, 50)

    def predict_dataloader(self) -> DataLoader[Any]:
        return loader(self.val, 50)


class MemoryLogger(Logger):
    """Keeps every ``log_metrics`` row and ``log_hyperparams`` call in memory."""

    def __init__(self) -> None:
        self.rows: list[dict[str, float]] = []
        self.hyperparameters: list[dict[str, Any]] = []

    @property
    def name(self) -> str:
        return "memory"

    @property
    def version(self) -> int:
        return 0

    @property
    def save_dir(self) -> str:
        return ""

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self.rows.append(dict(metrics))

    def log_hyperparams(self, params: Mapping[str, Any]) -> None:
        self.hyperparameters.append(dict(params))

    def values(self, name: str) -> list[float]:
        """Every value written under ``name``, in order."""
        return [row[name] for row in self.rows if name in row]


def printed_config(capsys: Any, *argv: str) -> dict[str, Any]:
    """The config ``trainkit ARGV --print-config`` prints, read back as a dict.

    Args:
        capsys: pytest's ``capsys`` fixture of the calling test.
        *argv: the command's arguments (subcommand, config files, overrides).
    """
    import yaml

    from trainkit.cli.main import main

    assert main([*argv, "--print-config"]) == 0
    return yaml.safe_load(capsys.readouterr().out)  # type: ignore[no-any-return]

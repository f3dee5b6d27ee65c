"""A logged torchmetrics Metric over two real gloo processes.

torchmetrics synchronises a Metric's state across processes in ``compute()``;
trainkit must neither reduce the computed value again nor lose a process's
batches: the epoch value is the metric over every sample that every process saw.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

import trainkit
from tests.distributed.spawn import run_processes
from tests.helpers import QUIET, Classifier, blobs

pytest.importorskip("torchmetrics")

# 100 validation samples in batches of 10: 50 for each of two processes, so the
# distributed sampler repeats none of them and every sample counts once.
VAL_SIZE, VAL_BATCH = 100, 10


class Logged(Classifier):
    """Logs a MulticlassAccuracy in training and validation and keeps what it saw."""

    def __init__(self) -> None:
        super().__init__(lr=0.5)
        from torchmetrics.classification import MulticlassAccuracy

        self.train_acc = MulticlassAccuracy(num_classes=3, average="micro")
        self.val_acc = MulticlassAccuracy(num_classes=3, average="micro")
        self.seen: dict[str, list[Any]] = {"train": [], "val": []}

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        logits = self(x)
        self.seen["train"].append((self.current_epoch, logits.detach().clone(), y.clone()))
        self.train_acc(logits, y)
        self.log("train/acc", self.train_acc, on_step=True, on_epoch=True)
        return torch.nn.functional.cross_entropy(logits, y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.seen["val"].append((logits.detach().clone(), y.clone()))
        self.val_acc.update(logits, y)
        self.log("val/acc", self.val_acc)


class Epochs(trainkit.Callback):
    """The training epoch values, as callbacks read them at each epoch's end."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        self.values.append(float(trainer.callback_metrics["train/acc_epoch"]))


def _module() -> Logged:
    torch.manual_seed(3)
    return Logged()


def validate(strategy: str) -> dict[str, Any]:
    """Validate the seeded model: the logged value and this process's inputs."""
    module = _module()
    trainer = trainkit.Trainer(strategy=strategy, **QUIET)
    data = DataLoader(blobs(VAL_SIZE, seed=5), batch_size=VAL_BATCH)
    (result,) = trainer.validate(module, data)
    return {"val/acc": result["val/acc"], "seen": module.seen["val"]}


def fit(strategy: str) -> dict[str, Any]:
    """Two epochs of training on 128 samples; the epoch values callbacks saw."""
    module = _module()
    epochs = Epochs()
    trainer = trainkit.Trainer(
        strategy=strategy, max_epochs=2, callbacks=[epochs], num_sanity_val_steps=0, **QUIET
    )
    trainer.fit(module, DataLoader(blobs(128, seed=0), batch_size=16, shuffle=True))
    return {"epochs": epochs.values, "seen": module.seen["train"]}


def _accuracy(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    logits = torch.cat([logits for logits, _ in pairs])
    labels = torch.cat([labels for _, labels in pairs])
    return float((logits.argmax(dim=1) == labels).float().mean())


def test_validation_accuracy_over_two_processes_is_the_whole_set_accuracy() -> None:
    ranks = run_processes(validate, 2, "ddp")
    single = validate("single_device")
    seen = ranks[0]["seen"] + ranks[1]["seen"]
    assert sum(len(labels) for _, labels in seen) == VAL_SIZE  # each sample once
    expected = _accuracy(seen)
    assert single["val/acc"] == pytest.approx(_accuracy(single["seen"]), abs=1e-6)
    assert single["val/acc"] == pytest.approx(expected, abs=1e-6)  # same data, same weights
    # Every process gets the synchronised value, not its own half's.
    assert [rank["val/acc"] for rank in ranks] == pytest.approx([expected, expected], abs=1e-6)
    assert _accuracy(ranks[0]["seen"]) != pytest.approx(expected, abs=1e-6)  # the test bites


def test_training_epoch_values_cover_every_process_batches() -> None:
    ranks = run_processes(fit, 2, "ddp")
    for epoch in (0, 1):
        pairs = [(logits, y) for rank in ranks for e, logits, y in rank["seen"] if e == epoch]
        assert sum(len(y) for _, y in pairs) == 128
        expected = _accuracy(pairs)
        for rank in ranks:
            assert rank["epochs"][epoch] == pytest.approx(expected, abs=1e-6)

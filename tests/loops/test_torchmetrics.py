"""``self.log`` of torchmetrics ``Metric`` objects, as Lightning documents it.

A Metric logged by object gives, per step, its forward value for that batch and,
per epoch, ``compute()`` over every update of the epoch, after which it is reset.
The expected values here are computed independently, over all predictions at once.
The two-process version is tests/distributed/test_torchmetrics_ddp.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, MemoryLogger, blobs, loader, repo_env
from trainkit.callbacks import ModelCheckpoint

torchmetrics = pytest.importorskip("torchmetrics")
from torchmetrics.classification import (  # noqa: E402
    MulticlassAccuracy,
    MulticlassF1Score,
    MulticlassPrecision,
)

ROOT = Path(__file__).resolve().parents[2]  # the repository: tests/loops/ is two levels down
RUN: dict[str, Any] = {**QUIET, "num_sanity_val_steps": 0}


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Top-1 accuracy computed by hand."""
    return float((logits.argmax(dim=1) == labels).float().mean())


class ValAccuracy(Classifier):
    """Logs a MulticlassAccuracy from validation_step (forward or update) and keeps its inputs."""

    def __init__(self, call: str = "update", **log_options: Any) -> None:
        super().__init__()
        self.acc = MulticlassAccuracy(num_classes=3, average="micro")
        self.call = call
        self.log_options = log_options
        self.seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.seen.append((logits.detach(), y))
        if self.call == "forward":
            self.acc(logits, y)
        elif self.call == "update":
            self.acc.update(logits, y)
        self.log("val/acc", self.acc, **self.log_options)


def test_the_epoch_value_is_the_accuracy_over_the_whole_validation_set() -> None:
    module = ValAccuracy()
    # 100 samples in batches of 32: the last batch holds 4, and the mean of the
    # four batch accuracies would not be the dataset's accuracy.
    (result,) = trainkit.Trainer(**RUN).validate(module, loader(blobs(100), 32))
    logits = torch.cat([seen[0] for seen in module.seen])
    labels = torch.cat([seen[1] for seen in module.seen])
    assert len(labels) == 100
    assert result["val/acc"] == pytest.approx(accuracy(logits, labels), abs=1e-6)
    assert float(module.acc.tp.sum()) == 0.0  # reset once its epoch value was computed


def test_step_values_are_each_batch_own_forward_value() -> None:
    written = MemoryLogger()
    module = ValAccuracy("forward", on_step=True, on_epoch=True)
    (result,) = trainkit.Trainer(**{**RUN, "logger": written}).validate(
        module, loader(blobs(100), 32)
    )
    expected = [accuracy(logits, labels) for logits, labels in module.seen]
    assert written.values("val/acc_step") == pytest.approx(expected, abs=1e-6)
    logits = torch.cat([seen[0] for seen in module.seen])
    labels = torch.cat([seen[1] for seen in module.seen])
    assert result["val/acc_epoch"] == pytest.approx(accuracy(logits, labels), abs=1e-6)


class TrainAccuracy(Classifier):
    """Trains while logging a MulticlassAccuracy per step and per epoch."""

    def __init__(self) -> None:
        super().__init__(lr=0.5)
        self.acc = MulticlassAccuracy(num_classes=3, average="micro")
        self.seen: list[tuple[int, torch.Tensor, torch.Tensor]] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        logits = self(x)
        self.seen.append((self.current_epoch, logits.detach(), y))
        self.acc(logits, y)
        self.log("train/acc", self.acc, on_step=True, on_epoch=True)
        return torch.nn.functional.cross_entropy(logits, y)


class Record(trainkit.Callback):
    """Keeps the callback metrics after every training batch and epoch."""

    def __init__(self) -> None:
        self.steps: list[float] = []
        self.epochs: list[float] = []

    def on_train_batch_end(
        self, trainer: Any, module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        self.steps.append(float(trainer.callback_metrics["train/acc_step"]))

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        self.epochs.append(float(trainer.callback_metrics["train/acc_epoch"]))


def test_training_logs_each_step_and_each_epoch_over_that_epoch_only() -> None:
    record = Record()
    module = TrainAccuracy()
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[record], **RUN)
    trainer.fit(module, loader(blobs(100), 32))
    assert record.steps == pytest.approx(
        [accuracy(logits, y) for _, logits, y in module.seen], abs=1e-6
    )
    for epoch in (0, 1):  # the Metric was reset between the epochs
        logits = torch.cat([s[1] for s in module.seen if s[0] == epoch])
        labels = torch.cat([s[2] for s in module.seen if s[0] == epoch])
        assert record.epochs[epoch] == pytest.approx(accuracy(logits, labels), abs=1e-6)
    assert float(trainer.logged_metrics["train/acc_epoch"]) == pytest.approx(record.epochs[1])


def test_lightning_pattern_of_logging_the_metric_again_in_the_epoch_end_hook() -> None:
    # TorchMetrics' "in PyTorch Lightning" page: log the Metric in training_step
    # (step values), then the same object in on_train_epoch_end (the epoch's value).
    class EpochEnd(TrainAccuracy):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            logits = self(x)
            self.seen.append((self.current_epoch, logits.detach(), y))
            self.acc(logits, y)
            self.log("train_acc_step", self.acc)
            return torch.nn.functional.cross_entropy(logits, y)

        def on_train_epoch_end(self) -> None:
            self.log("train_acc_epoch", self.acc)

    module = EpochEnd()
    written = MemoryLogger()
    trainer = trainkit.Trainer(max_epochs=2, log_every_n_steps=1, **{**RUN, "logger": written})
    trainer.fit(module, loader(blobs(96), 32))
    epochs = []
    for epoch in (0, 1):
        logits = torch.cat([s[1] for s in module.seen if s[0] == epoch])
        labels = torch.cat([s[2] for s in module.seen if s[0] == epoch])
        epochs.append(accuracy(logits, labels))
    assert written.values("train_acc_epoch") == pytest.approx(epochs, abs=1e-6)
    steps = [accuracy(logits, labels) for _, logits, labels in module.seen]
    assert written.values("train_acc_step") == pytest.approx(steps, abs=1e-6)


class ComputeInHooks(Classifier):
    """Logs one Metric per stage and reads ``compute()`` in every epoch-end hook.

    The pattern of torchmetrics' Lightning page and of project templates that
    keep a best-so-far value (``self.val_acc_best(self.val_acc.compute())``).
    """

    def __init__(self) -> None:
        super().__init__(lr=0.5)
        self.accs = {stage: MulticlassAccuracy(num_classes=3, average="micro") for stage in STAGES}
        for stage, metric in self.accs.items():
            self.add_module(f"{stage}_acc", metric)
        self.seen: dict[tuple[str, int], list[tuple[torch.Tensor, torch.Tensor]]] = {}
        self.read: list[tuple[str, str, int, float]] = []

    def _step(self, stage: str, batch: Any) -> torch.Tensor:
        x, y = batch
        logits = self(x)
        self.seen.setdefault((stage, self.current_epoch), []).append((logits.detach(), y))
        self.accs[stage](logits, y)
        self.log(f"{stage}/acc", self.accs[stage], on_step=False, on_epoch=True)
        return torch.nn.functional.cross_entropy(logits, y)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self._step("train", batch)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self._step("val", batch)

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self._step("test", batch)

    def reading(self, who: str, stage: str) -> None:
        self.read.append((who, stage, self.current_epoch, float(self.accs[stage].compute())))

    def on_train_epoch_end(self) -> None:
        self.reading("module", "train")

    def on_validation_epoch_end(self) -> None:
        self.reading("module", "val")

    def on_validation_end(self) -> None:
        self.reading("module end", "val")

    def on_test_epoch_end(self) -> None:
        self.reading("module", "test")

    def on_train_epoch_start(self) -> None:
        assert not self.accs["train"].update_called, "not reset after the last epoch"

    def on_validation_epoch_start(self) -> None:
        assert not self.accs["val"].update_called, "not reset after the last validation"


STAGES = ("train", "val", "test")


class ComputeInCallbackHooks(trainkit.Callback):
    def on_train_epoch_end(self, trainer: Any, module: ComputeInHooks) -> None:
        module.reading("callback", "train")

    def on_validation_epoch_end(self, trainer: Any, module: ComputeInHooks) -> None:
        module.reading("callback", "val")

    def on_test_epoch_end(self, trainer: Any, module: ComputeInHooks) -> None:
        module.reading("callback", "test")


def test_compute_in_the_epoch_end_hooks_gives_the_epochs_value() -> None:
    # Lightning computes and resets logged Metric objects after the epoch-end
    # hooks: a compute() there is the epoch's value, not that of a reset metric.
    module = ComputeInHooks()
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[ComputeInCallbackHooks()], **RUN)
    trainer.fit(module, loader(blobs(96), 32), loader(blobs(64, seed=1), 32))
    trainer.test(module, loader(blobs(64, seed=2), 32))
    expected = {}
    for (stage, epoch), seen in module.seen.items():
        logits = torch.cat([logits for logits, _ in seen])
        expected[stage, epoch] = accuracy(logits, torch.cat([labels for _, labels in seen]))
    assert len(module.read) == 2 * 5 + 2
    for who, stage, epoch, value in module.read:
        assert value == pytest.approx(expected[stage, epoch], abs=1e-6), (who, stage, epoch)
    assert {(who, stage) for who, stage, *_ in module.read} == {
        (who, stage) for who in ("module", "callback") for stage in STAGES
    } | {("module end", "val")}
    # Reset after the hooks: the next epoch starts afresh, and the run leaves none updated.
    assert expected["train", 0] != expected["train", 1]
    assert not any(metric.update_called for metric in module.accs.values())


def test_one_metric_under_two_names_gives_both_the_same_epoch_value() -> None:
    class TwoNames(ValAccuracy):
        def validation_step(self, batch: Any, batch_idx: int) -> None:
            super().validation_step(batch, batch_idx)
            self.log("val/acc_again", self.acc)

    module = TwoNames()
    (result,) = trainkit.Trainer(**RUN).validate(module, loader(blobs(100), 32))
    # Computed once: a second compute() after the reset would find no updates.
    assert result["val/acc_again"] == result["val/acc"] > 0


def test_log_dict_with_a_metric_collection_equals_the_metrics_over_the_whole_set() -> None:
    class Collection(ValAccuracy):
        def __init__(self) -> None:
            super().__init__()
            # Accuracy, precision and F1 share their state (a compute group).
            self.metrics = torchmetrics.MetricCollection(
                {
                    "acc": MulticlassAccuracy(num_classes=3, average="macro"),
                    "precision": MulticlassPrecision(num_classes=3, average="macro"),
                    "f1": MulticlassF1Score(num_classes=3, average="macro"),
                },
                prefix="val/",
            )

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            logits = self(x)
            self.seen.append((logits.detach(), y))
            self.metrics.update(logits, y)
            self.log_dict(self.metrics)

    module = Collection()
    (result,) = trainkit.Trainer(**RUN).validate(module, loader(blobs(100), 32))
    logits = torch.cat([seen[0] for seen in module.seen])
    labels = torch.cat([seen[1] for seen in module.seen])
    reference = torchmetrics.MetricCollection(
        {
            "acc": MulticlassAccuracy(num_classes=3, average="macro"),
            "precision": MulticlassPrecision(num_classes=3, average="macro"),
            "f1": MulticlassF1Score(num_classes=3, average="macro"),
        },
        prefix="val/",
        compute_groups=False,
    )
    expected = {name: float(value) for name, value in reference(logits, labels).items()}
    assert set(result) == {"val/acc", "val/precision", "val/f1"}
    assert result == pytest.approx(expected, abs=1e-6)
    assert [sorted(group) for group in module.metrics.compute_groups.values()] == [
        ["acc", "f1", "precision"]
    ]


def test_log_dict_with_a_dict_of_metrics_logs_each_by_its_key() -> None:
    class Dict(ValAccuracy):
        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            logits = self(x)
            self.seen.append((logits.detach(), y))
            self.acc.update(logits, y)
            self.log_dict({"val/acc": self.acc, "val/batches": float(batch_idx)})

    module = Dict()
    (result,) = trainkit.Trainer(**RUN).validate(module, loader(blobs(64), 32))
    logits = torch.cat([seen[0] for seen in module.seen])
    labels = torch.cat([seen[1] for seen in module.seen])
    assert result["val/acc"] == pytest.approx(accuracy(logits, labels), abs=1e-6)
    assert result["val/batches"] == 0.5


def test_test_step_with_two_dataloaders_logs_one_metric_each() -> None:
    class TwoLoaders(Classifier):
        def __init__(self) -> None:
            super().__init__()
            self.accs = torch.nn.ModuleList(
                [MulticlassAccuracy(num_classes=3, average="micro") for _ in range(2)]
            )
            self.seen: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {0: [], 1: []}

        def test_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
            x, y = batch
            logits = self(x)
            self.seen[dataloader_idx].append((logits.detach(), y))
            self.accs[dataloader_idx].update(logits, y)
            self.log("test/acc", self.accs[dataloader_idx])

    module = TwoLoaders()
    results = trainkit.Trainer(**RUN).test(
        module, [loader(blobs(70, seed=1), 32), loader(blobs(50, seed=2), 16)]
    )
    for index, result in enumerate(results):
        logits = torch.cat([s[0] for s in module.seen[index]])
        labels = torch.cat([s[1] for s in module.seen[index]])
        assert result == {
            f"test/acc/dataloader_idx_{index}": pytest.approx(accuracy(logits, labels), abs=1e-6)
        }


# ------------------------------------------------------------------- errors
def test_a_metric_never_updated_says_to_update_it() -> None:
    with pytest.raises(ValueError, match=r"'val/acc'.*never updated.*metric\.update\(preds"):
        trainkit.Trainer(**RUN).validate(ValAccuracy("nothing"), loader(blobs(64), 32))


@pytest.mark.parametrize("reduce_fx", ["max", "sum", torch.min])
def test_a_reduce_fx_other_than_the_mean_says_the_metric_reduces_itself(reduce_fx: Any) -> None:
    module = ValAccuracy("update", reduce_fx=reduce_fx)
    with pytest.raises(
        ValueError, match=r"reduce_fx=.*compute\(\).*Leave reduce_fx at its default"
    ):
        trainkit.Trainer(**RUN).validate(module, loader(blobs(64), 32))


def test_a_metric_with_a_value_per_class_says_how_to_get_one_number() -> None:
    module = ValAccuracy("update")
    module.acc = MulticlassAccuracy(num_classes=3, average=None)
    with pytest.raises(ValueError, match=r"tensor of shape \(3,\).*average='micro'"):
        trainkit.Trainer(**RUN).validate(module, loader(blobs(64), 32))


def test_on_step_after_update_warns_once_and_still_logs_the_epoch_value() -> None:
    module = ValAccuracy("update", on_step=True, on_epoch=True)
    with pytest.warns(UserWarning, match=r"no value for this step.*\.update\(\)") as caught:
        (result,) = trainkit.Trainer(**RUN).validate(module, loader(blobs(100), 32))
    assert len([w for w in caught if "no value for this step" in str(w.message)]) == 1
    logits = torch.cat([seen[0] for seen in module.seen])
    labels = torch.cat([seen[1] for seen in module.seen])
    assert result == {"val/acc_epoch": pytest.approx(accuracy(logits, labels), abs=1e-6)}


# ------------------------------------------------------------------- resume
class Resumable(TrainAccuracy):
    """Epoch accuracy only; with ``persistent``, the Metric's state is in the state_dict."""

    def __init__(self, persistent: bool) -> None:
        super().__init__()
        self.acc.persistent(persistent)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        logits = self(x)
        self.acc.update(logits, y)
        self.log("train/acc", self.acc, on_step=False, on_epoch=True)
        return torch.nn.functional.cross_entropy(logits, y)


def _fit(tmp_path: Path, module: Resumable, ckpt_path: Path | None = None) -> float:
    saver = ModelCheckpoint(
        dirpath=tmp_path, filename="{step}", every_n_train_steps=2, save_top_k=-1
    )
    options = {**RUN, "enable_checkpointing": True}
    trainer = trainkit.Trainer(
        max_epochs=1, callbacks=[saver], default_root_dir=tmp_path, seed=0, **options
    )
    trainer.fit(module, loader(blobs(160), 32), ckpt_path=ckpt_path)
    return float(trainer.callback_metrics["train/acc"])


@pytest.mark.filterwarnings("ignore:ModelCheckpoint. the checkpoint's files are in")
def test_a_persistent_metric_state_survives_a_resume_mid_epoch(tmp_path: Path) -> None:
    torch.manual_seed(0)
    whole = _fit(tmp_path / "whole", Resumable(persistent=True))
    checkpoint = tmp_path / "whole" / "step=2.ckpt"
    saved = torch.load(checkpoint, weights_only=True)["state_dict"]
    assert float(saved["acc.tp"].sum() + saved["acc.fn"].sum()) == 64  # two batches counted
    torch.manual_seed(1)  # other weights: the checkpoint restores them all
    resumed = _fit(tmp_path / "resumed", Resumable(persistent=True), checkpoint)
    assert resumed == pytest.approx(whole, abs=1e-6)


def test_a_metric_state_is_left_out_of_checkpoints_unless_persistent(tmp_path: Path) -> None:
    # As in Lightning: torchmetrics keeps states out of the state_dict by default,
    # so a run resumed mid-epoch counts only the batches after the resume point.
    _fit(tmp_path, Resumable(persistent=False))
    saved = torch.load(tmp_path / "step=2.ckpt", weights_only=True)["state_dict"]
    assert not any(key.startswith("acc.") for key in saved)


# ----------------------------------------------------------------- optional
def test_logging_tensors_never_imports_torchmetrics() -> None:
    code = (
        "import sys, trainkit\n"
        "from tests.helpers import QUIET, Classifier, blobs, loader\n"
        "trainkit.Trainer(max_epochs=1, **QUIET).fit(Classifier(), loader(blobs(64)), "
        "loader(blobs(32)))\n"
        "assert 'torchmetrics' not in sys.modules, 'torchmetrics was imported'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=repo_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]

"""Values logged with self.log reach TensorBoard and CSV at the right steps."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import Classifier, MemoryLogger, blobs, loader
from trainkit.loggers import CSVLogger, TensorBoardLogger

QUIET_NO_LOGGER = {
    "enable_progress_bar": False,
    "enable_model_summary": False,
    "enable_checkpointing": False,
    "accelerator": "cpu",
    "num_sanity_val_steps": 0,
}


class StepLogger(Classifier):
    """Logs its own global step, so the recorded values say which step they came from."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.log("seen_step", float(self.global_step))
        self.log("epoch_mean", torch.tensor(float(batch_idx)), on_step=False, on_epoch=True)
        return super().training_step(batch, batch_idx)


def _fit(tmp_path: Path, logger: Any) -> trainkit.Trainer:
    trainer = trainkit.Trainer(
        max_epochs=2,
        log_every_n_steps=3,
        logger=logger,
        default_root_dir=tmp_path,
        **QUIET_NO_LOGGER,
    )
    # 10 batches an epoch (the last one smaller), validation at each epoch end.
    trainer.fit(StepLogger(), loader(blobs(300), 32), loader(blobs(64), 32))
    return trainer


def test_tensorboard_event_files_hold_the_scalars_at_the_right_steps(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    trainer = _fit(tmp_path, True)  # the default logger is TensorBoard
    assert isinstance(trainer.logger, TensorBoardLogger)
    log_dir = Path(trainer.log_dir)
    assert log_dir == tmp_path / "logs" / "version_0"
    events = EventAccumulator(str(log_dir))
    events.Reload()
    seen = events.Scalars("seen_step")
    # Written every 3 optimizer steps, at the step of the batch that logged them.
    assert [e.step for e in seen] == [2, 5, 8, 11, 14, 17]
    assert [e.value for e in seen] == [2.0, 5.0, 8.0, 11.0, 14.0, 17.0]
    assert [e.step for e in events.Scalars("train/loss")] == [2, 5, 8, 11, 14, 17]
    # Epoch aggregates are written once per epoch, at the epoch's last step.
    epoch_mean = events.Scalars("epoch_mean")
    assert [e.step for e in epoch_mean] == [9, 19]
    # Batches 0..9 weighted by size: 9 batches of 32 and one of 12.
    expected = (sum(i * 32 for i in range(9)) + 9 * 12) / 300
    assert epoch_mean[0].value == pytest.approx(expected)
    assert [e.step for e in events.Scalars("val/acc")] == [9, 19]
    assert (log_dir / "hparams.yaml").read_text().count("lr: 0.1") == 1


def test_csv_logger_writes_the_same_rows(tmp_path: Path) -> None:
    trainer = _fit(tmp_path, CSVLogger(tmp_path, name="csv"))
    with open(Path(trainer.log_dir) / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    step_rows = [r for r in rows if r.get("seen_step")]
    assert [int(r["step"]) for r in step_rows] == [2, 5, 8, 11, 14, 17]
    assert [float(r["seen_step"]) for r in step_rows] == [2.0, 5.0, 8.0, 11.0, 14.0, 17.0]
    val_rows = [r for r in rows if r.get("val/acc")]
    assert [int(r["step"]) for r in val_rows] == [9, 19]
    assert all(r["epoch"] in ("0", "1") for r in rows)  # ints, as Lightning writes them


def test_validate_and_test_write_their_metrics(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path)
    trainer = trainkit.Trainer(logger=logger, **QUIET_NO_LOGGER)
    result = trainer.test(Classifier(), loader(blobs(64), 32))[0]
    with open(Path(logger.log_dir) / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert float(rows[0]["test/acc"]) == pytest.approx(result["test/acc"])


def test_on_step_and_on_epoch_give_step_and_epoch_names(tmp_path: Path) -> None:
    class Both(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = super().training_step(batch, batch_idx)
            self.log("both", loss, on_step=True, on_epoch=True)
            return loss

    trainer = trainkit.Trainer(
        max_epochs=1, log_every_n_steps=1, logger=CSVLogger(tmp_path), **QUIET_NO_LOGGER
    )
    trainer.fit(Both(), loader(blobs(64), 32))
    assert {"both_step", "both_epoch"} <= set(trainer.logged_metrics)
    assert {"both_step", "both_epoch"} <= set(trainer.callback_metrics)


def test_progress_bar_metrics_hold_loss_and_prog_bar_values() -> None:
    trainer = trainkit.Trainer(max_epochs=1, logger=False, **QUIET_NO_LOGGER)
    trainer.fit(Classifier(), loader(blobs(64), 32), loader(blobs(64), 32))
    metrics = trainer.progress_bar_metrics
    # train/loss is the step's loss itself, so no separate "loss" entry is added;
    # after fit the last values stay, as in Lightning (issue 12).
    assert set(metrics) == {"train/loss", "val/acc"}
    assert metrics["train/loss"] == pytest.approx(float(trainer.callback_metrics["train/loss"]))
    seen: list[dict[str, float]] = []

    class Probe(trainkit.Callback):
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            seen.append(trainer.progress_bar_metrics)

    class NoProgBarLoss(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            return torch.nn.functional.cross_entropy(self(x), y)

    trainer = trainkit.Trainer(max_epochs=1, logger=False, callbacks=[Probe()], **QUIET_NO_LOGGER)
    trainer.fit(Classifier(), loader(blobs(64), 32))
    assert set(seen[-1]) == {"train/loss"}
    seen.clear()
    trainer.fit_loop.max_epochs = 2  # a second fit of a Trainer trains on from the first's end
    trainer.fit(NoProgBarLoss(), loader(blobs(64), 32))
    assert set(seen[-1]) == {"loss"} and isinstance(seen[-1]["loss"], float)


def test_logging_keeps_tensors_on_the_device_until_read() -> None:
    seen: list[Any] = []

    class Probe(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = super().training_step(batch, batch_idx)
            seen.append(self.trainer.train_metrics.entries["train/loss"].step_value)
            return loss

    trainkit.Trainer(max_epochs=1, logger=False, **QUIET_NO_LOGGER).fit(
        Probe(), loader(blobs(64), 32)
    )
    # Stored as (detached) tensors, not floats: no .item() per step.
    assert all(isinstance(v, torch.Tensor) and not v.requires_grad for v in seen)


def test_a_step_called_without_a_trainer_runs_its_logging_warns_and_bad_values_are_errors() -> None:
    # Projects test their step methods directly, without a Trainer (Lightning allows it).
    batch = blobs(8)[:]
    with pytest.warns(UserWarning, match=r"self.log\('train/loss'\) .* not attached to a Trainer"):
        loss = Classifier().training_step(batch, 0)
    assert loss.ndim == 0 and loss.requires_grad

    class BadLog(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            self.log("vector", torch.ones(3))
            return super().training_step(batch, batch_idx)

    with pytest.raises(ValueError, match=r"tensor of shape \(3,\); only scalars"):
        trainkit.Trainer(max_epochs=1, logger=False, **QUIET_NO_LOGGER).fit(
            BadLog(), loader(blobs(64), 32)
        )


def test_a_repeated_step_log_records_each_step_s_value_and_still_checks_options() -> None:
    # The second and later calls of the same self.log in training steps take a
    # shortcut to their entry: each step's value must still be the one read, and
    # a call with other options must still be refused.
    losses: list[float] = []
    read: list[float] = []

    class Repeating(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = super().training_step(batch, batch_idx)
            self.log("again", loss * 2, prog_bar=True)
            losses.append(float(loss) * 2)
            return loss

    class Reader(trainkit.Callback):
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            value = trainer.train_metrics.entries["again"].step_value
            assert not value.requires_grad  # stored without its graph
            read.append(trainer.progress_bar_metrics["again"])

    trainer = trainkit.Trainer(max_epochs=2, logger=False, callbacks=[Reader()], **QUIET_NO_LOGGER)
    trainer.fit(Repeating(), loader(blobs(128), 32))
    assert read == pytest.approx(losses) and len(read) == 8

    class Switching(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = super().training_step(batch, batch_idx)
            self.log("again", loss, on_epoch=batch_idx == 2)
            return loss

    with pytest.raises(ValueError, match=r"self.log\('again'\) was called with different options"):
        trainkit.Trainer(max_epochs=1, logger=False, **QUIET_NO_LOGGER).fit(
            Switching(), loader(blobs(128), 32)
        )

    class Unhashable(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = super().training_step(batch, batch_idx)
            self.log("again", loss, reduce_fx=["max"])  # type: ignore[arg-type]
            return loss

    with pytest.raises(ValueError, match=r"reduce_fx=\['max'\]\) is not supported"):
        trainkit.Trainer(max_epochs=1, logger=False, **QUIET_NO_LOGGER).fit(
            Unhashable(), loader(blobs(128), 32)
        )


class AsksForTheLogger(Classifier):
    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.log("asked", 1.0, logger=True)
        self.log("left_default", 2.0)
        self.log_dict({"asked_in_dict": 3.0}, logger=True)
        return super().training_step(batch, batch_idx)


def test_logger_true_without_a_logger_warns_once_a_name_and_the_default_never() -> None:
    trainer = trainkit.Trainer(max_epochs=2, logger=False, **QUIET_NO_LOGGER)
    with pytest.warns(UserWarning, match="have no logger configured") as caught:
        trainer.fit(AsksForTheLogger(), loader(blobs(96)))
    found = [w for w in caught if "have no logger" in str(w.message)]
    asked = [str(w.message) for w in found]
    assert len(asked) == 2  # one a name, over six steps
    assert asked[0].startswith("You called `self.log('asked', ..., logger=True)`")
    assert "asked_in_dict" in asked[1] and "Remove `logger=True`" in asked[1]
    assert found[0].filename == __file__  # points at the self.log call
    # With a logger, nothing to say.
    with_logger = trainkit.Trainer(max_epochs=1, logger=MemoryLogger(), **QUIET_NO_LOGGER)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*no logger configured")
        with_logger.fit(AsksForTheLogger(), loader(blobs(96)))


class ReadsLoggedMetricsAfterValidation(Classifier):
    def __init__(self) -> None:
        super().__init__()
        self.losses: list[float] = []
        self.read: list[float] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        self.losses.append(float(loss))
        return loss

    def on_validation_end(self) -> None:
        if not self.trainer.sanity_checking:  # nothing read them during the batches
            self.read.append(float(self.trainer.logged_metrics["train/loss"]))


def test_logged_metrics_read_after_a_validation_hold_the_last_steps_values() -> None:
    # Fewer steps than log_every_n_steps: no logger write has happened in between.
    model = ReadsLoggedMetricsAfterValidation()
    trainer = trainkit.Trainer(max_epochs=2, **QUIET_NO_LOGGER, logger=False)
    trainer.fit(model, loader(blobs(96)), loader(blobs(32)))
    assert model.read == pytest.approx([model.losses[2], model.losses[5]])

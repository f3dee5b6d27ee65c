"""TQDMProgressBar as Lightning documents it: metrics shown, totals, bars, enable/disable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import Callback, TQDMProgressBar
from trainkit.loggers import CSVLogger


class Probe(Callback):
    """Reads the bar's public state while each stage runs."""

    def __init__(self, bar: TQDMProgressBar) -> None:
        self.bar = bar
        self.seen: dict[str, Any] = {}

    def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
        self.seen["metrics"] = self.bar.get_metrics(trainer, module)
        self.seen["train"] = self.bar.total_train_batches
        self.seen["val"] = self.bar.total_val_batches
        if not self.bar.is_plain and self.bar.is_enabled:
            self.seen["train_bar_total"] = self.bar.train_progress_bar.total

    def on_test_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
        self.seen["test"] = self.bar.total_test_batches

    def on_predict_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
        self.seen["predict"] = self.bar.total_predict_batches


def _trainer(tmp_path: Path, bar: TQDMProgressBar, probe: Probe, **kwargs: Any) -> trainkit.Trainer:
    options = {**QUIET, "enable_progress_bar": True, **kwargs}
    return trainkit.Trainer(
        max_epochs=1, callbacks=[bar, probe], default_root_dir=tmp_path, **options
    )


def test_get_metrics_has_v_num_and_progress_bar_metrics(tmp_path: Path) -> None:
    bar = TQDMProgressBar(plain=False)
    probe = Probe(bar)
    trainer = _trainer(tmp_path, bar, probe, logger=CSVLogger(tmp_path))
    trainer.fit(Classifier(), loader(blobs(96), 32), loader(blobs(64), 32))
    metrics = probe.seen["metrics"]
    assert metrics["v_num"] == 0
    assert "train/loss" in metrics
    assert probe.seen["train"] == 3
    assert probe.seen["val"] == 2
    assert probe.seen["train_bar_total"] == 3


def test_get_metrics_without_a_logger_has_no_v_num(tmp_path: Path) -> None:
    bar = TQDMProgressBar(plain=True)
    probe = Probe(bar)
    trainer = _trainer(tmp_path, bar, probe)
    trainer.fit(Classifier(), loader(blobs(64), 32))
    assert "v_num" not in probe.seen["metrics"]


def test_total_test_and_predict_batches(tmp_path: Path) -> None:
    bar = TQDMProgressBar(plain=True)
    probe = Probe(bar)
    trainer = _trainer(tmp_path, bar, probe)
    model = Classifier()
    trainer.test(model, loader(blobs(96), 32))
    trainer.predict(model, loader(blobs(64), 32))
    assert probe.seen["test"] == 3
    assert probe.seen["predict"] == 2


def test_overriding_get_metrics_changes_what_is_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    class NoLoss(TQDMProgressBar):
        def get_metrics(self, trainer: Any, pl_module: Any) -> dict[str, Any]:
            metrics = super().get_metrics(trainer, pl_module)
            metrics.pop("train/loss", None)
            metrics["custom"] = 7
            return metrics

    bar = NoLoss(plain=True, print_every_n_steps=1)
    trainer = _trainer(tmp_path, bar, Probe(bar))
    trainer.fit(Classifier(), loader(blobs(64), 32))
    out = capsys.readouterr().out
    assert "custom 7" in out and "train/loss" not in out


def test_disable_and_enable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bar = TQDMProgressBar(plain=True, print_every_n_steps=1)
    assert bar.is_enabled and not bar.is_disabled
    bar.disable()
    assert bar.is_disabled and not bar.is_enabled
    trainer = _trainer(tmp_path, bar, Probe(bar))
    trainer.fit(Classifier(), loader(blobs(64), 32))
    assert capsys.readouterr().out == ""
    bar.enable()
    assert bar.is_enabled


def test_refresh_rate_leave_and_process_position() -> None:
    bar = TQDMProgressBar(refresh_rate=10, leave=True, process_position=1)
    assert bar.refresh_rate == 10
    assert bar.leave
    assert bar.process_position == 1


def test_a_bar_read_before_it_exists_says_so() -> None:
    with pytest.raises(TypeError, match="has not been created yet"):
        _ = TQDMProgressBar().train_progress_bar


def test_each_stages_last_bar_is_readable_after_its_stage(tmp_path: Path) -> None:
    # As Lightning keeps its closed bars: tests read n and total after fit and test.
    bar = TQDMProgressBar()
    options = {k: v for k, v in QUIET.items() if k != "enable_progress_bar"}
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[bar], default_root_dir=tmp_path, **options)
    trainer.fit(Classifier(), loader(blobs(48), 16), loader(blobs(32), 16))
    assert (bar.train_progress_bar.n, bar.train_progress_bar.total) == (3, 3)
    assert (bar.val_progress_bar.n, bar.val_progress_bar.total) == (2, 2)
    with pytest.raises(TypeError, match="test bar has not been created yet"):
        _ = bar.test_progress_bar
    trainer.test(Classifier(), loader(blobs(64), 16), verbose=False)
    assert (bar.test_progress_bar.n, bar.test_progress_bar.total) == (4, 4)
    assert bar.val_progress_bar.total == 2  # fit's, still


def test_bars_come_from_the_init_tqdm_factories(tmp_path: Path) -> None:
    made: list[str] = []

    class Recording(TQDMProgressBar):
        def init_train_tqdm(self) -> Any:
            made.append("train")
            return super().init_train_tqdm()

        def init_validation_tqdm(self) -> Any:
            made.append("validation")
            bar = super().init_validation_tqdm()
            bar.set_description("My validation")
            return bar

    bar = Recording(plain=False)
    trainer = _trainer(tmp_path, bar, Probe(bar), num_sanity_val_steps=0)
    trainer.fit(Classifier(), loader(blobs(64), 32), loader(blobs(32), 32))
    assert made == ["train", "validation"]

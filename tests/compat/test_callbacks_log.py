"""``self.log`` / ``self.log_dict`` inside a Callback's hooks, as Lightning documents."""

from __future__ import annotations

from typing import Any

import pytest

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import Callback


class Logging(Callback):
    def on_train_epoch_end(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
        self.log("from_callback", float(trainer.current_epoch), prog_bar=True)
        self.log_dict({"dict_a": 1.0, "dict_b": 2.0})

    def on_validation_epoch_end(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
        self.log("val_from_callback", 3.0)


def test_callback_log_reaches_callback_metrics_and_progress_bar() -> None:
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[Logging()], **QUIET)
    data = loader(blobs(32), 32)
    trainer.fit(Classifier(), data, data)
    metrics = trainer.callback_metrics
    assert float(metrics["from_callback"]) == 1.0
    assert float(metrics["dict_a"]) == 1.0
    assert float(metrics["dict_b"]) == 2.0
    assert float(metrics["val_from_callback"]) == 3.0
    assert float(trainer.progress_bar_metrics["from_callback"]) == 1.0


def test_callback_log_works_when_setup_is_overridden() -> None:
    class WithSetup(Logging):
        def setup(self, trainer: Any, module: Any, stage: str) -> None:
            self.stage = stage  # no super().setup()

    trainer = trainkit.Trainer(max_epochs=1, callbacks=[WithSetup()], **QUIET)
    trainer.fit(Classifier(), loader(blobs(32), 32))
    assert float(trainer.callback_metrics["from_callback"]) == 0.0


def test_callback_log_outside_a_run_says_how_to_fix() -> None:
    with pytest.raises(RuntimeError, match="outside a run"):
        Callback().log("x", 1.0)

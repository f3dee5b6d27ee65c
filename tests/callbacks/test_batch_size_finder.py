"""BatchSizeFinder: the search at fit start, then fit trains with the size found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import trainkit
from tests.helpers import QUIET
from tests.tuner.test_batch_size_scaling import Limited
from trainkit.callbacks.batch_size_finder import BatchSizeFinder


def test_fit_trains_with_the_batch_size_found(tmp_path: Path) -> None:
    model = Limited(limit=100, samples=600)
    finder = BatchSizeFinder(mode="binsearch", steps_per_trial=1)
    trainer = trainkit.Trainer(
        **{**QUIET, "default_root_dir": str(tmp_path)}, max_epochs=1, callbacks=[finder]
    )
    trainer.fit(model)
    assert finder.optimal_batch_size == 100 and model.batch_size == 100
    trained = model.sizes[-6:]  # after the trials: one epoch of 600 samples
    assert trained == [100] * 6
    assert trainer.global_step == 6 and trainer.num_training_batches == 6
    assert getattr(trainer.train_dataloader, "batch_size", None) == 100


def test_steps_per_trial_and_max_trials(tmp_path: Path) -> None:
    model = Limited(limit=1000)
    finder = BatchSizeFinder(steps_per_trial=2, max_trials=3, init_val=4)
    trainer = trainkit.Trainer(**QUIET, max_steps=1, callbacks=[finder])
    trainer.fit(model)
    assert finder.optimal_batch_size == 16
    assert model.sizes == [4, 4, 8, 8, 16, 16, 16]  # two steps a trial, then the fit's one


def test_mode_is_checked() -> None:
    with pytest.raises(ValueError, match="either of"):
        BatchSizeFinder(mode="linear")


def test_custom_hook_point(tmp_path: Path) -> None:
    class AtTrainStart(BatchSizeFinder):
        def on_fit_start(self, *args: Any) -> None:
            self.scale_batch_size(*args)

    finder = AtTrainStart(max_trials=2)
    trainkit.Trainer(**QUIET, max_steps=1, callbacks=[finder]).fit(Limited())
    assert finder.optimal_batch_size == 4

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
    finder = BatchSizeFinder(mode="binsearch", steps_per_trial=1, margin=0.0)
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


def test_binsearch_keeps_a_margin_below_the_size_found(tmp_path: Path) -> None:
    # Lightning's default margin, 5%: the largest size that ran (20) less 5%.
    model = Limited(limit=20, samples=200)
    finder = BatchSizeFinder(mode="binsearch", steps_per_trial=1)
    trainer = trainkit.Trainer(**QUIET, max_epochs=1, callbacks=[finder])
    trainer.fit(model)
    assert finder.optimal_batch_size == 19 and model.batch_size == 19
    assert getattr(trainer.train_dataloader, "batch_size", None) == 19  # fit trains with it
    assert model.sizes[-11:] == [19] * 10 + [200 - 10 * 19]  # the epoch after the search


def test_margin_is_a_fraction_and_power_mode_ignores_it() -> None:
    finder = BatchSizeFinder(mode="binsearch", steps_per_trial=1, margin=0.25)
    trainkit.Trainer(**QUIET, max_steps=1, callbacks=[finder]).fit(Limited(limit=20))
    assert finder.optimal_batch_size == 15
    power = BatchSizeFinder(mode="power", steps_per_trial=1, margin=0.25)
    trainkit.Trainer(**QUIET, max_steps=1, callbacks=[power]).fit(Limited(limit=20))
    assert power.optimal_batch_size == 16  # 2, 4, 8, 16 ran; 32 ran out of memory


@pytest.mark.parametrize("mode", ["power", "binsearch"])
def test_max_val_caps_the_batch_size(mode: str) -> None:
    model = Limited(limit=1000)
    finder = BatchSizeFinder(mode=mode, steps_per_trial=1, max_val=48, margin=0.0)
    trainer = trainkit.Trainer(**QUIET, max_steps=1, callbacks=[finder])
    trainer.fit(model)
    assert finder.optimal_batch_size == 48 and model.batch_size == 48
    assert model.sizes[-1] == 48  # the fit's step


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"margin": 1.0}, "margin"),
        ({"margin": -0.1}, "margin"),
        ({"max_val": 0}, "max_val"),
        ({"init_val": 64, "max_val": 32}, "init_val"),
    ],
)
def test_margin_and_max_val_are_checked(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BatchSizeFinder(**arguments)

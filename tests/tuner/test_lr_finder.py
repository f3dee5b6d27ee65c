"""The learning rate finder (Tuner.lr_find): its schedule, results, suggestion and clean-up."""

from __future__ import annotations

import math
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, BlobData, Classifier, blobs, loader
from trainkit.callbacks.base import Callback
from trainkit.tuner import Tuner
from trainkit.tuner.lr_finder import LRFinder, learning_rates


def _trainer(tmp_path: Path, **kwargs: Any) -> trainkit.Trainer:
    options = {**QUIET, "default_root_dir": str(tmp_path), "max_epochs": 1, **kwargs}
    return trainkit.Trainer(**options)


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_schedules_start_at_min_lr_and_end_at_max_lr() -> None:
    exponential = learning_rates("exponential", 1e-4, 1.0, 5)
    assert exponential == [1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    assert learning_rates("linear", 0.0, 1.0, 5) == [0.0, 0.25, 0.5, 0.75, 1.0]
    with pytest.raises(ValueError, match="either of"):
        learning_rates("cosine", 1e-4, 1.0, 5)
    with pytest.raises(ValueError, match="0 < min_lr < max_lr"):
        learning_rates("exponential", 0.0, 1.0, 5)


def test_results_hold_one_point_per_step_with_the_learning_rate_used(tmp_path: Path) -> None:
    seen: list[float] = []

    class Watch(Classifier):
        def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
            seen.append(self.trainer.optimizers[0].param_groups[0]["lr"])

    model = Watch()
    data = blobs(64)  # 4 batches an epoch: the search runs over several epochs
    result = Tuner(_trainer(tmp_path)).lr_find(
        model,
        loader(data, 16),
        min_lr=1e-3,
        max_lr=1.0,
        num_training=10,
        mode="linear",
        early_stop_threshold=None,
        update_attr=False,
    )
    assert result is not None
    expected = learning_rates("linear", 1e-3, 1.0, 10)
    assert result.results["lr"] == expected == seen
    assert len(result.results["loss"]) == 10
    assert all(math.isfinite(loss) for loss in result.results["loss"])


class ManualOneCycle(Classifier):
    """Steps its optimizer and its own one-cycle schedule in training_step (sized to the fit)."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.seen: list[tuple[str, int, float]] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        optimizer, schedule = self.optimizers(), self.lr_schedulers()
        lr = optimizer.param_groups[0]["lr"]
        optimizer.zero_grad()
        loss = super().training_step(batch, batch_idx)
        self.manual_backward(loss)
        optimizer.step()
        self.seen.append((type(schedule).__name__, self.trainer.global_step, lr))
        schedule.step()
        return loss  # the finder records it

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        total = int(self.trainer.estimated_stepping_batches)
        schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=total)
        return {"optimizer": optimizer, "lr_scheduler": schedule}


def test_manual_optimization_counts_its_steps_and_steps_the_finders_schedule(
    tmp_path: Path,
) -> None:
    model = ManualOneCycle()
    trainer = _trainer(tmp_path)
    result = Tuner(trainer).lr_find(
        model, loader(blobs(64), 16), num_training=6, early_stop_threshold=None, update_attr=False
    )
    assert result is not None and len(result.results["lr"]) == 6
    expected = learning_rates("exponential", 1e-8, 1.0, 6)
    # The search's steps count, and lr_schedulers() is its sweep (the Module's
    # one-cycle schedule of 4 steps would fail if stepped 6 times).
    assert [(name, step) for name, step, _ in model.seen] == [("_SweepLR", s) for s in range(1, 7)]
    assert [lr for *_, lr in model.seen] == pytest.approx(expected)
    assert trainer.global_step == 0 and model.lr_schedulers().last_epoch == 0
    model.seen.clear()
    trainer.fit(model, loader(blobs(64), 16))  # then the fit runs the Module's own schedule
    assert [name for name, *_ in model.seen] == ["OneCycleLR"] * 4


def test_suggestion_is_the_steepest_descent() -> None:
    finder = LRFinder("linear", 0.1, 0.8, 8)
    finder.results = {
        "lr": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
        # Falls fastest around 0.4 (central slopes -1, -1.5, -3.5, -6.5, -5, -1.5, -1);
        # the last point (skip_end=1) diverges.
        "loss": [3.0, 2.9, 2.7, 2.2, 1.4, 1.2, 1.1, 9.0],
    }
    assert finder.suggestion(skip_begin=0) == 0.4
    assert finder._optimal_idx == 3
    assert finder.suggestion(skip_begin=4) == 0.5  # the steepest of the points left
    finder.results["loss"][6] = math.nan  # non-finite points are left out
    assert finder.suggestion(skip_begin=0) == 0.4
    with pytest.warns(UserWarning, match="at least 2 are needed"):
        assert finder.suggestion(skip_begin=6) is None


class _NoLR(Classifier):
    """Keeps its learning rate nowhere the finder looks."""

    def __init__(self) -> None:
        super().__init__()
        self.hparams.pop("lr")

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class _WithLR(_NoLR):
    def __init__(self) -> None:
        super().__init__()
        self.lr = 0.5


class _WithLearningRate(_NoLR):
    def __init__(self) -> None:
        super().__init__()
        self.learning_rate = 0.5


class _WithCustom(_NoLR):
    def __init__(self) -> None:
        super().__init__()
        self.my_lr = 0.5


@pytest.mark.parametrize(
    ("model_class", "attr_name", "read"),
    [
        (Classifier, "", lambda m: m.hparams.lr),
        (_WithLR, "", lambda m: m.lr),
        (_WithLearningRate, "", lambda m: m.learning_rate),
        (_WithCustom, "my_lr", lambda m: m.my_lr),
    ],
)
def test_update_attr_sets_the_suggestion(
    tmp_path: Path, model_class: type[Classifier], attr_name: str, read: Any
) -> None:
    model = model_class()
    trainer = _trainer(tmp_path)
    result = Tuner(trainer).lr_find(
        model, loader(blobs(256), 16), num_training=30, min_lr=1e-4, attr_name=attr_name
    )
    assert result is not None
    suggestion = result.suggestion()
    assert suggestion is not None and read(model) == suggestion
    assert trainer.optimizers[0].param_groups[0]["lr"] == suggestion


def test_update_attr_without_an_attribute_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(AttributeError, match=r"attr_name=\.\.\., or pass update_attr=False"):
        Tuner(_trainer(tmp_path)).lr_find(_NoLR(), loader(blobs(64), 16), num_training=5)
    with pytest.raises(AttributeError, match="attr_name='nope'"):
        Tuner(_trainer(tmp_path)).lr_find(
            Classifier(), loader(blobs(64), 16), num_training=5, attr_name="nope"
        )


def test_divergence_stops_the_search_early(tmp_path: Path) -> None:
    result = Tuner(_trainer(tmp_path)).lr_find(
        Classifier(),
        loader(blobs(256), 16),
        min_lr=1e-2,
        max_lr=1e6,
        num_training=60,
        update_attr=False,
    )
    assert result is not None
    count = len(result.results["loss"])
    assert 2 <= count < 60
    assert len(result.results["lr"]) == count
    losses = result.results["loss"]
    assert not math.isfinite(losses[-1]) or losses[-1] > 4.0 * min(losses[:-1])


class _Counting(Callback):
    def __init__(self) -> None:
        self.batches = 0

    def on_train_batch_end(self, *args: Any) -> None:
        self.batches += 1

    def state_dict(self) -> dict[str, Any]:
        return {"batches": self.batches}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.batches = state["batches"]


def test_tuning_leaves_the_run_and_the_folder_as_they_were(tmp_path: Path) -> None:
    counting = _Counting()
    trainer = trainkit.Trainer(
        default_root_dir=str(tmp_path),
        max_epochs=1,
        enable_progress_bar=False,
        accelerator="cpu",
        callbacks=[counting],
    )  # the default TensorBoard logger and ModelCheckpoint: neither may write
    model = Classifier()
    before = _state(model)
    rng = torch.get_rng_state()
    Tuner(trainer).lr_find(model, loader(blobs(128), 16), num_training=20, update_attr=False)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert trainer.optimizers[0].state_dict()["state"] == {}
    assert trainer.optimizers[0].param_groups[0]["lr"] == 0.1
    assert (trainer.global_step, trainer.current_epoch) == (0, 0)
    assert counting.batches == 0
    assert trainer.logged_metrics == {} and trainer.callback_metrics == {}
    assert torch.equal(torch.get_rng_state(), rng)
    assert list(tmp_path.iterdir()) == []


def test_a_search_draws_nothing_from_the_random_state(tmp_path: Path) -> None:
    # A Module whose dataloader hook draws its data: the draws are undone with the rest,
    # so a second search sees the same data and finds the same, as in Lightning.
    class DrawsItsData(Classifier):
        def train_dataloader(self) -> Any:
            features = torch.randn(128, 8)
            return loader(torch.utils.data.TensorDataset(features, (features[:, 0] > 0).long()), 16)

    model = DrawsItsData()
    rng = torch.get_rng_state()
    first, second = (
        Tuner(_trainer(tmp_path)).lr_find(model, num_training=10, early_stop_threshold=None)
        for _ in range(2)
    )
    assert first is not None and second is not None
    assert first.results == second.results
    assert torch.equal(torch.get_rng_state(), rng)


def test_datamodule_and_method(tmp_path: Path) -> None:
    model = Classifier()
    result = Tuner(_trainer(tmp_path)).lr_find(
        model, datamodule=BlobData(), num_training=12, update_attr=False
    )
    assert result is not None and len(result.results["lr"]) == 12
    with pytest.raises(ValueError, match="method='fit' is the only"):
        Tuner(_trainer(tmp_path)).lr_find(model, method="validate")


def test_plot_draws_the_curve_or_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    finder = LRFinder("exponential", 1e-3, 1.0, 20)
    finder.results = {
        "lr": learning_rates("exponential", 1e-3, 1.0, 20),
        "loss": [3.0 - 0.1 * i * i for i in range(20)],
    }
    calls: list[tuple[str, Any]] = []

    class Axes:
        figure = "figure"

        def __getattr__(self, name: str) -> Any:
            return lambda *args, **kwargs: calls.append((name, args))

    pyplot = types.ModuleType("matplotlib.pyplot")
    pyplot.subplots = lambda: ("new figure", Axes())  # type: ignore[attr-defined]
    pyplot.show = lambda: calls.append(("show", ()))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "matplotlib", types.ModuleType("matplotlib"))
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", pyplot)
    assert finder.plot(suggest=True, show=True) == "new figure"
    names = [name for name, _ in calls]
    assert names == ["plot", "set_xscale", "set_xlabel", "set_ylabel", "plot", "show"]
    assert calls[0][1] == (finder.results["lr"], finder.results["loss"])
    assert calls[4][1][0] == finder.suggestion()
    assert finder.plot(ax=Axes()) == "figure"
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ModuleNotFoundError, match="pip install matplotlib"):
        finder.plot()


def test_fast_dev_run_skips_the_search_and_says_so(tmp_path: Path) -> None:
    tuner = Tuner(trainkit.Trainer(fast_dev_run=True, default_root_dir=tmp_path, **QUIET))
    with pytest.warns(UserWarning, match="Skipping learning rate finder since `fast_dev_run`"):
        assert tuner.lr_find(Classifier(), loader(blobs(32), 16)) is None

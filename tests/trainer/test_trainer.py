"""Trainer.fit / validate / test / predict on one device: training works, limits hold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset

import trainkit
from tests.helpers import QUIET, BlobData, Classifier, blobs, loader


class CountingClassifier(Classifier):
    """Counts the batches each step method sees."""

    def __init__(self) -> None:
        super().__init__()
        self.counts = {"train": 0, "val": 0, "test": 0, "predict": 0}

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.counts["train"] += 1
        return super().training_step(batch, batch_idx)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.counts["val"] += 1
        super().validation_step(batch, batch_idx)

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self.counts["test"] += 1
        super().test_step(batch, batch_idx)

    def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.counts["predict"] += 1
        return super().predict_step(batch, batch_idx)


def test_fit_learns_a_synthetic_task() -> None:
    torch.manual_seed(0)
    model = Classifier(lr=0.2)
    train, val = loader(blobs(1024, seed=0), 32, shuffle=True), loader(blobs(300, seed=1), 100)
    trainer = trainkit.Trainer(max_epochs=8, **QUIET)
    before = trainer.validate(model, val)[0]
    trainer.fit(model, train, val)
    after = trainer.validate(model, val)[0]
    assert after["val/loss"] < 0.5 * before["val/loss"]
    # The classes are a linear function of the inputs: a trained MLP separates them.
    assert after["val/acc"] >= 0.9, after
    assert trainer.global_step == 8 * 32
    assert trainer.current_epoch == 8


def test_fit_with_a_datamodule_and_validate_test_predict() -> None:
    torch.manual_seed(0)
    data = BlobData()
    model = Classifier()
    trainer = trainkit.Trainer(max_epochs=2, **QUIET)
    trainer.fit(model, datamodule=data)
    assert data.calls[:2] == ["prepare_data", "setup:fit"]
    validated = trainer.validate(model, datamodule=data)
    tested = trainer.test(model, data)
    assert set(validated[0]) == {"val/loss", "val/acc"}
    assert set(tested[0]) == {"test/loss", "test/acc"}
    # Same data, same weights: the same numbers.
    assert tested[0]["test/acc"] == pytest.approx(validated[0]["val/acc"])
    predictions = trainer.predict(model, datamodule=data)
    assert len(predictions) == 4 and predictions[0].shape == (50,)
    assert "setup:predict" in data.calls


def test_evaluation_metrics_are_exact_dataset_means_with_an_uneven_last_batch() -> None:
    torch.manual_seed(0)
    model = Classifier()
    data = blobs(103, seed=3)
    trainer = trainkit.Trainer(**QUIET)
    result = trainer.validate(model, loader(data, 25))[0]
    with torch.no_grad():
        x, y = data.tensors
        expected = (model(x).argmax(dim=1) == y).float().mean().item()
    assert result["val/acc"] == pytest.approx(expected, abs=1e-6)


def test_predict_with_several_dataloaders_returns_one_list_each() -> None:
    class TwoLoaders(Classifier):
        def predict_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
            return dataloader_idx

    trainer = trainkit.Trainer(**QUIET)
    out = trainer.predict(TwoLoaders(), [loader(blobs(64), 32), loader(blobs(96), 32)])
    assert out == [[0, 0], [1, 1, 1]]
    with pytest.raises(TypeError, match="add a `dataloader_idx: int = 0` parameter"):
        trainer.predict(Classifier(), [loader(blobs(64), 32), loader(blobs(96), 32)])


def test_several_validation_dataloaders_get_suffixed_metrics() -> None:
    class TwoLoaders(Classifier):
        def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
            self._evaluate(batch, "val")

    trainer = trainkit.Trainer(**QUIET)
    results = trainer.validate(TwoLoaders(), [loader(blobs(64), 32), loader(blobs(64, seed=5), 32)])
    assert set(results[0]) == {"val/loss/dataloader_idx_0", "val/acc/dataloader_idx_0"}
    assert set(results[1]) == {"val/loss/dataloader_idx_1", "val/acc/dataloader_idx_1"}


def test_max_steps_stops_in_the_middle_of_an_epoch() -> None:
    model = CountingClassifier()
    trainer = trainkit.Trainer(max_steps=5, **QUIET)
    trainer.fit(model, loader(blobs(320), 32))  # 10 batches an epoch
    assert trainer.global_step == 5
    assert model.counts["train"] == 5
    assert trainer.current_epoch == 1  # the interrupted epoch still ends


def test_max_steps_across_epochs_without_max_epochs() -> None:
    model = CountingClassifier()
    trainer = trainkit.Trainer(max_steps=25, **QUIET)
    trainer.fit(model, loader(blobs(320), 32))
    assert trainer.global_step == 25 and trainer.current_epoch == 3


def test_max_epochs_zero_trains_nothing() -> None:
    model = CountingClassifier()
    trainkit.Trainer(max_epochs=0, **QUIET).fit(model, loader(blobs(64), 32))
    assert model.counts["train"] == 0


def test_should_stop_set_in_a_step_ends_training_after_that_batch() -> None:
    class StopAtFour(CountingClassifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            if self.global_step == 3:
                self.trainer.should_stop = True
            return super().training_step(batch, batch_idx)

    model = StopAtFour()
    trainer = trainkit.Trainer(max_epochs=5, **QUIET)
    trainer.fit(model, loader(blobs(320), 32))
    assert model.counts["train"] == 4 and trainer.global_step == 4


@pytest.mark.parametrize(
    ("stop_at", "options", "expected"),
    [
        # A stop in the middle of epoch 1 validates there, on the final weights.
        ((1, 2), {}, [(0, 10), (1, 13)]),
        # Once, when that batch's validation was due anyway (every 3 batches).
        ((1, 2), {"val_check_interval": 3}, [(0, 3), (0, 6), (0, 9), (1, 13)]),
        # Not in an epoch that does not validate (check_val_every_n_epoch=2: epochs 1, 3).
        ((0, 2), {"check_val_every_n_epoch": 2}, []),
        ((1, 2), {"check_val_every_n_epoch": 2}, [(1, 13)]),
        # A stop held back by min_steps validates when the minimum lets it happen.
        ((1, 2), {"min_steps": 15}, [(0, 10), (1, 15)]),
        # max_steps is a limit, not a stop request: no extra validation.
        (None, {"max_steps": 13}, [(0, 10)]),
    ],
)
def test_a_stop_requested_mid_epoch_validates_before_training_ends(
    stop_at: tuple[int, int] | None, options: dict[str, Any], expected: list[tuple[int, int]]
) -> None:
    runs: list[tuple[int, int]] = []

    class StopAt(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            if (self.current_epoch, batch_idx) == stop_at:
                self.trainer.should_stop = True
            return super().training_step(batch, batch_idx)

        def on_validation_epoch_end(self) -> None:
            runs.append((self.current_epoch, self.global_step))

    trainer = trainkit.Trainer(**{"max_epochs": 5, "num_sanity_val_steps": 0, **QUIET, **options})
    trainer.fit(StopAt(), loader(blobs(320), 32), loader(blobs(64), 32))  # 10 batches an epoch
    assert runs == expected
    stopped_in = stop_at[0] if stop_at is not None else 1
    assert trainer.current_epoch == stopped_in + 1  # the interrupted epoch still ends


def test_max_time_validates_once_before_training_ends() -> None:
    runs: list[int] = []

    class Record(trainkit.Callback):
        def on_validation_end(self, trainer: trainkit.Trainer, module: Any) -> None:
            runs.append(trainer.global_step)

    # A deadline already passed stops after the first batch, which validates first.
    trainer = trainkit.Trainer(
        max_time={"microseconds": 1}, num_sanity_val_steps=0, callbacks=[Record()], **QUIET
    )
    trainer.fit(Classifier(), loader(blobs(320), 32), loader(blobs(64), 32))
    assert trainer.global_step == 1 and runs == [1]
    assert "val/loss" in trainer.callback_metrics


@pytest.mark.parametrize(
    ("interval", "expected_val_runs"),
    # A fraction f validates every int(f * batches) batches, at least 1: 0.25 of 10 is
    # every 2, 0.0 every batch (as in Lightning).
    [(1.0, 3), (0.5, 6), (0.25, 15), (0.0, 30), (4, 6), (10, 3)],
)
def test_val_check_interval(interval: float, expected_val_runs: int) -> None:
    runs: list[tuple[int, int]] = []

    class Record(trainkit.Callback):
        def on_validation_start(self, trainer: trainkit.Trainer, module: Any) -> None:
            if not trainer.sanity_checking:
                runs.append((trainer.current_epoch, trainer.global_step))

    trainer = trainkit.Trainer(
        max_epochs=3,
        val_check_interval=interval,
        callbacks=[Record()],
        num_sanity_val_steps=0,
        **QUIET,
    )
    trainer.fit(Classifier(), loader(blobs(320), 32), loader(blobs(64), 32))  # 10 batches/epoch
    assert len(runs) == expected_val_runs, runs
    if interval == 4:
        assert [step for _, step in runs] == [4, 8, 14, 18, 24, 28]


def test_val_check_interval_counted_across_epochs() -> None:
    steps: list[int] = []

    class Record(trainkit.Callback):
        def on_validation_start(self, trainer: trainkit.Trainer, module: Any) -> None:
            steps.append(trainer.global_step)

    trainer = trainkit.Trainer(
        max_epochs=3,
        val_check_interval=15,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        callbacks=[Record()],
        **QUIET,
    )
    trainer.fit(Classifier(), loader(blobs(320), 32), loader(blobs(64), 32))
    assert steps == [15, 30]


def test_check_val_every_n_epoch() -> None:
    epochs: list[int] = []

    class Record(trainkit.Callback):
        def on_validation_end(self, trainer: trainkit.Trainer, module: Any) -> None:
            epochs.append(trainer.current_epoch)

    trainer = trainkit.Trainer(
        max_epochs=6,
        check_val_every_n_epoch=3,
        num_sanity_val_steps=0,
        callbacks=[Record()],
        **QUIET,
    )
    trainer.fit(Classifier(), loader(blobs(64), 32), loader(blobs(64), 32))
    assert epochs == [2, 5]


def test_limit_batches_int_and_float() -> None:
    model = CountingClassifier()
    trainer = trainkit.Trainer(
        max_epochs=2, limit_train_batches=3, limit_val_batches=0.5, num_sanity_val_steps=0, **QUIET
    )
    trainer.fit(model, loader(blobs(320), 32), loader(blobs(320), 32))
    assert model.counts["train"] == 6 and model.counts["val"] == 10
    assert trainer.num_training_batches == 3
    trainer = trainkit.Trainer(limit_test_batches=2, limit_predict_batches=0.3, **QUIET)
    trainer.test(model, loader(blobs(320), 32))
    trainer.predict(model, loader(blobs(320), 32))
    assert model.counts["test"] == 2 and model.counts["predict"] == 3
    # A whole float above 1 is a number of batches, as Lightning reads it (2.0, 1e50).
    trainer = trainkit.Trainer(limit_test_batches=2.0, limit_predict_batches=1e50, **QUIET)
    assert (trainer.limit_test_batches, trainer.limit_predict_batches) == (2, int(1e50))
    trainer.test(model, loader(blobs(320), 32))
    assert model.counts["test"] == 4


def test_limit_val_batches_zero_disables_validation() -> None:
    model = CountingClassifier()
    trainer = trainkit.Trainer(max_epochs=2, limit_val_batches=0, **QUIET)
    trainer.fit(model, loader(blobs(64), 32), loader(blobs(64), 32))
    assert model.counts["val"] == 0


@pytest.mark.parametrize("fast_dev_run", [True, 3])
def test_fast_dev_run_runs_a_few_batches_of_each_stage(
    fast_dev_run: bool | int, tmp_path: Any
) -> None:
    model = CountingClassifier()
    trainer = trainkit.Trainer(
        fast_dev_run=fast_dev_run,
        max_epochs=10,
        default_root_dir=tmp_path,
        enable_progress_bar=False,
        accelerator="cpu",
    )
    trainer.fit(model, loader(blobs(320), 32), loader(blobs(320), 32))
    n = int(fast_dev_run)
    assert model.counts == {"train": n, "val": n, "test": 0, "predict": 0}
    assert trainer.global_step == n
    # The default logger is one DummyLogger (as Lightning's): it writes nothing.
    assert [type(logger).__name__ for logger in trainer.loggers] == ["DummyLogger"]
    assert not any(tmp_path.iterdir())


def test_sanity_check_runs_num_sanity_val_steps_batches_and_is_not_reported() -> None:
    model = CountingClassifier()
    trainer = trainkit.Trainer(max_epochs=1, num_sanity_val_steps=2, limit_train_batches=1, **QUIET)
    trainer.fit(model, loader(blobs(64), 32), loader(blobs(320), 32))
    assert model.counts["val"] == 2 + 10


def test_iterable_dataset_without_length() -> None:
    class Stream(IterableDataset[tuple[torch.Tensor, torch.Tensor]]):
        def __iter__(self) -> Any:
            x, y = blobs(96).tensors
            return iter(zip(x, y, strict=True))

    model = CountingClassifier()
    trainer = trainkit.Trainer(max_epochs=2, num_sanity_val_steps=0, **QUIET)
    trainer.fit(model, DataLoader(Stream(), batch_size=32), DataLoader(Stream(), batch_size=32))
    assert model.counts["train"] == 6 and model.counts["val"] == 6


def test_evaluation_runs_without_gradients_and_restores_train_modes() -> None:
    # Inside fit under torch.no_grad, as Lightning (a tensor made there may meet
    # autograd in training); in validate/test under torch.inference_mode.
    seen: dict[str, bool] = {}

    class Probe(Classifier):
        def __init__(self) -> None:
            super().__init__()
            self.frozen_norm = torch.nn.BatchNorm1d(8)
            self.frozen_norm.eval()  # the user froze it: trainkit must leave it in eval

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            stage = self.trainer.state.fn.value  # "fit" or "validate"
            seen[f"inference in {stage}"] = torch.is_inference_mode_enabled()
            seen[f"grad in {stage}"] = torch.is_grad_enabled()
            seen["training"] = self.training
            super().validation_step(batch, batch_idx)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            seen["train_mode_in_training"] = self.training
            seen["grad_in_training"] = torch.is_grad_enabled()
            return super().training_step(batch, batch_idx)

    model = Probe()
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(model, loader(blobs(64), 32), loader(blobs(64), 32))
    trainer.validate(model, loader(blobs(64), 32), verbose=False)
    assert seen == {
        "inference in fit": False,
        "grad in fit": False,
        "inference in validate": True,
        "grad in validate": False,
        "training": False,
        "train_mode_in_training": True,
        "grad_in_training": True,
    }
    assert model.training and not model.frozen_norm.training


def test_evaluation_hooks_run_without_gradients_as_the_steps_do() -> None:
    # As Lightning: the whole evaluation run, so that a forward pass in
    # on_validation_epoch_end builds no graph (.numpy() on it works).
    seen: dict[str, bool] = {}
    hooks = ["start", "epoch_start", "epoch_end", "end"]

    class Probe(Classifier):
        def _note(self, name: str) -> None:
            stage = self.trainer.state.fn.value
            seen[f"{name} in {stage}"] = torch.is_grad_enabled()

        def on_validation_epoch_end(self) -> None:
            self._note("on_validation_epoch_end")
            x = torch.zeros(2, 8)
            self(x).numpy()  # raises on a tensor that requires grad

    for stage in ("validation", "test", "predict"):
        for hook in hooks:
            name = f"on_{stage}_{hook}"
            if name != "on_validation_epoch_end":
                setattr(Probe, name, lambda self, name=name: self._note(name))
    model = Probe()
    trainer = trainkit.Trainer(max_epochs=1, num_sanity_val_steps=0, **QUIET)
    trainer.fit(model, loader(blobs(64), 32), loader(blobs(64), 32))
    trainer.validate(model, loader(blobs(64), 32), verbose=False)
    trainer.test(model, loader(blobs(64), 32), verbose=False)
    trainer.predict(model, loader(blobs(64), 32))
    assert len(seen) == 4 * 2 + 4 + 4  # each hook, in fit and validate for validation's
    assert not any(seen.values()), seen


def test_fit_trains_with_autograd_on_when_the_caller_left_it_off() -> None:
    # A generator suspended inside torch.no_grad (an inference loop read in part)
    # leaves autograd off for whatever runs next; fit trains anyway, as Lightning's
    # does, and leaves it on.
    def predictions() -> Any:
        with torch.no_grad():
            yield from range(3)

    pending = predictions()
    next(pending)
    assert not torch.is_grad_enabled()
    try:
        model = Classifier()
        before = [p.detach().clone() for p in model.parameters()]
        trainkit.Trainer(max_epochs=1, **QUIET).fit(model, loader(blobs(64), 32))
        assert torch.is_grad_enabled()
        assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    finally:
        torch.set_grad_enabled(True)
        pending.close()


def test_dict_output_and_extra_entries_reach_on_train_batch_end() -> None:
    outputs: list[Any] = []

    class DictOut(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> Any:
            return {"loss": super().training_step(batch, batch_idx), "extra": batch_idx}

        def on_train_batch_end(self, out: Any, batch: Any, batch_idx: int) -> None:
            outputs.append(out)

    trainkit.Trainer(max_epochs=1, **QUIET).fit(DictOut(), loader(blobs(64), 32))
    assert [o["extra"] for o in outputs] == [0, 1]
    assert all(isinstance(o["loss"], torch.Tensor) for o in outputs)


def test_manual_optimization() -> None:
    class Manual(Classifier):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch: Any, batch_idx: int) -> None:
            optimizer = self.optimizers()
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self(x), y)
            optimizer.zero_grad()
            self.manual_backward(loss)
            if batch_idx % 2 == 1:  # step every other batch
                optimizer.step()

    model = Manual()
    before = [p.detach().clone() for p in model.parameters()]
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(model, loader(blobs(128), 32))
    assert trainer.global_step == 2  # counted in optimizer steps
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_module_properties_inside_a_run() -> None:
    seen: list[tuple[int, int, str]] = []

    class Probe(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            seen.append((self.current_epoch, self.global_step, self.device.type))
            return super().training_step(batch, batch_idx)

    trainkit.Trainer(max_epochs=2, **QUIET).fit(Probe(), loader(blobs(64), 32))
    assert seen == [(0, 0, "cpu"), (0, 1, "cpu"), (1, 2, "cpu"), (1, 3, "cpu")]


def test_seed_makes_runs_repeatable() -> None:
    def run() -> list[torch.Tensor]:
        trainer = trainkit.Trainer(max_epochs=1, seed=123, **QUIET)
        model = Classifier()
        trainer.fit(model, loader(blobs(128), 32, shuffle=True))
        return [p.detach().clone() for p in model.parameters()]

    assert all(torch.equal(a, b) for a, b in zip(run(), run(), strict=True))


class PreparingClassifier(Classifier):
    """Records its prepare_data and setup calls in the DataModule's list."""

    def __init__(self, calls: list[str]) -> None:
        super().__init__()
        self.calls = calls

    def prepare_data(self) -> None:
        self.calls.append("module.prepare_data")

    def setup(self, stage: str) -> None:
        self.calls.append(f"module.setup:{stage.value}")


def test_the_module_prepare_data_runs_after_the_datamodules_before_setup() -> None:
    # Lightning's order, at the start of every stage: downloads, then setup.
    data = BlobData()
    model = PreparingClassifier(data.calls)
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    for stage, run in (
        ("fit", lambda: trainer.fit(model, datamodule=data)),
        ("validate", lambda: trainer.validate(model, datamodule=data)),
        ("test", lambda: trainer.test(model, datamodule=data)),
        ("predict", lambda: trainer.predict(model, datamodule=data)),
    ):
        data.calls.clear()
        run()
        assert data.calls[:4] == [
            "prepare_data",
            "module.prepare_data",
            f"setup:{stage}",
            f"module.setup:{stage}",
        ], stage


@pytest.mark.parametrize("per_node", [True, False])
def test_prepare_data_per_node_false_prepares_only_on_the_first_node(
    per_node: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This process is local rank 0 of the second node: it prepares its node's copy,
    # unless the data is prepared once per job (a folder every node shares).
    monkeypatch.setenv("NODE_RANK", "1")
    data = BlobData()
    model = PreparingClassifier(data.calls)
    data.prepare_data_per_node = model.prepare_data_per_node = per_node
    trainkit.Trainer(max_epochs=1, **QUIET).fit(model, datamodule=data)
    prepared = [call for call in data.calls if call.endswith("prepare_data")]
    assert prepared == (["prepare_data", "module.prepare_data"] if per_node else [])


def test_a_failed_run_calls_the_datamodules_on_exception_after_the_callbacks() -> None:
    calls: list[str] = []

    class Failing(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> Any:
            raise ValueError("broken step")

    class Seeing(BlobData):
        def on_exception(self, exception: BaseException) -> None:
            calls.append(f"datamodule: {exception}")

    class Watcher(trainkit.Callback):
        def on_exception(self, trainer: Any, module: Any, exception: BaseException) -> None:
            calls.append(f"callback: {exception}")

    trainer = trainkit.Trainer(max_epochs=1, **{**QUIET, "callbacks": [Watcher()]})
    with pytest.raises(ValueError, match="broken step"):
        trainer.fit(Failing(), datamodule=Seeing())
    assert calls == ["callback: broken step", "datamodule: broken step"]
    assert Seeing.name is None and Seeing.CHECKPOINT_HYPER_PARAMS_KEY == (
        "datamodule_hyper_parameters"
    )


def test_on_validation_model_zero_grad_runs_before_validation_outside_an_accumulation_window() -> (
    None
):
    # Lightning's order, checked against Lightning with this same set-up: the hook runs
    # before each validation inside fit that follows an optimizer step.
    calls: list[str] = []

    class Recording(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            calls.append(f"train {batch_idx}")
            return super().training_step(batch, batch_idx)

        def on_validation_model_zero_grad(self) -> None:
            calls.append("zero_grad")
            super().on_validation_model_zero_grad()

    trainer = trainkit.Trainer(
        max_epochs=1,
        limit_train_batches=4,
        limit_val_batches=1,
        accumulate_grad_batches=2,
        val_check_interval=1,
        num_sanity_val_steps=0,
        **QUIET,
    )
    trainer.fit(Recording(), datamodule=BlobData())
    assert calls == ["train 0", "train 1", "zero_grad", "train 2", "train 3", "zero_grad"]


def test_trainer_datamodule_is_the_one_each_entry_point_was_given() -> None:
    # As Lightning's: a step reads the DataModule of the run it is in (a predict_step
    # reading its predict dataset's statistics, say), and it stays after the run.
    class Seen(Classifier):
        def __init__(self) -> None:
            super().__init__()
            self.seen: dict[str, Any] = {}

        def _record(self, stage: str) -> None:
            self.seen[stage] = self.trainer.datamodule

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self._record("validate")

        def test_step(self, batch: Any, batch_idx: int) -> None:
            self._record("test")

        def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            self._record("predict")
            return super().predict_step(batch, batch_idx)

    fitted, validated, tested, predicted = BlobData(), BlobData(), BlobData(), BlobData()
    model = Seen()
    trainer = trainkit.Trainer(max_epochs=1, limit_train_batches=2, **QUIET)
    trainer.predict(model, datamodule=predicted)
    assert model.seen["predict"] is predicted and trainer.datamodule is predicted
    trainer.fit(model, datamodule=fitted)
    trainer.validate(model, datamodule=validated, verbose=False)
    trainer.test(model, datamodule=tested, verbose=False)
    assert (model.seen["validate"], model.seen["test"]) == (validated, tested)
    assert trainer.datamodule is tested and tested.trainer is trainer
    trainer.predict(model, loader(blobs(64)))  # no DataModule given: the last one stays
    assert trainer.datamodule is tested


def test_loggers_assigned_on_the_trainer_are_the_ones_written_to(tmp_path: Path) -> None:
    # As Lightning's setters: trainer.loggers = [...] and trainer.logger = x / None.
    from trainkit.loggers import CSVLogger

    def fit(trainer: trainkit.Trainer) -> None:
        trainer.fit(Classifier(), loader(blobs(64)))

    quiet = {name: value for name, value in QUIET.items() if name != "logger"}
    options = {**quiet, "max_epochs": 1, "log_every_n_steps": 1}
    trainer = trainkit.Trainer(logger=CSVLogger(tmp_path, name="given"), **options)
    trainer.loggers = [CSVLogger(tmp_path, name="assigned")]
    fit(trainer)
    trainer = trainkit.Trainer(logger=CSVLogger(tmp_path, name="removed"), **options)
    trainer.logger = None
    assert trainer.loggers == [] and trainer.logger is None
    fit(trainer)
    trainer = trainkit.Trainer(logger=False, **options)
    trainer.logger = CSVLogger(tmp_path, name="added")
    fit(trainer)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["added", "assigned"]
    assert (tmp_path / "assigned" / "version_0" / "metrics.csv").read_text().count("\n") > 2

    class Swap(trainkit.Callback):  # while fit runs: written to from the next value on
        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            if trainer.current_epoch == 0:
                trainer.loggers = [CSVLogger(tmp_path, name="swapped")]

    trainer = trainkit.Trainer(logger=False, callbacks=[Swap()], **{**options, "max_epochs": 2})
    fit(trainer)
    rows = (tmp_path / "swapped" / "version_0" / "metrics.csv").read_text().splitlines()
    assert rows[0] == "epoch,step,train/loss" and {row.split(",")[0] for row in rows[1:]} == {"1"}


def test_a_home_relative_default_root_dir_is_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As Lightning: "~/runs" is the home folder's runs, never a folder named "~".
    monkeypatch.setenv("HOME", str(tmp_path))
    trainer = trainkit.Trainer(default_root_dir="~/runs", max_epochs=1, **QUIET)
    assert trainer.default_root_dir == str(tmp_path / "runs")


def test_setup_and_teardown_get_lightnings_trainer_fn_as_the_stage() -> None:
    # As Lightning passes it: code reads stage.value; it still equals "fit".
    from trainkit.lightning.trainer.states import TrainerFn

    stages: list[Any] = []

    class Recording(Classifier):
        def setup(self, stage: str) -> None:
            stages.append(stage)

        def teardown(self, stage: str) -> None:
            stages.append(stage)

    trainkit.Trainer(max_epochs=1, **QUIET).fit(Recording(), loader(blobs(32), 16))
    assert stages == [TrainerFn.FITTING, TrainerFn.FITTING]
    assert stages[0].value == "fit" and stages[0] == "fit"

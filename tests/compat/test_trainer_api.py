"""Lightning's documented Trainer properties, arguments and entry points, under trainkit."""

from __future__ import annotations

import math
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from trainkit.callbacks import EarlyStopping, ModelCheckpoint, TQDMProgressBar
from trainkit.loops.state import RunningStage, TrainerFn, TrainerStatus

from ..helpers import NONE_FOR_THE_DEFAULT, QUIET, Classifier, blobs, loader


def fit_quietly(trainer: trainkit.Trainer, model: trainkit.Module, n: int = 64) -> None:
    trainer.fit(model, loader(blobs(n), 16), loader(blobs(32), 16))


# ----------------------------------------------------------------- state
def test_state_during_and_after_fit() -> None:
    seen: dict[str, Any] = {}

    class Probe(Classifier):
        def on_train_start(self) -> None:
            t = self.trainer
            seen["train"] = (t.state.fn, t.state.stage, t.state.status, t.training, t.validating)
            # Lightning's enums, not only equal strings: code reads .value and prints them.
            seen["values"] = (t.state.fn.value, t.state.stage.value, t.state.status.value)
            seen["printed"] = f"{t.state.fn} {t.state.stage} {t.state.status}"

        def on_validation_start(self) -> None:
            t = self.trainer
            seen.setdefault("val", (t.state.stage, t.sanity_checking, t.validating, t.training))

    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    fit_quietly(trainer, Probe())
    assert seen["train"] == ("fit", "train", "running", True, False)
    assert seen["values"] == ("fit", "train", "running")
    assert seen["printed"] == "TrainerFn.FITTING RunningStage.TRAINING TrainerStatus.RUNNING"
    assert seen["val"] == ("sanity_check", True, False, False)
    assert seen["val"][0] is RunningStage.SANITY_CHECKING
    assert trainer.state.fn == TrainerFn.FITTING and trainer.state.stage is None
    assert trainer.state.status == TrainerStatus.FINISHED and trainer.state.finished
    assert not trainer.interrupted and not trainer.training
    assert RunningStage.TRAINING == "train"


def test_state_after_validate_test_predict() -> None:
    trainer = trainkit.Trainer(**QUIET)
    model = Classifier()
    trainer.validate(model, loader(blobs(32), 16), verbose=False)
    assert (trainer.state.fn, trainer.state.stage) == ("validate", None)
    assert trainer.state.fn is TrainerFn.VALIDATING
    trainer.test(model, loader(blobs(32), 16), verbose=False)
    assert trainer.state.fn == "test"
    trainer.predict(model, loader(blobs(32), 16))
    assert trainer.state.fn == "predict" and trainer.state.finished


def test_an_exception_leaves_the_trainer_interrupted() -> None:
    class Broken(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            raise RuntimeError("boom")

    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    with pytest.raises(RuntimeError, match="boom"):
        fit_quietly(trainer, Broken())
    assert trainer.interrupted and trainer.state.status is TrainerStatus.INTERRUPTED


# ------------------------------------------------------------ properties
def test_process_and_option_properties_on_one_device(tmp_path: Path) -> None:
    trainer = trainkit.Trainer(
        max_epochs=3,
        min_epochs=1,
        max_steps=100,
        min_steps=2,
        val_check_interval=0.5,
        check_val_every_n_epoch=2,
        num_sanity_val_steps=1,
        limit_train_batches=0.5,
        accumulate_grad_batches=2,
        gradient_clip_val=1.5,
        reload_dataloaders_every_n_epochs=2,
        default_root_dir=tmp_path,
        logger=False,
        enable_progress_bar=False,
    )
    assert (trainer.global_rank, trainer.local_rank, trainer.node_rank) == (0, 0, 0)
    assert (trainer.world_size, trainer.num_devices, trainer.num_nodes) == (1, 1, 1)
    assert trainer.is_global_zero and trainer.device_ids == [0]
    assert (trainer.max_epochs, trainer.min_epochs, trainer.max_steps, trainer.min_steps) == (
        3,
        1,
        100,
        2,
    )
    assert (trainer.val_check_interval, trainer.check_val_every_n_epoch) == (0.5, 2)
    assert (trainer.num_sanity_val_steps, trainer.limit_train_batches) == (1, 0.5)
    every = trainkit.Trainer(num_sanity_val_steps=-1, **QUIET)  # every batch: Lightning's inf
    assert every.num_sanity_val_steps == float("inf") and every.num_sanity_val_steps > 0
    every.num_sanity_val_steps = float("inf")
    assert every.options.num_sanity_val_steps == -1
    assert (trainer.accumulate_grad_batches, trainer.gradient_clip_val) == (2, 1.5)
    assert trainer.reload_dataloaders_every_n_epochs == 2
    assert trainer.precision == "32-true" and trainer.default_root_dir == str(tmp_path)
    assert trainer.log_dir == str(tmp_path)  # no logger: the root folder
    assert trainer.current_epoch == 0 and trainer.global_step == 0
    assert (trainer.barebones, trainer.enable_autolog_hparams) == (False, True)
    quiet = trainkit.Trainer(barebones=True, enable_autolog_hparams=False, max_steps=1)
    assert (quiet.barebones, quiet.enable_autolog_hparams) == (True, False)


def test_the_process_counts_read_as_planned_before_the_processes_start() -> None:
    # As Lightning's: the Trainer that will start 3 processes says so before it has.
    trainer = trainkit.Trainer(strategy="ddp_spawn", devices=3, **QUIET)
    assert (trainer.world_size, trainer.num_devices, trainer.device_ids) == (3, 3, [0, 1, 2])
    assert trainer.strategy.num_processes == 3
    assert (trainer.global_rank, trainer.local_rank, trainer.is_global_zero) == (0, 0, True)


def test_callback_properties(tmp_path: Path) -> None:
    stop = EarlyStopping(monitor="val/loss")
    best = ModelCheckpoint(dirpath=tmp_path, monitor="val/loss", save_last=True)
    trainer = trainkit.Trainer(callbacks=[stop, best], logger=False, default_root_dir=tmp_path)
    assert trainer.checkpoint_callback is best and trainer.checkpoint_callbacks == [best]
    assert trainer.early_stopping_callback is stop
    assert trainer.early_stopping_callbacks == [stop]
    assert isinstance(trainer.progress_bar_callback, TQDMProgressBar)
    bare = trainkit.Trainer(**QUIET)
    assert bare.checkpoint_callback is None and bare.early_stopping_callback is None
    assert bare.progress_bar_callback is None


def test_batch_counts_and_estimated_stepping_batches() -> None:
    counts: dict[str, Any] = {}

    class Probe(Classifier):
        def configure_optimizers(self) -> Any:
            counts["estimated"] = self.trainer.estimated_stepping_batches
            return super().configure_optimizers()

        def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
            super().validation_step(batch, batch_idx)

    trainer = trainkit.Trainer(max_epochs=3, accumulate_grad_batches=2, **QUIET)
    trainer.fit(Probe(), loader(blobs(96), 16), [loader(blobs(32), 16), loader(blobs(48), 16)])
    assert counts["estimated"] == 9  # 6 batches / 2 per step, 3 epochs
    assert trainer.num_training_batches == 6 and trainer.num_val_batches == [2, 3]
    assert trainer.num_sanity_val_batches == [2, 2]
    assert trainer.global_step == 9


# ------------------------------------------------------------- arguments
def test_min_epochs_holds_back_a_stop_request() -> None:
    class StopAtOnce(trainkit.Callback):
        def on_train_epoch_end(self, trainer: trainkit.Trainer, module: Any) -> None:
            trainer.should_stop = True

    trainer = trainkit.Trainer(max_epochs=5, min_epochs=3, callbacks=[StopAtOnce()], **QUIET)
    with pytest.warns(UserWarning, match="min_epochs=3"):
        fit_quietly(trainer, Classifier())
    assert trainer.current_epoch == 3 and trainer.global_step == 12


def test_min_steps_holds_back_a_stop_request_within_the_epoch() -> None:
    class StopEveryBatch(trainkit.Callback):
        def on_train_batch_end(self, trainer: trainkit.Trainer, *args: Any) -> None:
            trainer.should_stop = True

    trainer = trainkit.Trainer(max_epochs=5, min_steps=6, callbacks=[StopEveryBatch()], **QUIET)
    fit_quietly(trainer, Classifier())
    assert trainer.global_step == 6 and trainer.current_epoch == 2


def test_max_epochs_minus_one_means_no_epoch_limit() -> None:
    trainer = trainkit.Trainer(max_epochs=-1, max_steps=10, **QUIET)
    fit_quietly(trainer, Classifier())
    # 4 batches an epoch: the stop in the third epoch still ends it (as in Lightning)
    assert trainer.max_epochs == -1 and trainer.global_step == 10 and trainer.current_epoch == 3


@pytest.mark.parametrize("max_time", ["00:00:00:01", {"seconds": 1}, timedelta(seconds=1)])
def test_max_time_stops_training(max_time: Any) -> None:
    class Slow(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            import time

            time.sleep(0.05)
            return super().training_step(batch, batch_idx)

    trainer = trainkit.Trainer(max_epochs=1000, max_time=max_time, **QUIET)
    fit_quietly(trainer, Slow())
    # 1 s of 50 ms steps: far fewer than 1000 epochs of 4 steps
    assert 1 <= trainer.global_step < 4 * 1000 and trainer.state.finished


def test_max_time_is_checked() -> None:
    with pytest.raises(ValueError, match="DD:HH:MM:SS"):
        trainkit.Trainer(max_time="1 hour")


def test_limit_train_batches_zero_skips_training() -> None:
    epochs: list[int] = []

    class Probe(Classifier):
        def on_train_epoch_start(self) -> None:
            epochs.append(self.current_epoch)

    trainer = trainkit.Trainer(max_epochs=3, limit_train_batches=0, **QUIET)
    fit_quietly(trainer, Probe())
    assert epochs == [] and trainer.current_epoch == 0 and trainer.global_step == 0


def test_limit_val_batches_zero_asks_for_no_validation_loader() -> None:
    # As Lightning: no val_dataloader call (its dataset may be costly to build).
    asked: list[str] = []

    class Probe(Classifier):
        def train_dataloader(self) -> Any:
            return loader(blobs(32), 16)

        def val_dataloader(self) -> Any:
            asked.append("val")
            return loader(blobs(32), 16)

    trainer = trainkit.Trainer(max_epochs=1, limit_val_batches=0, **QUIET)
    trainer.fit(Probe())
    assert asked == [] and trainer.num_val_batches == [] and trainer.global_step == 2


def test_overfit_batches_uses_the_same_few_batches_unshuffled() -> None:
    firsts: list[torch.Tensor] = []

    class Probe(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            if batch_idx == 0:
                firsts.append(batch[0][0].clone())
            return super().training_step(batch, batch_idx)

    trainer = trainkit.Trainer(max_epochs=2, overfit_batches=2, **QUIET)
    with pytest.warns(UserWarning, match="requested to overfit but enabled train dataloader"):
        trainer.fit(Probe(), loader(blobs(64), 16, shuffle=True), loader(blobs(64), 16))
    assert trainer.num_training_batches == 2 and trainer.num_val_batches == [2]
    assert trainer.global_step == 4 and torch.equal(firsts[0], firsts[1])


def test_overfit_batches_replaces_any_sampler_but_the_datasets_order() -> None:
    # As in Lightning: a sampler of the user's own (here: the dataset backwards) too.
    class Backwards(torch.utils.data.Sampler[int]):
        def __init__(self, size: int) -> None:
            self.size = size

        def __iter__(self) -> Any:
            return iter(range(self.size - 1, -1, -1))

        def __len__(self) -> int:
            return self.size

    def backwards() -> Any:
        return torch.utils.data.DataLoader(blobs(64), 16, sampler=Backwards(64))

    trainer = trainkit.Trainer(max_epochs=1, overfit_batches=2, **QUIET)
    with pytest.warns(UserWarning) as caught:
        trainer.fit(Classifier(), backwards(), backwards())
    for kind in ("train", "val"):
        expected = f"enabled {kind} dataloader shuffling (Backwards)"
        assert any(expected in str(w.message) for w in caught), kind
    assert isinstance(trainer.train_dataloader.sampler, torch.utils.data.SequentialSampler)
    assert isinstance(trainer.val_dataloaders.sampler, torch.utils.data.SequentialSampler)


def test_reload_dataloaders_every_n_epochs() -> None:
    asked: list[int] = []

    class Reloading(Classifier):
        def train_dataloader(self) -> Any:
            asked.append(self.current_epoch)
            return loader(blobs(32), 16)

    trainer = trainkit.Trainer(max_epochs=4, reload_dataloaders_every_n_epochs=2, **QUIET)
    trainer.fit(Reloading())
    assert asked == [0, 2]


def test_barebones_turns_off_the_extras(tmp_path: Path) -> None:
    validated: list[int] = []

    class Counting(Classifier):
        def validation_step(self, batch: Any, batch_idx: int) -> None:
            validated.append(self.current_epoch)

    trainer = trainkit.Trainer(
        barebones=True, max_epochs=1, default_root_dir=tmp_path, num_sanity_val_steps=2
    )
    assert trainer.loggers == [] and trainer.checkpoint_callback is None
    assert trainer.progress_bar_callback is None and trainer.num_sanity_val_steps == 0
    fit_quietly(trainer, Counting())
    assert not any(tmp_path.iterdir())
    assert validated == [0, 0]  # the epoch's validation only: no sanity check before it


def test_detect_anomaly_finds_the_op_making_nans() -> None:
    class Nan(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, _ = batch
            return torch.sqrt(self(x).sum() * 0 - 1)  # NaN in backward and forward

    trainer = trainkit.Trainer(max_epochs=1, detect_anomaly=True, **QUIET)
    with pytest.raises(Exception, match=r"(?i)nan|anomal"):
        fit_quietly(trainer, Nan())


def test_sync_batchnorm_on_cpu_processes_is_refused() -> None:
    from trainkit.distributed.wrapping import convert_sync_batchnorm

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    with pytest.raises(ValueError, match="CUDA devices only"):
        convert_sync_batchnorm(model, torch.device("cpu"))
    plain = torch.nn.Sequential(torch.nn.Linear(2, 2))
    convert_sync_batchnorm(plain, torch.device("cpu"))  # nothing to convert: fine


def test_enable_checkpointing_false_adds_no_checkpoint(tmp_path: Path) -> None:
    trainer = trainkit.Trainer(
        max_epochs=1, enable_checkpointing=False, logger=False, default_root_dir=tmp_path
    )
    fit_quietly(trainer, Classifier())
    assert trainer.checkpoint_callback is None and not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize("name", [*NONE_FOR_THE_DEFAULT, "logger"])
def test_none_means_the_default_as_in_lightning(name: str, tmp_path: Path) -> None:
    def described(trainer: trainkit.Trainer) -> tuple[Any, ...]:
        parts = (trainer.hardware, trainer.options, trainer.step_options, trainer.output)
        return (*parts, [type(c) for c in trainer.callbacks], [type(x) for x in trainer.loggers])

    default = trainkit.Trainer(accelerator="cpu", default_root_dir=tmp_path)
    given = trainkit.Trainer(accelerator="cpu", default_root_dir=tmp_path, **{name: None})
    assert described(given) == described(default)


def test_model_registry_is_accepted_and_a_name_is_said_to_upload_nothing() -> None:
    trainkit.Trainer(model_registry=None, **QUIET)
    with pytest.warns(UserWarning, match="model_registry='my-model'.* is ignored"):
        trainkit.Trainer(model_registry="my-model", **QUIET)


def test_inference_mode_and_benchmark_are_options() -> None:
    trainer = trainkit.Trainer(inference_mode=False, benchmark=True, **QUIET)
    assert trainer.options.inference_mode is False
    assert torch.backends.cudnn.benchmark is True
    trainkit.Trainer(benchmark=False, **QUIET)
    assert torch.backends.cudnn.benchmark is False


# ----------------------------------------------------------- entry points
def test_evaluate_after_fit_without_a_model_uses_the_best_checkpoint(tmp_path: Path) -> None:
    trainer = trainkit.Trainer(
        max_epochs=2,
        callbacks=[
            ModelCheckpoint(dirpath=tmp_path, monitor="val/loss", save_top_k=1, save_last=True)
        ],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    fit_quietly(trainer, Classifier())
    best = trainer.checkpoint_callback.best_model_path
    assert best
    # Lightning's words (projects' tests match them).
    said = r"`.validate\(ckpt_path=None\)` was called without a model. The best model of the"
    with pytest.warns(UserWarning, match=said):
        results = trainer.validate(dataloaders=loader(blobs(32), 16), verbose=False)
    assert trainer.ckpt_path == best and set(results[0]) >= {"val/loss", "val/acc"}
    trainer.test(dataloaders=loader(blobs(32), 16), ckpt_path="best", verbose=False)
    assert trainer.ckpt_path == best
    trainer.test(dataloaders=loader(blobs(32), 16), ckpt_path="last", verbose=False)
    assert trainer.ckpt_path is not None and trainer.ckpt_path.endswith("last.ckpt")
    predictions = trainer.predict(dataloaders=loader(blobs(32), 16), ckpt_path=best)
    assert predictions is not None and len(predictions) == 2


def test_evaluate_without_a_model_or_a_fit_says_what_to_pass() -> None:
    with pytest.raises(ValueError, match=r"trainer.validate\(\) needs a model"):
        trainkit.Trainer(**QUIET).validate(dataloaders=loader(blobs(32), 16))


def test_ckpt_path_best_without_a_best_checkpoint_is_an_error_in_lightnings_words(
    tmp_path: Path,
) -> None:
    asked = r'`.test\(ckpt_path="best"\)` is set but `ModelCheckpoint` is not configured'
    with pytest.raises(ValueError, match=asked + r"\. Give the Trainer one"):
        trainkit.Trainer(**QUIET).test(Classifier(), loader(blobs(32), 16), ckpt_path="best")
    # One that has saved nothing yet (no fit): "to save the best model".
    trainer = trainkit.Trainer(callbacks=[ModelCheckpoint(dirpath=tmp_path)], **QUIET)
    asked = asked.replace("test", "validate")
    with pytest.raises(ValueError, match=asked + " to save the best model: it has saved no"):
        trainer.validate(Classifier(), loader(blobs(32), 16), ckpt_path="best")


def test_predict_return_predictions_false_returns_none() -> None:
    trainer = trainkit.Trainer(**QUIET)
    assert trainer.predict(Classifier(), loader(blobs(32), 16), return_predictions=False) is None


def test_verbose_prints_the_results(capsys: pytest.CaptureFixture[str]) -> None:
    trainkit.Trainer(**QUIET).test(Classifier(), loader(blobs(32), 16))
    out = capsys.readouterr().out
    assert "Test metric" in out and "test/acc" in out
    trainkit.Trainer(**QUIET).test(Classifier(), loader(blobs(32), 16), verbose=False)
    assert capsys.readouterr().out == ""


def test_fit_ckpt_path_is_reported(tmp_path: Path) -> None:
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    fit_quietly(trainer, Classifier())
    path = tmp_path / "a.ckpt"
    trainer.save_checkpoint(filepath=path)  # Lightning's keyword
    with pytest.raises(
        ValueError, match=r"storage_options=\.\.\.\) is for Lightning.s checkpoint-IO"
    ):
        trainer.save_checkpoint(tmp_path / "b.ckpt", storage_options={"region": "x"})
    assert not (tmp_path / "b.ckpt").exists()
    again = trainkit.Trainer(max_epochs=2, **QUIET)
    fit_quietly(again, Classifier())
    assert again.ckpt_path is None
    resumed = trainkit.Trainer(max_epochs=2, **QUIET)
    resumed.fit(Classifier(), loader(blobs(64), 16), ckpt_path=path)
    assert resumed.ckpt_path == str(path) and resumed.current_epoch == 2
    assert math.isfinite(float(resumed.callback_metrics["train/loss"]))


def test_progress_bar_metrics_are_kept_after_fit() -> None:
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    fit_quietly(trainer, Classifier())
    shown = trainer.progress_bar_metrics
    assert set(shown) == {"train/loss", "val/acc"}  # the prog_bar values, no bar-only "loss"
    assert shown["val/acc"] == pytest.approx(float(trainer.callback_metrics["val/acc"]))


def test_a_preemption_signal_stops_even_before_min_epochs(tmp_path: Path) -> None:
    import os
    import signal

    class SignalAtStep3(trainkit.Callback):
        def on_train_batch_end(self, trainer: trainkit.Trainer, *args: Any) -> None:
            if trainer.global_step == 3:
                os.kill(os.getpid(), signal.SIGTERM)

    trainer = trainkit.Trainer(
        max_epochs=10,
        min_epochs=5,
        callbacks=[SignalAtStep3()],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    with pytest.raises(SystemExit):
        fit_quietly(trainer, Classifier())
    # saved at the resume point after the signal, and stopped there
    assert trainer.preempted and trainer.global_step == 3
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()


def test_max_epochs_reads_as_lightning_reports_it() -> None:
    from tests.helpers import QUIET, Classifier, blobs, loader

    seen: list[int | None] = []

    class Watching(Classifier):
        def setup(self, stage: str) -> None:
            seen.append(self.trainer.max_epochs)  # a fit's hooks see the limit in force

        def on_train_start(self) -> None:
            self.trainer.should_stop = True

    # Unset, it reads None until a fit starts (validate does not resolve it).
    default, by_steps = trainkit.Trainer(**QUIET), trainkit.Trainer(max_steps=7, **QUIET)
    by_time = trainkit.Trainer(max_time="00:00:01:00", **QUIET)
    assert (default.max_epochs, by_steps.max_epochs, by_time.max_epochs) == (None, None, None)
    default.validate(Watching(), loader(blobs(16), 16), verbose=False)
    assert default.max_epochs is None and default.fit_loop.max_epochs is None
    # The default limit is said once, at the fit's start, before its first hook.
    with pytest.warns(UserWarning, match=r"`max_epochs` was not set\. Setting it to 1000"):
        default.fit(Watching(), loader(blobs(16), 16))
    assert seen[-1] == default.max_epochs == default.fit_loop.max_epochs == 1000
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*max_epochs")
        default.fit(Watching(), loader(blobs(16), 16))  # a second fit: nothing more to say
        for limited in (by_steps, by_time):  # max_steps or max_time limits: -1, quietly
            limited.fit(Watching(), loader(blobs(16), 16))
            assert seen[-1] == limited.max_epochs == -1
    given = trainkit.Trainer(max_epochs=3, max_steps=7, **QUIET)
    assert given.max_epochs == 3


def test_predict_gives_every_submodule_its_mode_back() -> None:
    from tests.helpers import QUIET, Classifier, blobs, loader

    model = Classifier()
    model.train()
    model.net[0].eval()
    trainkit.Trainer(**QUIET).predict(model, loader(blobs(32), 16))
    assert model.training and not model.net[0].training and model.net[2].training
    assert not model.on_gpu


# ----------------------------------------------------------------- loggers and folders
def test_fast_dev_run_keeps_logger_calls_working_and_writes_nothing(tmp_path: Path) -> None:
    from trainkit.loggers import DummyLogger, TensorBoardLogger

    class LogsImages(Classifier):
        def on_train_epoch_end(self) -> None:
            # What a Module does with its logger: fine in a dry run too.
            self.logger.experiment.add_image("sample", torch.zeros(3, 4, 4), self.global_step)
            self.logger.log_metrics({"extra": 1.0}, step=self.global_step)
            self.logger.log_hyperparams({"a": 1}, "extra", key="any")  # any arguments

    trainer = trainkit.Trainer(
        fast_dev_run=2,
        logger=TensorBoardLogger(tmp_path / "tb"),
        default_root_dir=str(tmp_path),
        **{k: v for k, v in QUIET.items() if k != "logger"},
    )
    assert isinstance(trainer.logger, DummyLogger) and len(trainer.loggers) == 1
    fit_quietly(trainer, LogsImages())
    assert trainer.global_step == 2
    assert list(tmp_path.iterdir()) == []  # no log folder, no checkpoint
    assert trainer.log_dir is None  # as Lightning: the dummy logger has no folder
    assert trainkit.Trainer(fast_dev_run=True, **QUIET).loggers == []  # logger=False stays off


class FolderlessLogger(trainkit.loggers.Logger):
    """A custom logger as Lightning documents one: a name, a version, no save_dir."""

    name = "remote"
    version = 7

    def log_metrics(self, metrics: Any, step: int) -> None:
        pass

    def log_hyperparams(self, params: Any) -> None:
        pass


class SavingLogger(FolderlessLogger):
    save_dir = "/tmp/somewhere"


@pytest.mark.parametrize(
    ("logger", "expected"),
    [
        (True, "root/logs/version_0"),  # trainkit's default name (docs/porting.md)
        (False, "root"),
        ("tensorboard", "tb/exp/version_3"),
        ("csv", "csv/lightning_logs/version_0"),
        ("list", "csv/lightning_logs/version_0"),  # the first logger's
        (SavingLogger(), "/tmp/somewhere"),  # any other logger: its save_dir
        (FolderlessLogger(), None),
    ],
    ids=["default", "none", "tensorboard", "csv", "list", "custom", "custom-folderless"],
)
def test_log_dir_in_each_documented_logger_configuration(
    tmp_path: Path, logger: Any, expected: str | None
) -> None:
    from trainkit.loggers import CSVLogger, TensorBoardLogger

    made = {
        "tensorboard": TensorBoardLogger(tmp_path / "tb", name="exp", version=3),
        "csv": CSVLogger(tmp_path / "csv", name="lightning_logs"),
        "list": [
            CSVLogger(tmp_path / "csv", name="lightning_logs"),
            TensorBoardLogger(tmp_path / "tb"),
        ],
    }
    trainer = trainkit.Trainer(
        logger=made.get(logger, logger) if isinstance(logger, str) else logger,
        default_root_dir=str(tmp_path / "root"),
        **{k: v for k, v in QUIET.items() if k != "logger"},
    )
    if expected is None or expected.startswith("/"):
        assert trainer.log_dir == expected
    else:
        assert trainer.log_dir == str(tmp_path / expected)


def test_a_folderless_loggers_run_keeps_its_checkpoints_in_a_folder_of_its_own(
    tmp_path: Path,
) -> None:
    # Lightning: <default_root_dir>/<name>/<version>/checkpoints when save_dir is None.
    trainer = trainkit.Trainer(
        max_epochs=1,
        logger=FolderlessLogger(),
        default_root_dir=str(tmp_path),
        **{k: v for k, v in QUIET.items() if k not in ("logger", "enable_checkpointing")},
    )
    fit_quietly(trainer, Classifier())
    assert trainer.checkpoint_callback is not None
    folder = tmp_path / "remote" / "version_7" / "checkpoints"
    assert Path(trainer.checkpoint_callback.dirpath) == folder
    assert (folder / "last.ckpt").is_file()


def test_a_fractional_val_check_interval_without_epochs_to_count_in_is_refused() -> None:
    # As Lightning: check_val_every_n_epoch=None counts training batches across epochs.
    with pytest.raises(ValueError, match="pass an int number of batches"):
        trainkit.Trainer(check_val_every_n_epoch=None, val_check_interval=0.5)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # (epoch, global_step) of each validation run, and the batches each runs.
        ({"check_val_every_n_epoch": 2, "limit_val_batches": 1}, ([(1, 8), (3, 16)], 1)),
        (
            {"check_val_every_n_epoch": 2, "val_check_interval": 2},
            ([(1, 6), (1, 8), (3, 14), (3, 16)], 2),
        ),
        (
            {"check_val_every_n_epoch": 2, "val_check_interval": 0.5, "limit_val_batches": 0.5},
            ([(1, 6), (1, 8), (3, 14), (3, 16)], 1),
        ),
        ({"check_val_every_n_epoch": 3, "limit_val_batches": 0}, ([], 0)),
        (
            {"check_val_every_n_epoch": None, "val_check_interval": 5},
            ([(1, 5), (2, 10), (3, 15)], 2),
        ),
    ],
)
def test_check_val_every_n_epoch_with_interval_and_limits(
    options: dict[str, Any], expected: tuple[list[tuple[int, int]], int]
) -> None:
    # Each case was run under Lightning 2.6.6 with the same data: the same runs.
    runs: list[tuple[int, int]] = []
    batches: list[int] = []

    class Record(Classifier):
        def validation_step(self, batch: Any, batch_idx: int) -> None:
            if batch_idx == 0:
                runs.append((self.current_epoch, self.global_step))
                batches.append(0)
            batches[-1] += 1

    trainer = trainkit.Trainer(max_epochs=4, num_sanity_val_steps=0, **options, **QUIET)
    trainer.fit(Record(), loader(blobs(64), 16), loader(blobs(32), 16))
    assert runs == expected[0]
    assert all(count == expected[1] for count in batches)


class _Stream(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    """Twenty samples of blobs with no length."""

    def __iter__(self) -> Any:
        yield from blobs(20)


@pytest.mark.parametrize(
    ("interval", "lengthless", "expected"),
    [(1.0, False, 20), (0.25, False, 5), (3, False, 3), (1.0, True, math.inf)],
)
def test_val_check_batch_counts_the_batches_between_validations(
    interval: float, lengthless: bool, expected: float
) -> None:
    # The values Lightning 2.6 gives for the same settings (80 samples in batches of 4).
    seen: list[float] = []

    class Probe(trainkit.Callback):
        def on_validation_start(self, trainer: trainkit.Trainer, module: Any) -> None:
            seen.append(trainer.val_check_batch)

    train = loader(_Stream(), 1) if lengthless else loader(blobs(80), 4)  # type: ignore[arg-type]
    trainer = trainkit.Trainer(
        max_epochs=1,
        val_check_interval=interval,
        limit_val_batches=1,
        num_sanity_val_steps=0,
        callbacks=[Probe()],
        **QUIET,
    )
    trainer.fit(Classifier(), train, loader(blobs(8), 4))
    assert seen and set(seen) == {expected}
    assert trainer.val_check_batch == expected
    with pytest.raises(AttributeError):
        trainer.val_check_batch = 2  # type: ignore[misc]


class Smoothing:
    """An object a Module keeps in its checkpoints: loading them needs ``weights_only=False``."""

    def __init__(self, amount: float) -> None:
        self.amount = amount


class SmoothedClassifier(Classifier):
    """Stores an object in its checkpoints, as projects do in ``on_save_checkpoint``."""

    smoothing: Smoothing | None = None

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["smoothing"] = Smoothing(0.25)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.smoothing = checkpoint["smoothing"]


def test_weights_only_false_loads_a_trusted_checkpoint_that_stores_objects(
    tmp_path: Path,
) -> None:
    import warnings

    first = trainkit.Trainer(max_steps=2, default_root_dir=str(tmp_path), **QUIET)
    first.fit(SmoothedClassifier(), loader(blobs(64)))
    path = tmp_path / "two.ckpt"
    first.save_checkpoint(path)

    # The default (None, as True) runs no code from the file: it names the class and the fix.
    with pytest.raises(trainkit.CheckpointError, match=r"Smoothing.*weights_only=False"):
        SmoothedClassifier.load_from_checkpoint(path)
    with pytest.raises(trainkit.CheckpointError, match="weights_only=False"):
        trainkit.Trainer(max_steps=3, **QUIET).fit(
            SmoothedClassifier(), loader(blobs(64)), ckpt_path=path
        )
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*weights_only")
        loaded = SmoothedClassifier.load_from_checkpoint(path, weights_only=False)
        assert loaded.smoothing is not None and loaded.smoothing.amount == 0.25
        resumed = trainkit.Trainer(max_steps=3, **QUIET)
        model = SmoothedClassifier()
        resumed.fit(model, loader(blobs(64)), ckpt_path=path, weights_only=False)
        assert resumed.global_step == 3  # resumed at step 2, not started over
        assert model.smoothing is not None
        evaluated = SmoothedClassifier()
        results = trainkit.Trainer(**QUIET).validate(
            evaluated, loader(blobs(32)), ckpt_path=path, weights_only=False, verbose=False
        )
        assert results and "val/loss" in results[0] and evaluated.smoothing is not None
        # The next call without it is safe again: the choice is per call.
        with pytest.raises(trainkit.CheckpointError):
            resumed.test(SmoothedClassifier(), loader(blobs(32)), ckpt_path=path, verbose=False)


class Activated(Classifier):
    """Holds an object (a module) among its hyperparameters."""

    def __init__(self, activation: torch.nn.Module | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()


def test_torchs_weights_only_variables_hold_where_weights_only_is_not_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pickle

    trainer = trainkit.Trainer(max_steps=1, default_root_dir=str(tmp_path), **QUIET)
    trainer.fit(Activated(torch.nn.ReLU()), loader(blobs(32)))
    path = tmp_path / "one.ckpt"
    trainer.save_checkpoint(path)
    # Refused by default, with the error torch.load raises, which code written for
    # Lightning catches to load again with weights_only=False.
    with pytest.raises(pickle.UnpicklingError, match=r"activation=ReLU\(\) as an object"):
        Activated.load_from_checkpoint(path)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.warns(UserWarning, match="TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD is set"):
        loaded = Activated.load_from_checkpoint(path)
    assert isinstance(loaded.hparams.activation, torch.nn.ReLU)
    with pytest.raises(trainkit.CheckpointError):  # an explicit True still holds
        Activated.load_from_checkpoint(path, weights_only=True)
    monkeypatch.setenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(RuntimeError, match="Both TORCH_FORCE_WEIGHTS_ONLY_LOAD and"):
        Activated.load_from_checkpoint(path)
    monkeypatch.delenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
    with pytest.raises(trainkit.CheckpointError):  # forced safe, whatever is passed
        Activated.load_from_checkpoint(path, weights_only=False)


def test_stage_flags_can_be_set_as_in_lightning() -> None:
    # Code that drives a DataModule's or Module's hooks by hand sets the stage the way
    # Lightning's setters do: True makes it the running stage, False clears it if it was.
    trainer = trainkit.Trainer(**QUIET)
    flags = ("training", "sanity_checking", "validating", "testing", "predicting")
    for flag in flags:
        setattr(trainer, flag, True)
        assert [getattr(trainer, other) for other in flags] == [f == flag for f in flags]
        assert isinstance(trainer.state.stage, RunningStage)
    trainer.training = False  # not the running stage: nothing changes
    assert trainer.predicting
    trainer.predicting = False
    assert trainer.state.stage is None and not any(getattr(trainer, f) for f in flags)
    trainer.validating = True
    assert trainer.evaluating


def test_a_datamodule_hook_reads_a_stage_set_by_hand() -> None:
    class Augmenting(trainkit.DataModule):
        def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
            return "augmented" if self.trainer.training else batch

    data = Augmenting()
    data.trainer = trainkit.Trainer(**QUIET)
    data.trainer.training = True
    assert data.on_after_batch_transfer("batch", 0) == "augmented"
    data.trainer.training = False
    assert data.on_after_batch_transfer("batch", 0) == "batch"


class NanFromStep2(Classifier):
    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if self.global_step >= 2 else loss


def test_the_ported_trainer_trains_on_through_a_nan_loss_with_one_warning() -> None:
    import trainkit.lightning as L
    from trainkit.callbacks import NonFiniteLoss, NonFiniteLossError

    trainer = L.Trainer(max_epochs=1, **QUIET)
    with pytest.warns(UserWarning, match="nan at step 2") as caught:
        trainer.fit(NanFromStep2(), loader(blobs(128), 32))
    assert trainer.global_step == 4  # as Lightning: every step taken
    assert sum("training goes on" in str(w.message) for w in caught) == 1
    (watcher,) = [c for c in trainer.callbacks if isinstance(c, NonFiniteLoss)]
    assert watcher.action == "warn" and watcher.nonfinite_steps == [2, 3]
    # trainkit's own Trainer stops; so does the ported one given NonFiniteLoss().
    for stopping in (
        trainkit.Trainer(max_epochs=1, **QUIET),
        L.Trainer(max_epochs=1, callbacks=[NonFiniteLoss()], **QUIET),
    ):
        with pytest.raises(NonFiniteLossError, match="at step 2"):
            stopping.fit(NanFromStep2(), loader(blobs(128), 32))


class NoValidationStep(Classifier):
    validation_step = trainkit.Module.validation_step  # not overridden


def test_fit_says_when_half_of_validation_is_missing() -> None:
    # Lightning's warnings, in its words (projects' tests match them).
    with pytest.warns(UserWarning, match="defined a `validation_step` but have no"):
        trainkit.Trainer(max_epochs=1, **QUIET).fit(Classifier(), loader(blobs(32), 16))
    with pytest.warns(UserWarning, match="passed in a `val_dataloader` but have no"):
        fit_quietly(trainkit.Trainer(max_epochs=1, **QUIET), NoValidationStep())
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "You (defined|passed in) a")
        fit_quietly(trainkit.Trainer(max_epochs=1, **QUIET), Classifier())


def test_one_progress_bar_at_a_time() -> None:
    from trainkit.callbacks import TQDMProgressBar

    with pytest.raises(ValueError, match=r"2 progress bars.*only one progress bar"):
        trainkit.Trainer(callbacks=[TQDMProgressBar(), TQDMProgressBar()])
    # Lightning refuses a bar with enable_progress_bar=False; trainkit keeps it, and says so.
    bar = TQDMProgressBar()
    with pytest.warns(UserWarning, match="the TQDMProgressBar in callbacks still draws"):
        trainer = trainkit.Trainer(enable_progress_bar=False, callbacks=[bar])
    assert trainer.progress_bar_callback is bar


@pytest.mark.parametrize("logger", [None, True])
def test_the_ported_trainers_default_logger_is_the_ported_tensorboard_logger(
    tmp_path: Path, logger: Any
) -> None:
    # A project's `isinstance(self.logger, TensorBoardLogger)` branch (add_image...) holds.
    import trainkit.lightning as L

    trainer = L.Trainer(logger=logger, default_root_dir=str(tmp_path), enable_progress_bar=False)
    assert isinstance(trainer.logger, L.loggers.TensorBoardLogger)
    assert trainer.logger.log_dir == str(tmp_path / "lightning_logs" / "version_0")
    assert type(trainkit.Trainer(logger=logger).logger) is trainkit.loggers.TensorBoardLogger


def test_the_ported_trainer_reads_pl_trainer_environment_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Lightning's documented defaults from the environment; arguments given win.
    import trainkit.lightning as L

    monkeypatch.setenv("PL_TRAINER_MAX_STEPS", "7")
    monkeypatch.setenv("PL_TRAINER_LOGGER", "False")
    monkeypatch.setenv("PL_TRAINER_DEFAULT_ROOT_DIR", "runs/x")  # not a literal: the text
    trainer = L.Trainer(enable_progress_bar=False)
    assert trainer.max_steps == 7 and trainer.logger is None
    assert trainer.default_root_dir == "runs/x"
    assert L.Trainer(max_steps=2).max_steps == 2
    assert trainkit.Trainer().max_steps == -1  # trainkit's own Trainer reads none of them


def test_the_ported_trainers_signature_shows_lightnings_arguments_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Projects build the Trainer's arguments by filtering their config through its
    # signature: a config's "seed" (pytorch_tabular's) must not reach it and re-seed.
    import inspect

    import trainkit.lightning as L

    shown = inspect.signature(L.Trainer.__init__).parameters
    config = {"max_epochs": 1, "seed": 42, "compile": True, "process_group_timeout": 5.0}
    assert {name: value for name, value in config.items() if name in shown} == {"max_epochs": 1}
    assert {"seed", "resume_mismatch"} <= set(inspect.signature(trainkit.Trainer).parameters)
    # Still taken when given: a ported project may use trainkit's options by name.
    torch.manual_seed(0)
    L.Trainer(seed=3, logger=False, enable_progress_bar=False)
    assert torch.equal(torch.rand(2), torch.manual_seed(3) and torch.rand(2))
    # Nor read from the environment, where Lightning reads its own arguments only.
    monkeypatch.setenv("PL_TRAINER_SEED", "5")
    torch.manual_seed(0)
    L.Trainer(logger=False, enable_progress_bar=False)
    assert torch.equal(torch.rand(2), torch.manual_seed(0) and torch.rand(2))

"""RunSummary: the end-of-run summary (rank 0 only) and the short-run warning."""

from __future__ import annotations

import contextlib
import io
import re
import time
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import trainkit
from tests.distributed.spawn import run_processes
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import ModelCheckpoint, RunSummary, TQDMProgressBar
from trainkit.callbacks import summary as summary_module
from trainkit.callbacks.summary import short_run_warning
from trainkit.loggers import CSVLogger

#: The Trainer's defaults for the console (its own bar, so the summary prints), nothing else.
CONSOLE = {**QUIET, "enable_progress_bar": True}


def summary_of(out: str, stage: str = "fit") -> list[str]:
    """The summary's lines in captured output: its first line and the indented ones after it."""
    lines = out.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(f"{stage}: ")]
    assert len(starts) == 1, out
    found = [lines[starts[0]]]
    for line in lines[starts[0] + 1 :]:
        if not line.startswith("  "):
            break
        found.append(line)
    return found


class Slow(Classifier):
    """Takes at least 0.2 s to train, so that the summary's elapsed time is known to exceed it."""

    def on_train_start(self) -> None:
        time.sleep(0.2)


def test_a_fit_summary_has_the_run_its_metrics_and_its_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saver = ModelCheckpoint(monitor="val/acc", mode="max", save_last=True)
    options = {**CONSOLE, "enable_checkpointing": True}
    trainer = trainkit.Trainer(
        max_epochs=2,
        callbacks=[saver],
        logger=CSVLogger(tmp_path),
        default_root_dir=tmp_path,
        **{k: v for k, v in options.items() if k != "logger"},
    )
    began = time.monotonic()
    trainer.fit(Slow(), loader(blobs(96), 32), loader(blobs(64), 32))
    wall = time.monotonic() - began
    head, metrics, best, last, logs = summary_of(capsys.readouterr().out)

    found = re.fullmatch(
        r"fit: finished in ([\d.]+)s \| epoch 2/2, step 6 \| 6 batches at [\d.]+ (it/s|s/it), "
        r"[\d]+ samples/s",
        head,
    )
    assert found, head
    assert 0.2 <= float(found.group(1)) <= wall + 0.05
    expected = {name: f"{float(value):.4g}" for name, value in trainer.callback_metrics.items()}
    assert metrics == "  metrics: " + " | ".join(f"{k} {expected[k]}" for k in sorted(expected))
    assert saver.best_model_score is not None
    assert best == f"  best: val/acc {float(saver.best_model_score):.4g} at {saver.best_model_path}"
    assert Path(saver.best_model_path).is_file()
    assert last == f"  last: {saver.last_model_path}"
    assert Path(saver.last_model_path).is_file()
    assert logs == f"  logs: {trainer.log_dir}"


def test_a_finished_run_resumed_says_there_is_nothing_to_train(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = {**CONSOLE, "enable_checkpointing": True, "default_root_dir": tmp_path}
    trainkit.Trainer(max_epochs=1, **options).fit(Classifier(), loader(blobs(64), 32))
    capsys.readouterr()
    again = trainkit.Trainer(max_epochs=1, **options)
    again.fit(Classifier(), loader(blobs(64), 32), ckpt_path="last")
    head = summary_of(capsys.readouterr().out)[0]
    assert head == (
        "fit: nothing to train: the checkpoint is at epoch 1, max_epochs=1 (raise it to train on)"
    )


def test_a_run_resumed_at_max_steps_names_max_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = {**CONSOLE, "enable_checkpointing": True, "default_root_dir": tmp_path}
    trainkit.Trainer(max_steps=2, **options).fit(Classifier(), loader(blobs(128), 32))
    capsys.readouterr()
    trainkit.Trainer(max_steps=2, **options).fit(
        Classifier(), loader(blobs(128), 32), ckpt_path="last"
    )
    head = summary_of(capsys.readouterr().out)[0]
    assert head.startswith("fit: nothing to train: the checkpoint is at step 2, max_steps=2")


def test_a_stop_before_max_epochs_says_stopped_early(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    class Stopping(Classifier):
        def on_train_epoch_end(self) -> None:
            self.trainer.should_stop = True

    trainer = trainkit.Trainer(max_epochs=5, default_root_dir=tmp_path, **CONSOLE)
    trainer.fit(Stopping(), loader(blobs(64), 32))
    head = summary_of(capsys.readouterr().out)[0]
    assert head.startswith("fit: stopped early in ")
    assert "| epoch 1/5, step 2 | 2 batches at" in head


def test_test_and_validate_print_their_own_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trainer = trainkit.Trainer(default_root_dir=tmp_path, **CONSOLE)
    model = Classifier()
    trainer.test(model, loader(blobs(96), 32))
    test = summary_of(capsys.readouterr().out, "test")
    assert re.fullmatch(r"test: finished in [\d.]+s \| 3 batches at [\d.]+ (it/s|s/it)", test[0])
    assert re.fullmatch(r"  metrics: test/acc [\d.]+ \| test/loss [\d.]+", test[1])
    assert len(test) == 2  # no checkpoint, no logger
    trainer.validate(model, loader(blobs(64), 32))
    assert summary_of(capsys.readouterr().out, "validate")[0].startswith("validate: finished in ")
    trainer.predict(model, loader(blobs(64), 32))
    assert "predict:" not in capsys.readouterr().out  # predict has no summary


def test_a_failed_run_prints_no_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    class Failing(Classifier):
        def on_train_epoch_end(self) -> None:
            raise RuntimeError("boom")

    trainer = trainkit.Trainer(max_epochs=1, default_root_dir=tmp_path, **CONSOLE)
    with pytest.raises(RuntimeError, match="boom"):
        trainer.fit(Failing(), loader(blobs(64), 32))
    assert "fit:" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("options", "callbacks", "printed"),
    [
        pytest.param({"enable_progress_bar": True}, [], True, id="the Trainer's bar"),
        pytest.param({"enable_progress_bar": False}, [], False, id="no bar"),
        pytest.param({"enable_progress_bar": False}, [RunSummary()], True, id="no bar, asked"),
        pytest.param(
            {"enable_progress_bar": True}, [RunSummary(verbose=False)], False, id="switched off"
        ),
        pytest.param({"enable_progress_bar": True}, [TQDMProgressBar()], False, id="own bar"),
        pytest.param(
            {"enable_progress_bar": True},
            [TQDMProgressBar(), RunSummary()],
            True,
            id="own bar, asked",
        ),
        pytest.param({"barebones": True}, [RunSummary()], True, id="barebones, asked"),
    ],
)
def test_when_the_summary_prints(
    options: dict[str, Any],
    callbacks: list[Any],
    printed: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = {**QUIET, **options}
    if settings.get("barebones"):
        settings = {"barebones": True, "accelerator": "cpu"}
    trainer = trainkit.Trainer(
        max_steps=1, callbacks=callbacks, default_root_dir=tmp_path, **settings
    )
    trainer.fit(Classifier(), loader(blobs(32), 32))
    assert ("fit: finished in" in capsys.readouterr().out) == printed


def test_a_disabled_bar_silences_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bar = TQDMProgressBar()
    bar.disable()
    trainer = trainkit.Trainer(
        max_steps=1, callbacks=[bar, RunSummary()], default_root_dir=tmp_path, **QUIET
    )
    trainer.fit(Classifier(), loader(blobs(32), 32))
    assert capsys.readouterr().out == ""


def test_barebones_adds_no_summary() -> None:
    trainer = trainkit.Trainer(barebones=True, accelerator="cpu")
    assert not [c for c in trainer.callbacks if isinstance(c, RunSummary)]
    assert [c for c in trainkit.Trainer(**QUIET).callbacks if isinstance(c, RunSummary)]


def fit_and_capture(root: str) -> str:
    """One rank's fit under DDP (2 gloo processes); what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = trainkit.Trainer(
            max_epochs=1, strategy="ddp", default_root_dir=root, **{**CONSOLE, "logger": False}
        )
        trainer.fit(Classifier(), loader(blobs(128), 32))
    return out.getvalue()


def test_only_rank_zero_prints_the_summary(tmp_path: Path) -> None:
    outputs = run_processes(fit_and_capture, 2, str(tmp_path))
    assert summary_of(outputs[0])[0].startswith("fit: finished in ")
    assert outputs[1] == ""


# ------------------------------------------------------------------ the short-run warning
def fake(steps: int, every: int, start: int = 0, loggers: bool = True) -> Any:
    """The Trainer attributes the warning reads."""
    return SimpleNamespace(
        loggers=["a logger"] if loggers else [],
        estimated_stepping_batches=steps,
        global_step=start,
        log_every_n_steps=every,
    )


@pytest.mark.parametrize(
    ("trainer", "warns"),
    [
        pytest.param(fake(48, 50), True, id="48 steps, every 50"),
        pytest.param(fake(50, 50), False, id="50 steps, every 50"),
        pytest.param(fake(48, 50, loggers=False), False, id="no logger"),
        pytest.param(fake(90, 50, start=55), True, id="resumed at 55 of 90"),
        pytest.param(fake(90, 50, start=30), False, id="resumed at 30 of 90"),
        pytest.param(fake(60, 50, start=60), False, id="nothing left to train"),
    ],
)
def test_the_short_run_warning_comes_when_no_step_would_be_logged(
    trainer: Any, warns: bool
) -> None:
    assert (short_run_warning(trainer) is not None) == warns


def test_a_run_of_unknown_length_is_not_warned_about() -> None:
    class Unknown:
        loggers = ["a logger"]
        global_step, log_every_n_steps = 0, 50

        @property
        def estimated_stepping_batches(self) -> int:
            raise RuntimeError("The number of optimizer steps is unknown")

    assert short_run_warning(Unknown()) is None  # type: ignore[arg-type]


def test_a_fit_too_short_to_log_warns_once_and_indeed_logs_no_step(tmp_path: Path) -> None:
    trainer = trainkit.Trainer(
        max_epochs=2,
        logger=CSVLogger(tmp_path),
        **{k: v for k, v in QUIET.items() if k != "logger"},
    )
    with pytest.warns(UserWarning) as caught:
        trainer.fit(Classifier(), loader(blobs(96), 32))  # 6 steps, log_every_n_steps=50
    messages = [str(w.message) for w in caught if "log_every_n_steps" in str(w.message)]
    assert messages == [
        "This fit takes 6 optimizer steps, fewer than the logging interval "
        "Trainer(log_every_n_steps=50), so no step value reaches the loggers (epoch values "
        "still do). Set log_every_n_steps to 6 or lower to see the training curve."
    ]
    # The step value (the module logs no epoch value) never reached the logger.
    written = Path(trainer.log_dir) / "metrics.csv"
    assert not written.exists() or "train/loss" not in written.read_text()


def test_a_fit_that_logs_is_not_warned_about(tmp_path: Path) -> None:
    # 3 batches an epoch, 20 epochs: step 50 is logged. Lightning warns here (3 < 50).
    trainer = trainkit.Trainer(
        max_epochs=20,
        logger=CSVLogger(tmp_path),
        **{k: v for k, v in QUIET.items() if k != "logger"},
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*log_every_n_steps")
        trainer.fit(Classifier(), loader(blobs(96), 32))
    assert "train/loss" in (Path(trainer.log_dir) / "metrics.csv").read_text().splitlines()[0]


# ------------------------------------------------------------ the summary's arithmetic
class Clock:
    """A ``time.monotonic`` the test moves by hand."""

    now = 100.0

    def __call__(self) -> float:
        return self.now


#: The user's module: the summary never touches it.
MODULE: Any = None


def fake_fit(**changes: Any) -> Any:
    """The Trainer attributes the summary reads, after a fit of 10 batches."""
    attributes: dict[str, Any] = {
        "is_global_zero": True,
        "current_epoch": 1,
        "global_step": 10,
        "max_epochs": 1,
        "max_steps": -1,
        "ckpt_path": None,
        "preempted": False,
        "should_stop": False,
        "state": SimpleNamespace(batch_idx=0, samples_per_step=None, status="finished"),
        "callback_metrics": {},
        "checkpoint_callback": None,
        "progress_bar_callback": None,
        "loggers": [],
    }
    attributes.update(changes)
    return SimpleNamespace(**attributes)


def drive_fit(summary: RunSummary, trainer: Any, clock: Clock) -> None:
    """Hooks as fit calls them: 1 s of set-up, 10 batches, a validation of 2 s inside."""
    summary.setup(trainer, MODULE, "fit")
    clock.now += 1
    summary.on_train_start(trainer, MODULE)
    summary.on_train_epoch_start(trainer, MODULE)
    clock.now += 1
    summary.on_validation_start(trainer, MODULE)
    clock.now += 2
    summary.on_validation_end(trainer, MODULE)
    clock.now += 1
    trainer.state.batch_idx = 10
    summary.on_train_epoch_end(trainer, MODULE)
    summary.on_train_end(trainer, MODULE)


def test_the_rate_leaves_validation_time_out(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(summary_module.time, "monotonic", clock)
    summary, trainer = RunSummary(), fake_fit()
    drive_fit(summary, trainer, clock)
    # 10 batches in 2 s of training (4 s minus 2 s of validation); 5 s in all.
    assert summary.lines(trainer, "fit") == [
        "fit: finished in 5.0s | epoch 1/1, step 10 | 10 batches at 5 it/s"
    ]
    trainer.state.samples_per_step = 64
    assert summary.lines(trainer, "fit")[0].endswith("10 batches at 5 it/s, 320 samples/s")


def test_a_preempted_fit_says_how_to_resume(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = Clock()
    monkeypatch.setattr(summary_module.time, "monotonic", clock)
    summary = RunSummary()
    trainer = fake_fit(preempted=True, should_stop=True)
    drive_fit(summary, trainer, clock)
    trainer.state.status = "interrupted"  # how a preempted fit ends
    summary.teardown(trainer, MODULE, "fit")
    assert capsys.readouterr().out.startswith(
        "fit: stopped for a preemption signal (resume with ckpt_path='last') in 5.0s |"
    )


def test_other_ranks_print_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = Clock()
    monkeypatch.setattr(summary_module.time, "monotonic", clock)
    summary, trainer = RunSummary(), fake_fit(is_global_zero=False)
    drive_fit(summary, trainer, clock)
    summary.teardown(trainer, MODULE, "fit")
    assert capsys.readouterr().out == ""

"""RichProgressBar: Lightning's metrics text, refresh_rate, leave, theme, console, plain lines."""

from __future__ import annotations

import io
import subprocess
import sys
from typing import Any

import pytest

import trainkit
from tests.callbacks.test_progress import MODULE, FakeTrainer, run_epoch, run_validation
from tests.helpers import QUIET, BlobData, Classifier, MemoryLogger, needs_rich
from trainkit.callbacks import TQDMProgressBar, progress
from trainkit.callbacks.rich_model_summary import RichModelSummary
from trainkit.callbacks.rich_progress import (
    RichProgressBar,
    RichProgressBarTheme,
    format_rich_metrics,
)

ESCAPE = "\x1b["
SHOW_CURSOR = "\x1b[?25h"  # written when a live display stops


def terminal(**kwargs: Any) -> tuple[io.StringIO, dict[str, Any]]:
    """A file, and console_kwargs that draw live bars into it as into a terminal."""
    out = io.StringIO()
    return out, {"file": out, "force_terminal": True, "width": 200, **kwargs}


def logged_trainer(num_training_batches: float = 100) -> FakeTrainer:
    trainer = FakeTrainer(num_training_batches=num_training_batches)
    trainer.loggers = [MemoryLogger()]  # type: ignore[attr-defined]  # version 0
    return trainer


@needs_rich
def test_metrics_are_shown_as_lightning_shows_them() -> None:
    out, console = terminal()
    bar = RichProgressBar(console_kwargs=console)
    trainer = logged_trainer(num_training_batches=3)
    bar.setup(trainer, MODULE, "fit")
    run_epoch(bar, trainer, steps=3)
    # Lightning 2.6 shows these exactly so: v_num first (formatted like any number),
    # then the progress-bar metrics in their order, "name: value" with ".3f".
    assert bar.train_progress_bar.fields["metrics"] == "v_num: 0.000 loss: 0.123 acc: 0.900"
    bar.teardown(trainer, MODULE, "fit")
    assert "v_num: 0.000 loss: 0.123 acc: 0.900" in out.getvalue()


def test_a_version_string_shows_its_last_four_characters_unformatted() -> None:
    text = format_rich_metrics({"v_num": "2024_ab12"[-4:], "n": 3}, RichProgressBarTheme())
    assert text == "v_num: ab12 n: 3.000"


@needs_rich
def test_metrics_are_read_only_every_refresh_rate_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(10**6))
    # Each clock reading is a second later: only refresh_rate limits redraws.
    monkeypatch.setattr(progress.time, "monotonic", lambda: float(next(clock)))
    _, console = terminal()
    bar = RichProgressBar(refresh_rate=10, console_kwargs=console)
    trainer = FakeTrainer()
    bar.setup(trainer, MODULE, "fit")
    run_epoch(bar, trainer, steps=100)
    assert trainer.metric_reads == 100 // 10 + 1  # plus the epoch end
    assert bar.train_progress_bar.completed == 100
    bar.teardown(trainer, MODULE, "fit")


@needs_rich
def test_fast_steps_draw_a_handful_of_frames() -> None:
    _, console = terminal()
    bar = RichProgressBar(console_kwargs=console)  # refresh_rate=1, but at most every 0.1 s
    trainer = FakeTrainer(num_training_batches=1000)
    bar.setup(trainer, MODULE, "fit")
    run_epoch(bar, trainer, steps=1000)
    assert trainer.metric_reads < 20
    assert bar.train_progress_bar.completed == 1000  # the epoch end shows the full count
    bar.teardown(trainer, MODULE, "fit")


@needs_rich
def test_refresh_rate_zero_turns_the_bar_off(capsys: pytest.CaptureFixture[str]) -> None:
    out, console = terminal()
    bar = RichProgressBar(refresh_rate=0, console_kwargs=console)
    trainer = FakeTrainer()
    bar.setup(trainer, MODULE, "fit")
    run_epoch(bar, trainer, steps=10)
    run_validation(bar, trainer, batches=4)
    bar.teardown(trainer, MODULE, "fit")
    assert bar.is_disabled
    assert out.getvalue() == ""
    assert capsys.readouterr().out == ""
    assert trainer.metric_reads == 0
    with pytest.raises(ValueError, match="refresh_rate=-1"):
        RichProgressBar(refresh_rate=-1)


@needs_rich
@pytest.mark.parametrize("leave", [True, False])
def test_leave_keeps_each_finished_epoch_on_screen(leave: bool) -> None:
    out, console = terminal()
    bar = RichProgressBar(leave=leave, console_kwargs=console)
    trainer = FakeTrainer(num_training_batches=3)
    bar.setup(trainer, MODULE, "fit")
    for epoch in range(2):
        trainer.current_epoch = epoch
        run_epoch(bar, trainer, steps=3)
    bar.teardown(trainer, MODULE, "fit")
    displays = [chunk for chunk in out.getvalue().split(SHOW_CURSOR) if chunk.strip()]
    if leave:
        # Epoch 0's display ended (its last frame stays) before epoch 1's began.
        assert len(displays) == 2
        assert "Epoch 0" in displays[0] and "Epoch 1" not in displays[0]
        assert "Epoch 1" in displays[1] and "Epoch 0" not in displays[1]
    else:
        assert len(displays) == 1  # one bar, reset for epoch 1


@needs_rich
def test_theme_styles_and_formats_the_bar() -> None:
    out, console = terminal(color_system="truecolor")
    theme = RichProgressBarTheme(
        progress_bar_finished="#00ff00",
        metrics="#ff0000",
        metrics_text_delimiter=" | ",
        metrics_format=".1f",
    )
    bar = RichProgressBar(theme=theme, console_kwargs=console)
    trainer = FakeTrainer(num_training_batches=3)
    bar.setup(trainer, MODULE, "fit")
    run_epoch(bar, trainer, steps=3)
    assert bar.train_progress_bar.fields["metrics"] == "loss: 0.1 | acc: 0.9"
    bar.teardown(trainer, MODULE, "fit")
    drawn = out.getvalue()
    assert "38;2;0;255;0" in drawn  # the finished bar's colour
    assert "38;2;255;0;0" in drawn  # the metrics' colour


@needs_rich
def test_console_kwargs_choose_where_the_bar_writes(capsys: pytest.CaptureFixture[str]) -> None:
    out, console = terminal()
    bar = RichProgressBar(console_kwargs=console)
    trainer = FakeTrainer(num_training_batches=3)
    bar.setup(trainer, MODULE, "fit")
    run_epoch(bar, trainer, steps=3)
    bar.teardown(trainer, MODULE, "fit")
    assert "Epoch 0" in out.getvalue()
    assert bar.console.file is out
    assert capsys.readouterr().out == ""


@needs_rich
def test_plain_lines_every_n_steps_without_control_codes() -> None:
    out = io.StringIO()
    bar = RichProgressBar(print_every_n_steps=5, console_kwargs={"file": out})
    trainer = logged_trainer(num_training_batches=23)
    bar.setup(trainer, MODULE, "fit")
    run_epoch(bar, trainer, steps=23)
    run_validation(bar, trainer, batches=4)
    bar.teardown(trainer, MODULE, "fit")
    assert trainer.metric_reads == 23 // 5 + 1  # the printed lines only
    lines = out.getvalue().splitlines()
    assert ESCAPE not in out.getvalue()
    assert [line.split(" 0:")[0] for line in lines] == [
        "Epoch 0 5/23",
        "Epoch 0 10/23",
        "Epoch 0 15/23",
        "Epoch 0 20/23",
        "Epoch 0 23/23",
        "Validation 4/4",
    ]
    assert lines[0].endswith("it/s v_num: 0.000 loss: 0.123 acc: 0.900")


@needs_rich
def test_plain_mode_keeps_the_tasks_that_subclasses_read_without_drawing_them() -> None:
    # Under pytest or in a batch job the console is no terminal: the tasks exist for a
    # subclass's code, as under Lightning, while only the plain lines are printed.
    seen: list[tuple[Any, Any]] = []

    class Reading(RichProgressBar):
        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            super().on_train_epoch_end(trainer, module)
            task = self.train_progress_bar
            seen.append((task.total, task.completed))

    out = io.StringIO()
    bar = Reading(print_every_n_steps=5, console_kwargs={"file": out})
    trainer = logged_trainer(num_training_batches=7)
    bar.setup(trainer, MODULE, "fit")
    run_epoch(bar, trainer, steps=7)
    run_validation(bar, trainer, batches=2)
    bar.teardown(trainer, MODULE, "fit")
    assert seen == [(7, 7)]
    assert ESCAPE not in out.getvalue()
    lines = [line.split(" 0:")[0] for line in out.getvalue().splitlines()]
    assert lines == ["Epoch 0 5/7", "Epoch 0 7/7", "Validation 2/4"]  # the fake has 4


@needs_rich
def test_other_ranks_show_nothing() -> None:
    out = io.StringIO()
    bar = RichProgressBar(print_every_n_steps=1, console_kwargs={"file": out})
    trainer = FakeTrainer()
    trainer.is_global_zero = False
    bar.setup(trainer, MODULE, "fit")
    run_epoch(bar, trainer, steps=5)
    run_validation(bar, trainer, batches=2)
    assert out.getvalue() == ""
    assert trainer.metric_reads == 0


def run_all_stages(bar: RichProgressBar) -> trainkit.Trainer:
    options = {**QUIET, "logger": MemoryLogger(), "enable_progress_bar": True}
    trainer = trainkit.Trainer(max_epochs=2, limit_train_batches=6, callbacks=[bar], **options)
    data = BlobData()
    model = Classifier()
    trainer.fit(model, datamodule=data)
    trainer.validate(model, datamodule=data, verbose=False)
    trainer.test(model, datamodule=data, verbose=False)
    trainer.predict(model, datamodule=data)
    return trainer


@needs_rich
def test_trainer_runs_write_plain_lines_when_stdout_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bar = RichProgressBar(print_every_n_steps=4)
    trainer = run_all_stages(bar)
    # The user's bar is the progress bar; the Trainer adds none beside it.
    assert trainer.progress_bar_callback is bar
    assert not any(isinstance(callback, TQDMProgressBar) for callback in trainer.callbacks)
    out = capsys.readouterr().out  # captured: not a terminal
    assert ESCAPE not in out
    lines = out.splitlines()
    epoch_ends = [line for line in lines if line.startswith("Epoch 1/1 6/6 ")]
    assert len(epoch_ends) == 1
    assert "it/s v_num: 0.000 " in epoch_ends[0]
    assert " train/loss: " in epoch_ends[0] and " val/acc: " in epoch_ends[0]
    assert any(line.startswith("Epoch 0/1 4/6 ") for line in lines)
    for description in ("Validation 4/4 ", "Testing 4/4 ", "Predicting 4/4 "):
        assert any(line.startswith(description) for line in lines), description
    assert not any("Sanity" in line for line in lines)


@needs_rich
def test_trainer_runs_draw_live_bars_in_a_terminal() -> None:
    out, console = terminal()
    run_all_stages(RichProgressBar(console_kwargs=console))
    drawn = out.getvalue()
    assert ESCAPE in drawn and "━" in drawn
    for text in ("Sanity Checking", "Epoch 1/1", "6/6", "Validation", "Testing", "Predicting"):
        assert text in drawn, text
    assert "train/loss: " in drawn


class StageBar(RichProgressBar):
    """A bar written in Lightning's style: its own display and training description."""

    def _init_progress(self, trainer: Any) -> None:
        from rich.progress import ProgressColumn, TextColumn
        from rich.text import Text

        from trainkit.lightning.callbacks.progress.rich_progress import (
            BatchesProcessedColumn,
            CustomBarColumn,
            CustomProgress,
            CustomTimeColumn,
            MetricsTextColumn,
            ProcessingSpeedColumn,
        )

        class Epochs(ProgressColumn):
            def render(self, task: Any) -> Text:
                return Text(f"[{trainer.current_epoch + 1} of {trainer.max_epochs}]")

        if self.is_enabled and (self.progress is None or self._progress_stopped):
            self._reset_progress_bar_ids()
            self._metric_component = MetricsTextColumn(
                trainer,
                self.theme.metrics,
                self.theme.metrics_text_delimiter,
                self.theme.metrics_format,
            )
            self.progress = CustomProgress(
                TextColumn("{task.description}"),
                CustomBarColumn(),
                BatchesProcessedColumn(),
                CustomTimeColumn(),
                ProcessingSpeedColumn(),
                self._metric_component,
                Epochs(),
                auto_refresh=False,
                disable=self.is_disabled,
                console=self.console,
            )
            self.progress.start()
            self._progress_stopped = False

    def _get_train_description(self, current_epoch: int) -> str:
        return f"stage {current_epoch}"


@needs_rich
def test_a_bar_written_in_lightnings_style_has_its_own_display_drawn() -> None:
    out, console = terminal()
    run_all_stages(StageBar(console_kwargs=console))
    drawn = out.getvalue()
    # Its columns (a batch count, the metrics it was given, a column of its own) and
    # its description, not the default bar's.
    for text in ("stage 1", "6/6", "it/s", "train/loss: ", "[2 of 2]", "Validation"):
        assert text in drawn, text
    assert "Epoch 0" not in drawn


def test_building_without_rich_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)  # `import rich` now fails
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'trainkit\[rich\]'"):
        RichProgressBar()
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'trainkit\[rich\]'"):
        RichModelSummary()


def test_import_trainkit_never_imports_rich() -> None:
    code = (
        "import sys, trainkit, trainkit.callbacks.rich_progress, "
        "trainkit.callbacks.rich_model_summary; print('rich' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"

"""RichProgressBar: Lightning's rich progress bars; plain lines when not in a terminal.

It needs the ``rich`` package (``pip install 'trainkit[rich]'``), imported only
when a bar is built: ``import trainkit`` never imports rich.

Like TQDMProgressBar it costs nothing per step but counting (promise 1 in
DESIGN.md): a batch-end hook counts, and only when a redraw is due (every
``refresh_rate`` batches, at most every 0.1 s) does it read the metrics (a
host/device sync) and draw. rich's own refresh thread is not used: it would
render, and so read, on its own schedule.

The bar follows its console (``console_kwargs`` builds it; by default it writes
to stdout): in a terminal (or a notebook) it draws live bars; otherwise (a CI
log, a file) every line would be a control-code frame, so it prints one plain
line every ``print_every_n_steps`` training batches and one as each epoch,
validation, test or predict run ends, with the columns the bar shows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from trainkit.callbacks.progress import ProgressBar, _Track

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn, TaskID
    from rich.style import Style

    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

RICH_EXTRA = "pip install 'trainkit[rich]'"

#: The columns :mod:`trainkit.callbacks.rich_columns` defines, by Lightning's names:
#: listed here, where rich is not imported, so that the ported module can serve them
#: without importing rich.
RICH_COLUMNS = (
    "BatchesProcessedColumn",
    "CustomBarColumn",
    "CustomInfiniteTask",
    "CustomProgress",
    "CustomTimeColumn",
    "MetricsTextColumn",
    "ProcessingSpeedColumn",
)


def require_rich(feature: str) -> None:
    """Raise an error naming the extra to install when ``rich`` is missing.

    Args:
        feature: what needs rich, for the message (``"RichProgressBar"``).

    Raises:
        ModuleNotFoundError: rich cannot be imported.
    """
    try:
        import rich  # noqa: F401
    except ImportError as error:
        raise ModuleNotFoundError(
            f"{feature} draws with the rich package, which is not installed; "
            f"install it with: {RICH_EXTRA}"
        ) from error


@dataclass
class RichProgressBarTheme:
    """Styles of the bar's parts (rich style strings or ``rich.style.Style``).

    Args:
        description: the bar's description (``Epoch 0/9``, ``Validation``...).
        progress_bar: the bar while in progress.
        progress_bar_finished: the finished bar.
        progress_bar_pulse: the bar of a run of unknown length (an iterable dataset).
        batch_progress: the batch count (``10/50``).
        time: the elapsed and remaining time.
        processing_speed: the speed (``12.34it/s``).
        metrics: the metrics.
        metrics_text_delimiter: what separates two metrics.
        metrics_format: the format spec of a metric value.

    Example:
        >>> RichProgressBarTheme(metrics_format=".2e").metrics_format
        '.2e'
    """

    description: str | Style = ""
    progress_bar: str | Style = "#6206E0"
    progress_bar_finished: str | Style = "#6206E0"
    progress_bar_pulse: str | Style = "#6206E0"
    batch_progress: str | Style = ""
    time: str | Style = "dim"
    processing_speed: str | Style = "dim underline"
    metrics: str | Style = "italic"
    metrics_text_delimiter: str = " "
    metrics_format: str = ".3f"


def format_rich_metrics(metrics: Mapping[str, Any], theme: RichProgressBarTheme) -> str:
    """The metrics as the rich bar shows them: ``name: value``, in the order given.

    A value that the theme's format does not fit (a version string) shows as is.

    Args:
        metrics: name to value (:meth:`ProgressBar.get_metrics`).
        theme: its ``metrics_format`` and ``metrics_text_delimiter`` apply.

    Example:
        >>> theme = RichProgressBarTheme()
        >>> format_rich_metrics({"v_num": 3, "loss": 0.12345, "run": "ab12"}, theme)
        'v_num: 3.000 loss: 0.123 run: ab12'
    """
    texts = []
    for name, value in metrics.items():
        if not isinstance(value, str):
            try:
                value = format(value, theme.metrics_format)
            except (TypeError, ValueError):
                value = str(value)
        texts.append(f"{name}: {value}")
    return theme.metrics_text_delimiter.join(texts)


def clock_text(seconds: float | None) -> str:
    """A time as the bar shows it: ``0:01:40``; ``-:--:--`` when not known."""
    return "-:--:--" if seconds is None else str(timedelta(seconds=int(seconds)))


def _columns_text(track: _Track, total: float | None) -> dict[str, str]:
    """The batch count, time and speed of a bar, from its counting alone."""
    elapsed = track.elapsed()
    done = track.position - track.first
    rate = done / elapsed if done > 0 and elapsed > 0 else None
    remaining = None
    if rate is not None and total is not None and not math.isinf(total):
        remaining = max(total - track.position, 0) / rate
    shown_total = "--" if total is None or math.isinf(total) else str(int(total))
    return {
        "batches": f"{track.position}/{shown_total}",
        "clock": f"{clock_text(elapsed)} • {clock_text(remaining)}",
        "speed": f"{rate or 0:.2f}it/s",
    }


class RichProgressBar(ProgressBar):
    """Lightning's rich progress bars for training, sanity check, validation, test, predict.

    In a terminal it draws a training bar (its metrics beside it, as Lightning
    shows them: ``v_num: 0.000 train/loss: 0.123``) and a bar for each
    evaluation; elsewhere it prints plain lines (see the module's docstring).
    Rank 0 only.

    Args:
        refresh_rate: redraw at most every this many batches (and at most every
            0.1 s); 0 turns the bar off.
        leave: keep each epoch's finished training bar on screen; when False one
            training bar is reused across epochs.
        theme: the bar's styles.
        console_kwargs: arguments of the ``rich.console.Console`` it writes to
            (``file=``, ``force_terminal=``, ``width=``...).
        print_every_n_steps: when the console is not a terminal, print a line
            every this many training batches (trainkit's, as TQDMProgressBar's).

    Raises:
        ModuleNotFoundError: rich is not installed.

    Example:
        >>> import io
        >>> bar = RichProgressBar(console_kwargs={"file": io.StringIO()})
        >>> bar.is_enabled, RichProgressBar(refresh_rate=0).is_enabled
        (True, False)
    """

    def __init__(
        self,
        refresh_rate: int = 1,
        leave: bool = False,
        theme: RichProgressBarTheme | None = None,
        console_kwargs: dict[str, Any] | None = None,
        *,
        print_every_n_steps: int = 50,
    ) -> None:
        require_rich(type(self).__name__)
        if refresh_rate < 0:
            raise ValueError(
                f"RichProgressBar(refresh_rate={refresh_rate}) must be 0 (no bar) or more."
            )
        if print_every_n_steps < 1:
            raise ValueError(
                f"RichProgressBar(print_every_n_steps={print_every_n_steps}) must be at least 1."
            )
        super().__init__()
        self._refresh_rate = refresh_rate
        self._leave = leave
        self.theme = theme if theme is not None else RichProgressBarTheme()
        self._console_kwargs = dict(console_kwargs or {})
        self.print_every_n_steps = print_every_n_steps
        self._console: Console | None = None
        self.progress: Progress | None = None
        # Whether this run prints plain lines (decided at setup; see is_plain).
        self._plain = False
        self.train_progress_bar_id: TaskID | None = None
        self._eval_id: TaskID | None = None
        # Lightning's names, which subclasses overriding _init_progress set and read:
        # whether the display was stopped, and a metrics column to keep up to date.
        self._progress_stopped = False
        self._metric_component: Any = None

    # ------------------------------------------------------ public state
    @property
    def refresh_rate(self) -> int:
        """Redraw every this many batches (0: the bar is off)."""
        return self._refresh_rate

    @property
    def is_enabled(self) -> bool:
        """Whether the bar draws (or prints) anything: enabled, and ``refresh_rate`` > 0."""
        return self._enabled and self._refresh_rate > 0

    @property
    def console(self) -> Console:
        """The rich console the bar writes to, built from ``console_kwargs``."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._console_kwargs)
        return self._console

    @property
    def is_plain(self) -> bool:
        """Whether the bar prints plain lines: its console is no terminal (nor a notebook)."""
        console = self.console
        live = (console.is_terminal and not console.is_dumb_terminal) or console.is_jupyter
        return not live

    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Decide once, for the run, between live bars and plain lines.

        Args:
            trainer: the running Trainer.
            module: the user's Module.
            stage: one of "fit", "validate", "test", "predict".
        """
        super().setup(trainer, module, stage)
        self._plain = self.is_plain

    @property
    def train_progress_bar(self) -> Any:
        """The rich task of the training bar (while training runs; in plain mode it is
        kept, never drawn)."""
        return self._task(self.train_progress_bar_id, "train")

    @property
    def val_sanity_check_bar(self) -> Any:
        """The rich task of the sanity-check bar (while the check runs)."""
        return self._task(self._eval_id if self._eval.stage == "sanity" else None, "sanity check")

    @property
    def val_progress_bar(self) -> Any:
        """The rich task of the validation bar (while it runs)."""
        return self._task(self._eval_id if self._eval.stage == "validation" else None, "validation")

    @property
    def test_progress_bar(self) -> Any:
        """The rich task of the test bar (while testing runs)."""
        return self._task(self._eval_id if self._eval.stage == "test" else None, "test")

    @property
    def predict_progress_bar(self) -> Any:
        """The rich task of the predict bar (while predicting runs)."""
        return self._task(self._eval_id if self._eval.stage == "predict" else None, "predict")

    def _task(self, task_id: TaskID | None, stage: str) -> Any:
        if self.progress is None or task_id is None:
            raise TypeError(
                f"The {type(self).__name__} {stage} bar has not been created yet; "
                "read it while that stage runs."
            )
        return self.progress.tasks[task_id] if task_id in self.progress.task_ids else None

    def configure_columns(self, trainer: Trainer) -> list[ProgressColumn]:
        """The bar's columns before the metrics: description, bar, batches, time, speed.

        Override it to change them; the values are in the task's fields
        ``batches``, ``clock`` and ``speed``.

        Args:
            trainer: the running Trainer.
        """
        from rich.progress import BarColumn, TextColumn

        theme = self.theme
        return [
            TextColumn("{task.description}", style=theme.description, markup=False),
            BarColumn(
                complete_style=theme.progress_bar,
                finished_style=theme.progress_bar_finished,
                pulse_style=theme.progress_bar_pulse,
            ),
            TextColumn("{task.fields[batches]}", style=theme.batch_progress, markup=False),
            TextColumn("{task.fields[clock]}", style=theme.time, markup=False),
            TextColumn("{task.fields[speed]}", style=theme.processing_speed, markup=False),
        ]

    # ------------------------------------------------------------ drawing
    def _init_progress(self, trainer: Trainer) -> None:
        """Make and start ``self.progress``, the live display: the columns of
        :meth:`configure_columns`, then the metrics.

        Lightning's name: a subclass written for Lightning that overrides it (to
        add columns: a ``MetricsTextColumn`` as ``self._metric_component``, columns of
        its own; see ``trainkit.callbacks.rich_columns``) has its display used.
        """
        from rich.progress import Progress, TextColumn

        # Drawn by our hooks only (auto_refresh=False): no thread reads metrics. In
        # plain mode it keeps the tasks (a subclass may read them, as under
        # Lightning) but never draws: the plain lines show progress.
        self.progress = Progress(
            *self.configure_columns(trainer),
            TextColumn("{task.fields[metrics]}", style=self.theme.metrics, markup=False),
            console=self.console,
            auto_refresh=False,
            disable=self._plain,
        )
        self.progress.start()
        self._progress_stopped = False

    def _start_progress(self, trainer: Trainer) -> Progress:
        if self.progress is None or self._progress_stopped:
            self._init_progress(trainer)
            if self.progress is None:
                raise RuntimeError(
                    f"{type(self).__name__}._init_progress(trainer) made no display: set "
                    "self.progress to a started rich.progress.Progress there."
                )
        return self.progress

    def _reset_progress_bar_ids(self) -> None:
        # Lightning's name: no task is on the (new) display yet.
        self.train_progress_bar_id = None
        self._eval_id = None

    def _stop_progress(self) -> None:
        if self.progress is not None:
            self.progress.stop()  # leaves the last frame on screen
        self.progress = None
        self._progress_stopped = True
        self._reset_progress_bar_ids()

    def _add_task(self, trainer: Trainer, description: str, track: _Track, total: float) -> TaskID:
        progress = self._start_progress(trainer)
        known = None if math.isinf(total) else total
        fields: dict[str, Any] = _columns_text(track, known)
        return progress.add_task(description, total=known, metrics="", **fields)

    def _draw(
        self, task_id: TaskID | None, track: _Track, total: float, metrics: str | None
    ) -> None:
        if self.progress is None or task_id is None:
            return
        known = None if math.isinf(total) else total
        fields: dict[str, Any] = _columns_text(track, known)
        if metrics is not None:
            fields["metrics"] = metrics
        self.progress.update(task_id, completed=track.position, **fields)
        self.refresh()

    def refresh(self, hard: bool = False) -> None:
        """Draw the live bars now (nothing when none is shown, as in plain-line mode).

        The bar draws when its hooks say a frame is due; call this after
        changing a task (``self.progress.update(...)``) in a hook of your own.

        Args:
            hard: accepted as Lightning's; trainkit's bar has no refresh thread to
                defer to, so every refresh draws at once.
        """
        if self.progress is not None:
            self.progress.refresh()

    def _metrics_text(self, trainer: Trainer, module: Module) -> str:
        metrics = self.get_metrics(trainer, module)
        if self._metric_component is not None:  # a subclass's own metrics column
            self._metric_component.update(metrics)
        return format_rich_metrics(metrics, self.theme)

    def _line(self, description: str, track: _Track, total: float, metrics: str) -> None:
        known = None if math.isinf(total) else total
        parts = [description, *_columns_text(track, known).values()]
        if metrics:
            parts.append(metrics)
        # soft_wrap: one log line however long, never cut at the console's width.
        self.console.print(" ".join(parts), markup=False, highlight=False, soft_wrap=True)

    def _train_description(self, trainer: Trainer) -> str:
        return self._get_train_description(trainer.current_epoch)

    def _get_train_description(self, current_epoch: int) -> str:
        """The training bar's description: ``Epoch 3/9`` (Lightning's name: override it
        to say something else)."""
        max_epochs = getattr(self.trainer, "max_epochs", None)
        last = f"/{max_epochs - 1}" if isinstance(max_epochs, int) and max_epochs > 0 else ""
        return f"Epoch {current_epoch}{last}"

    # ---------------------------------------------------------- lifecycle
    def _close_display(self) -> None:
        # Stops the live display, leaving its last frame on screen.
        self._stop_progress()

    # ----------------------------------------------------------- training
    def on_train_epoch_start(self, trainer: Trainer, module: Module) -> None:
        """Start (or reset) the training bar for this epoch."""
        if not self._start_train(trainer):
            return
        total = self.total_train_batches
        description = self._train_description(trainer)
        if self.train_progress_bar_id is not None and self._leave:
            # The finished epoch's bar stays on screen; the new epoch gets a new display.
            self._stop_progress()
        if self.train_progress_bar_id is None:
            self.train_progress_bar_id = self._add_task(trainer, description, self._train, total)
        else:
            assert self.progress is not None
            self.progress.reset(
                self.train_progress_bar_id,
                total=None if math.isinf(total) else total,
                completed=self._train.position,
                description=description,
            )
        self._draw(self.train_progress_bar_id, self._train, total, None)

    def on_train_batch_end(
        self, trainer: Trainer, module: Module, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Count the batch; read metrics and redraw only when a frame is due."""
        if not self._train.active:
            return
        # batch_idx, not a counter: after a mid-epoch resume the bar still ends at total.
        self._train.position = batch_idx + 1
        if self._plain:
            # The epoch's last batch gets its line at the epoch end (with validation's results).
            last = self._train.position == self.total_train_batches
            if self._train.position % self.print_every_n_steps == 0 and not last:
                self._train_line(trainer, self._metrics_text(trainer, module))
            return
        if self._train.due(self._refresh_rate, self._mininterval):
            metrics = self._metrics_text(trainer, module)
            self._draw(self.train_progress_bar_id, self._train, self.total_train_batches, metrics)

    def _train_line(self, trainer: Trainer, metrics: str) -> None:
        self._line(self._train_description(trainer), self._train, self.total_train_batches, metrics)

    def on_train_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Show the epoch's final count and metrics."""
        if not self._train.active:
            return
        self._train.active = False
        metrics = self._metrics_text(trainer, module)
        if self._plain:
            self._train_line(trainer, metrics)
        self._draw(self.train_progress_bar_id, self._train, self.total_train_batches, metrics)

    # --------------------------------------------------------- evaluation
    def _start_eval(self, trainer: Trainer, stage: str, description: str, total: float) -> None:
        if not self._start_eval_count(trainer, stage):
            return
        self._eval_id = self._add_task(trainer, description, self._eval, total)
        self._draw(self._eval_id, self._eval, total, None)

    def _eval_total(self) -> float:
        stage = self._eval.stage
        if stage == "test":
            return self.total_test_batches
        if stage == "predict":
            return self.total_predict_batches
        return self.total_val_batches

    def _eval_batch_end(self, dataloader_idx: int) -> None:
        self._current_eval_dataloader_idx = dataloader_idx
        if not self._eval.active:
            return
        # A counter, not batch_idx: batch_idx restarts for each dataloader.
        self._eval.position += 1
        if not self._plain and self._eval.due(self._refresh_rate, self._mininterval):
            self._draw(self._eval_id, self._eval, self._eval_total(), None)

    def _end_eval(self, trainer: Trainer, description: str, keep: bool) -> None:
        """Finish an evaluation bar: kept on screen (``keep``) or removed."""
        self.reset_dataloader_idx_tracker()
        if not self._eval.active:
            return
        self._eval.active = False
        if self._plain and self._eval.stage != "sanity":  # its results are not real metrics
            self._line(description, self._eval, self._eval_total(), "")
        if self.progress is None:
            return
        if keep:
            self._draw(self._eval_id, self._eval, self._eval_total(), None)
        elif self._eval_id is not None:
            self.progress.remove_task(self._eval_id)
            self.refresh()
        self._eval_id = None

    def on_validation_start(self, trainer: Trainer, module: Module) -> None:
        """Start the validation (or sanity-check) bar."""
        if trainer.sanity_checking:
            self._start_eval(
                trainer, "sanity", self.sanity_check_description, self.total_val_batches
            )
            return
        if self._train.active and not self._plain:
            # The training bar shows where the epoch is while validation runs.
            metrics = self._metrics_text(trainer, module)
            self._draw(self.train_progress_bar_id, self._train, self.total_train_batches, metrics)
        self._start_eval(trainer, "validation", self.validation_description, self.total_val_batches)

    def on_validation_batch_end(
        self,
        trainer: Trainer,
        module: Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        """Count the batch; redraw when a frame is due."""
        self._eval_batch_end(dataloader_idx)

    def on_validation_end(self, trainer: Trainer, module: Module) -> None:
        """End the validation bar; inside fit, it goes and the training bar shows the results."""
        # Validation inside fit runs within a training epoch, before its end.
        fitting = self._train.active
        description = self.sanity_check_description
        if not trainer.sanity_checking:
            description = self.validation_description
        self._end_eval(trainer, description, keep=not fitting and not trainer.sanity_checking)
        if fitting and not self._plain and not trainer.sanity_checking:
            metrics = self._metrics_text(trainer, module)
            self._draw(self.train_progress_bar_id, self._train, self.total_train_batches, metrics)

    def on_test_start(self, trainer: Trainer, module: Module) -> None:
        """Start the test bar."""
        self._start_eval(trainer, "test", self.test_description, self.total_test_batches)

    def on_test_batch_end(
        self,
        trainer: Trainer,
        module: Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        """Count the batch; redraw when a frame is due."""
        self._eval_batch_end(dataloader_idx)

    def on_test_end(self, trainer: Trainer, module: Module) -> None:
        """Finish the test bar (it stays on screen)."""
        self._end_eval(trainer, self.test_description, keep=True)

    def on_predict_start(self, trainer: Trainer, module: Module) -> None:
        """Start the predict bar."""
        self._start_eval(trainer, "predict", self.predict_description, self.total_predict_batches)

    def on_predict_batch_end(
        self,
        trainer: Trainer,
        module: Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        """Count the batch; redraw when a frame is due."""
        self._eval_batch_end(dataloader_idx)

    def on_predict_end(self, trainer: Trainer, module: Module) -> None:
        """Finish the predict bar (it stays on screen)."""
        self._end_eval(trainer, self.predict_description, keep=True)

    def __getstate__(self) -> dict[str, Any]:
        # The console and the live display hold locks and open files: not picklable.
        state = super().__getstate__()
        state["_console"] = None
        state["progress"] = None
        return state

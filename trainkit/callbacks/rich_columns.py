"""The rich progress bar's columns, by the names Lightning gives them.

A project that builds its own rich bar in Lightning's style (a subclass of
``RichProgressBar`` whose ``_init_progress`` makes ``self.progress`` from
``configure_columns(trainer)``, a :class:`MetricsTextColumn` and columns of its
own) finds these here, and the ported
``trainkit.lightning.callbacks.progress.rich_progress`` serves them. They read
rich's task (its ``completed``, ``total``, ``elapsed`` and ``speed``), so they
work in any ``rich.progress.Progress``. Importing this module needs rich
(``pip install "trainkit[rich]"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.progress import BarColumn, Progress, ProgressColumn, Task, TaskID
from rich.progress_bar import ProgressBar
from rich.text import Text

from trainkit.callbacks.rich_progress import (
    RICH_COLUMNS,
    RichProgressBarTheme,
    clock_text,
    format_rich_metrics,
)

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.style import Style

__all__ = list(RICH_COLUMNS)


def _unknown(total: float | None) -> bool:
    return total is None or math.isinf(total)


class CustomInfiniteTask(Task):
    """A task of unknown length (an iterable dataset): no time remaining to show."""

    @property
    def time_remaining(self) -> float | None:
        return None


class CustomProgress(Progress):
    """A ``rich.progress.Progress`` whose tasks may have an infinite total.

    ``add_task(..., total=float("inf"))`` makes a task of unknown length (a
    pulsing bar, ``--`` for its total), as for a loader without a length.

    Example:
        >>> import io
        >>> from rich.console import Console
        >>> progress = CustomProgress(console=Console(file=io.StringIO()), auto_refresh=False)
        >>> task = progress.add_task("Epoch 0", total=float("inf"))
        >>> progress.tasks[task].total is None, type(progress.tasks[task]).__name__
        (True, 'CustomInfiniteTask')
    """

    def add_task(
        self,
        description: str,
        start: bool = True,
        total: float | None = 100.0,
        completed: int = 0,
        visible: bool = True,
        **fields: Any,
    ) -> TaskID:
        if total is None or not math.isinf(total):
            return super().add_task(description, start, total, completed, visible, **fields)
        task_id = super().add_task(description, start, None, completed, visible, **fields)
        with self._lock:  # the same task, as one whose time remaining is never known
            task = self._tasks[task_id]
            infinite = CustomInfiniteTask(
                task.id,
                task.description,
                None,
                task.completed,
                _get_time=task._get_time,
                visible=task.visible,
                fields=task.fields,
            )
            infinite.start_time = task.start_time
            self._tasks[task_id] = infinite
        return task_id


class CustomBarColumn(BarColumn):
    """The bar: pulsing while the total is unknown (infinite, or None)."""

    def render(self, task: Task) -> ProgressBar:
        bar = super().render(task)
        if _unknown(task.total):
            bar.total = None  # rich pulses a bar without a total
        return bar


class _TextColumn(ProgressColumn):
    # A column of one styled text, made from the task.
    default_style: str = ""

    def __init__(self, style: str | Style | None = None) -> None:
        super().__init__()
        self.style = self.default_style if style is None else style

    def render(self, task: Task) -> RenderableType:
        return Text(self.text(task), style=self.style)

    def text(self, task: Task) -> str:
        raise NotImplementedError


class BatchesProcessedColumn(_TextColumn):
    """``done/total`` batches (``--`` for an unknown total).

    Args:
        style: the text's rich style.
    """

    def text(self, task: Task) -> str:
        total = "--" if _unknown(task.total) else int(task.total or 0)
        return f"{int(task.completed)}/{total}"


class CustomTimeColumn(_TextColumn):
    """Time elapsed and remaining: ``0:00:12 • 0:01:40`` (``-:--:--`` when not known).

    Args:
        style: the text's rich style (default ``"dim"``).
    """

    default_style = "dim"

    def text(self, task: Task) -> str:
        remaining = None if _unknown(task.total) else task.time_remaining
        return f"{clock_text(task.elapsed)} • {clock_text(remaining)}"


class ProcessingSpeedColumn(_TextColumn):
    """Batches a second: ``12.34it/s``.

    Args:
        style: the text's rich style (default ``"dim underline"``).
    """

    default_style = "dim underline"

    def text(self, task: Task) -> str:
        return f"{task.speed or 0:.2f}it/s"


class MetricsTextColumn(ProgressColumn):
    """The metrics, on the training bar's row (``loss: 0.123 v_num: 0``).

    The progress bar calls :meth:`update` with the metrics to show whenever it
    reads them (a subclass that makes its own ``self._metric_component`` gets
    them too).

    Args:
        trainer: the running Trainer (its progress bar says which row is training's).
        style: the text's rich style.
        text_delimiter: what separates two metrics.
        metrics_format: the format spec of a metric value.
    """

    def __init__(
        self,
        trainer: Any,
        style: str | Style,
        text_delimiter: str = " ",
        metrics_format: str = ".3f",
    ) -> None:
        super().__init__()
        self._trainer = trainer
        self._style = style
        self._theme = RichProgressBarTheme(
            metrics_text_delimiter=text_delimiter, metrics_format=metrics_format
        )
        self._metrics: dict[str, Any] = {}

    def update(self, metrics: Mapping[str, Any]) -> None:
        """Show these metrics from the next frame on."""
        self._metrics = dict(metrics)

    def render(self, task: Task) -> Text:
        bar = getattr(self._trainer, "progress_bar_callback", None)
        if bar is not None and getattr(bar, "train_progress_bar_id", None) != task.id:
            return Text()  # an evaluation row: its metrics are the training bar's
        return Text(format_rich_metrics(self._metrics, self._theme), style=self._style)

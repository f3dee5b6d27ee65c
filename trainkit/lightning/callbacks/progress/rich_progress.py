"""Lightning's ``lightning.pytorch.callbacks.progress.rich_progress`` names, served by trainkit.

``RichProgressBar`` and its theme, and the rich columns a bar written in
Lightning's style builds its display from (``CustomProgress``,
``MetricsTextColumn``, ``CustomBarColumn``, ``BatchesProcessedColumn``,
``CustomTimeColumn``, ``ProcessingSpeedColumn``, ``CustomInfiniteTask``: see
:mod:`trainkit.callbacks.rich_columns`), which need rich.
"""

from __future__ import annotations

from typing import Any

from trainkit.callbacks import RichProgressBar, RichProgressBarTheme
from trainkit.callbacks.rich_progress import RICH_COLUMNS

__all__ = ["RichProgressBar", "RichProgressBarTheme", *RICH_COLUMNS]


def __getattr__(name: str) -> Any:
    # The columns subclass rich's classes: imported when asked for, so that this module
    # imports without rich (the bar itself says which extra to install).
    if name in RICH_COLUMNS:
        from trainkit.callbacks.rich_progress import require_rich

        require_rich(name)
        from trainkit.callbacks import rich_columns

        return getattr(rich_columns, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

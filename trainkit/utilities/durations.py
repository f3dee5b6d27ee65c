"""How durations and rates read in log lines (the progress bar's and the run summary's)."""

from __future__ import annotations

__all__ = ["format_duration", "format_rate"]


def format_duration(seconds: float) -> str:
    """A duration for a log line: ``4.2s``, ``3m05s``, ``2h07m30s``.

    Args:
        seconds: the duration.

    Example:
        >>> format_duration(4.31), format_duration(185), format_duration(7650)
        ('4.3s', '3m05s', '2h07m30s')
    """
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def format_rate(batches: float, seconds: float) -> str:
    """A rate as tqdm shows it: ``12.3 it/s``, or ``4.56 s/it`` below one batch a second.

    Args:
        batches: batches done.
        seconds: the time they took.

    Example:
        >>> format_rate(100, 8.0), format_rate(2, 9.12), format_rate(1130, 1.0)
        ('12.5 it/s', '4.56 s/it', '1130 it/s')
    """
    if seconds <= 0 or batches <= 0:
        return "? it/s"
    rate = batches / seconds
    if rate >= 100:  # whole numbers, never 1.13e+03
        return f"{rate:.0f} it/s"
    return f"{rate:.3g} it/s" if rate >= 1 else f"{1 / rate:.3g} s/it"

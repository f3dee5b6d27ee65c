"""Small helpers for messages to the user: suggestions, result tables."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, options: Iterable[str]) -> str:
    """`` Did you mean 'x'?`` for the closest of ``options`` to ``name``, or ``""``.

    Args:
        name: what the user wrote.
        options: the valid names.

    Example:
        >>> did_you_mean("max_epoch", ["max_epochs", "max_steps"])
        " Did you mean 'max_epochs'?"
    """
    close = difflib.get_close_matches(str(name), list(options), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def format_results(fn: str, results: list[dict[str, float]]) -> str:
    """The metrics ``validate``/``test`` return, as the text they print with ``verbose``.

    Args:
        fn: "validate" or "test".
        results: one dict of metrics per dataloader.

    Example:
        >>> print(format_results("test", [{"test/acc": 0.5}]))
        test results
          test/acc  0.5
    """
    lines = []
    for index, metrics in enumerate(results):
        title = f"{fn} results" + (f" (dataloader {index})" if len(results) > 1 else "")
        width = max((len(name) for name in metrics), default=0)
        lines.append(title)
        lines += [f"  {name:<{width}}  {value:.6g}" for name, value in sorted(metrics.items())]
    return "\n".join(lines)

"""Small helpers for error messages."""

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

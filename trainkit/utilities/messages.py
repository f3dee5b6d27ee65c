"""Small helpers for error messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, options: Iterable[str], n: int = 1) -> str:
    """`` Did you mean 'x'?`` for the closest of ``options`` to ``name``, or ``""``.

    Args:
        name: what the user wrote.
        options: the valid names.
        n: how many close names to offer at most.

    Example:
        >>> did_you_mean("max_epoch", ["max_epochs", "max_steps"])
        " Did you mean 'max_epochs'?"
        >>> did_you_mean("dpp", ["dp", "ddp", "hybrid"], n=2)
        " Did you mean 'dp' or 'ddp'?"
    """
    close = difflib.get_close_matches(str(name), list(options), n=n)
    return f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


class UsageError(Exception):
    """A problem the user can fix (a setting, a missing file or package), not a bug.

    Raise a subclass from your own Module or DataModule (alongside the built-in
    exception it is, e.g. ``class DataMissing(UsageError, FileNotFoundError)``)
    when the message says everything the user needs: the ``trainkit`` command
    prints it as one ``trainkit: error: ...`` line and exits with status 2,
    without a traceback (``--traceback`` or ``TRAINKIT_DEBUG=1`` shows it).
    Any other exception keeps its traceback.
    """

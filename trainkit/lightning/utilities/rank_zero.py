"""Lightning's ``lightning.pytorch.utilities.rank_zero`` names, with Lightning's signatures.

``rank_zero_warn`` and ``rank_zero_deprecation`` take Lightning's ``stacklevel``
(counted as Lightning counts it: the default 4 names the caller's line) and
``warnings.warn``'s keywords; ``rank_zero_debug`` logs at DEBUG on global rank 0;
``WarningCache`` says each message once.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from trainkit.utilities.rank_zero import global_rank, rank_zero_only
from trainkit.utilities.rank_zero import rank_zero_print as rank_zero_info

__all__ = [
    "LightningDeprecationWarning",
    "WarningCache",
    "rank_prefixed_message",
    "rank_zero_debug",
    "rank_zero_deprecation",
    "rank_zero_info",
    "rank_zero_only",
    "rank_zero_warn",
]

_log = logging.getLogger(__name__)
# Lightning's default stacklevel (4) counts three frames of its own before the caller;
# these functions have one.
_LIGHTNING_FRAMES = 2


class LightningDeprecationWarning(DeprecationWarning):
    """A deprecation in code ported from Lightning."""


def rank_zero_warn(message: str | Warning, stacklevel: int = 4, **kwargs: Any) -> None:
    """``warnings.warn(message, **kwargs)`` on global rank 0 only, from the caller's line.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     rank_zero_warn("careful", category=RuntimeWarning)
        >>> caught[0].category.__name__, str(caught[0].message)
        ('RuntimeWarning', 'careful')
    """
    if global_rank() == 0:
        level = max(1, stacklevel - _LIGHTNING_FRAMES)
        warnings.warn(message, stacklevel=level, **kwargs)


def rank_zero_deprecation(message: str | Warning, stacklevel: int = 5, **kwargs: Any) -> None:
    """:func:`rank_zero_warn` with a ``LightningDeprecationWarning`` (unless ``category``)."""
    kwargs.setdefault("category", LightningDeprecationWarning)
    rank_zero_warn(message, stacklevel=stacklevel, **kwargs)


def rank_zero_debug(*args: Any, stacklevel: int = 4, **kwargs: Any) -> None:
    """``logging.debug`` on global rank 0 only."""
    if global_rank() == 0:
        _log.debug(*args, stacklevel=max(1, stacklevel - _LIGHTNING_FRAMES), **kwargs)


def rank_prefixed_message(message: str, rank: int | None) -> str:
    """``message`` with ``[rank: N] `` in front (as it is, without a rank)."""
    return f"[rank: {rank}] {message}" if rank is not None else message


class WarningCache(set[str]):
    """Says each message once (on global rank 0): a second identical one is dropped."""

    def warn(self, message: str, stacklevel: int = 5, **kwargs: Any) -> None:
        if message not in self:
            self.add(message)
            rank_zero_warn(message, stacklevel=stacklevel, **kwargs)

    def deprecation(self, message: str, stacklevel: int = 6, **kwargs: Any) -> None:
        if message not in self:
            self.add(message)
            rank_zero_deprecation(message, stacklevel=stacklevel, **kwargs)

    def info(self, message: str, stacklevel: int = 5, **kwargs: Any) -> None:
        if message not in self:
            self.add(message)
            rank_zero_info(message)

"""Doing something on global rank 0 only: printing, warning, writing files.

Only for work that involves no other process. Anything that talks to the other
processes (a collective, ``self.log(..., sync_dist=True)``, saving a checkpoint)
must run on every rank, or the job hangs.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def global_rank() -> int:
    """This process's global rank (``rank_zero_only.rank``)."""
    return rank_zero_only.rank


class _RankZeroOnly:
    """The ``rank_zero_only`` decorator; its ``rank`` attribute overrides the environment.

    ``rank_zero_only.rank`` reads the rank from torchrun's or SLURM's variables
    (0 if neither); assigning it fixes the rank instead (tests pretend to be
    another rank that way; None goes back to the environment).
    """

    def __init__(self) -> None:
        self._rank: int | None = None

    @property
    def rank(self) -> int:
        """This process's global rank."""
        if self._rank is not None:
            return self._rank
        return int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))

    @rank.setter
    def rank(self, rank: int | None) -> None:
        self._rank = rank

    def __call__(self, function: F) -> F:
        """Decorate ``function`` so that it runs on global rank 0 and returns None elsewhere.

        Args:
            function: the function.

        Example:
            >>> @rank_zero_only
            ... def hello():
            ...     return "hello from rank 0"
            >>> hello()
            'hello from rank 0'
        """

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return function(*args, **kwargs) if global_rank() == 0 else None

        return wrapper  # type: ignore[return-value]


#: Decorates a function to run on global rank 0 only (see :class:`_RankZeroOnly`).
rank_zero_only = _RankZeroOnly()


@rank_zero_only
def rank_zero_print(*args: Any, **kwargs: Any) -> None:
    """``print`` on global rank 0 only.

    Args:
        *args: passed to ``print``.
        **kwargs: passed to ``print``.
    """
    print(*args, **kwargs)


@rank_zero_only
def rank_zero_warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` on global rank 0 only.

    Args:
        message: the warning.
        category: the warning class.
    """
    warnings.warn(message, category, stacklevel=3)

"""Doing something on global rank 0 only: printing, warning, writing files.

Only for work that involves no other process. Anything that talks to the other
processes (a collective, ``self.log(..., sync_dist=True)``, saving a checkpoint)
must run on every rank, or the job hangs.

Many libraries (torchmetrics, Lightning projects' own loggers) decide the same
thing through ``lightning_utilities``' ``rank_zero_only``, whose ``rank`` must be
set before use. When that package is installed (trainkit does not need it),
trainkit sets its rank as Lightning does: from the launcher's variables when
trainkit is imported (:func:`share_rank_with_lightning_utilities`), and to the
global rank when a Trainer sets up its processes; assigning
``trainkit.rank_zero_only.rank`` sets both, so the two always agree.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
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
        return int(next((os.environ[name] for name in _RANK_VARIABLES if name in os.environ), 0))

    @rank.setter
    def rank(self, rank: int | None) -> None:
        self._rank = rank
        _set_lightning_utilities_rank(self.rank)

    def __call__(self, function: F, default: Any = None) -> F:
        """Decorate ``function`` so that it runs on global rank 0 and returns ``default``
        elsewhere.

        Args:
            function: the function.
            default: what the other ranks get (None unless given).

        Example:
            >>> @rank_zero_only
            ... def hello():
            ...     return "hello from rank 0"
            >>> hello()
            'hello from rank 0'
        """

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return function(*args, **kwargs) if global_rank() == 0 else default

        return wrapper  # type: ignore[return-value]


#: Decorates a function to run on global rank 0 only (see :class:`_RankZeroOnly`).
rank_zero_only = _RankZeroOnly()

# The launchers' variables that hold the global rank (torchrun, SLURM).
_RANK_VARIABLES = ("RANK", "SLURM_PROCID")


def _set_lightning_utilities_rank(rank: int, *, unless_set: bool = False) -> None:
    # Imported only when installed: it is not one of trainkit's dependencies.
    if (
        "lightning_utilities" not in sys.modules
        and importlib.util.find_spec("lightning_utilities") is None
    ):
        return
    try:
        from lightning_utilities.core.rank_zero import rank_zero_only as theirs
    except ImportError:  # blocked (sys.modules entry None) or broken: nothing to tell
        return

    if not (unless_set and getattr(theirs, "rank", None) is not None):
        # Their decorator keeps the rank as a function attribute (typed as overloads).
        setattr(theirs, "rank", rank)  # noqa: B010


def share_rank_with_lightning_utilities() -> None:
    """Give ``lightning_utilities``' ``rank_zero_only.rank`` this process's rank, if installed.

    Called when trainkit is imported, as Lightning does when it is imported. A
    launcher's variable (torchrun's ``RANK``, SLURM's ``SLURM_PROCID``) is the
    global rank and always wins; without one, a rank another library set first
    is kept (it may know better), and an unset one becomes 0. A Trainer sets
    the global rank again when it sets up its processes.
    """
    launched = any(name in os.environ for name in _RANK_VARIABLES)
    _set_lightning_utilities_rank(rank_zero_only.rank, unless_set=not launched)


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


#: :func:`rank_zero_warn` with a ``DeprecationWarning``, for a project's own
#: deprecations (Lightning's name).
rank_zero_deprecation = functools.partial(rank_zero_warn, category=DeprecationWarning)

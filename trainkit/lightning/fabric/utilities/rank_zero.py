"""Lightning Fabric's ``lightning.fabric.utilities.rank_zero`` names, served by trainkit."""

from __future__ import annotations

import os

from trainkit.lightning.utilities.rank_zero import (
    LightningDeprecationWarning,
    rank_prefixed_message,
    rank_zero_debug,
    rank_zero_deprecation,
    rank_zero_info,
    rank_zero_only,
    rank_zero_warn,
)

__all__ = [
    "LightningDeprecationWarning",
    "rank_prefixed_message",
    "rank_zero_debug",
    "rank_zero_deprecation",
    "rank_zero_info",
    "rank_zero_only",
    "rank_zero_warn",
]
# Private in Lightning, but projects compare their own rank lookup with it.
__all__ += ["_get_rank"]

# The variables Lightning reads, in its order (LOCAL_RANK before SLURM_PROCID,
# which SLURM sets even when it does not start the processes).
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


def _get_rank() -> int | None:
    """The rank the first of Lightning's launcher variables that is set gives; None if none is.

    Example:
        >>> import os
        >>> saved = {k: os.environ.pop(k) for k in _RANK_VARIABLES if k in os.environ}
        >>> os.environ["LOCAL_RANK"] = "3"
        >>> _get_rank()
        3
        >>> del os.environ["LOCAL_RANK"]
        >>> _get_rank() is None
        True
        >>> os.environ.update(saved)
    """
    return next((int(os.environ[key]) for key in _RANK_VARIABLES if key in os.environ), None)

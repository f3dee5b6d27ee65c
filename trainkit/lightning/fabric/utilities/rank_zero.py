"""Lightning Fabric's ``lightning.fabric.utilities.rank_zero`` names, served by trainkit."""

from __future__ import annotations

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

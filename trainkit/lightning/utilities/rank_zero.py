"""Lightning's ``lightning.pytorch.utilities.rank_zero`` names, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.utilities import rank_zero_info
from trainkit.utilities.rank_zero import rank_zero_only, rank_zero_warn

__all__ = ["rank_zero_info", "rank_zero_only", "rank_zero_warn"]

"""Lightning's ``lightning.pytorch.utilities.combined_loader`` names, served by trainkit."""

from __future__ import annotations

from trainkit.utilities.combined_loader import CombinedLoader

__all__ = ["CombinedLoader"]

"""Lightning's ``lightning.pytorch.callbacks.rich_model_summary`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import RichModelSummary

__all__ = ["RichModelSummary"]

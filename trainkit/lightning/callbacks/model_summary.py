"""Lightning's ``lightning.pytorch.callbacks.model_summary`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import ModelSummary

__all__ = ["ModelSummary"]

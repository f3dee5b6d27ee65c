"""Lightning's ``lightning.pytorch.callbacks.finetuning`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import BackboneFinetuning, BaseFinetuning
from trainkit.callbacks.finetuning import multiplicative

__all__ = ["BackboneFinetuning", "BaseFinetuning", "multiplicative"]

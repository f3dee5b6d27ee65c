"""Lightning's ``lightning.pytorch.utilities.memory`` names."""

from __future__ import annotations

import gc

import torch

__all__ = ["garbage_collection_cuda"]


def garbage_collection_cuda() -> None:
    """Collect Python's garbage, then give the CUDA cache's unused memory back (if CUDA is up)."""
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        torch.cuda.empty_cache()

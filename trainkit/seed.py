"""Seeding and deterministic settings."""

from __future__ import annotations

import os
import random

import torch


def seed_everything(seed: int) -> int:
    """Seed Python's, NumPy's (when installed) and torch's random generators.

    Args:
        seed: the seed, an integer in [0, 2**32 - 1].

    Returns:
        The seed.

    Example:
        >>> import torch
        >>> _ = seed_everything(7); a = torch.rand(1)
        >>> _ = seed_everything(7); bool(torch.equal(a, torch.rand(1)))
        True
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an integer in [0, 2**32 - 1], got {seed!r}.")
    os.environ["TRAINKIT_GLOBAL_SEED"] = str(seed)
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:  # numpy is optional
        pass
    torch.manual_seed(seed)  # seeds CUDA generators too
    return seed


def set_deterministic(enabled: bool) -> None:
    """Make torch choose deterministic kernels (and fail on ops that have none).

    Args:
        enabled: turn determinism on (True) or leave torch's defaults (False).
    """
    if not enabled:
        return
    # cuBLAS needs a fixed workspace to be deterministic; it must be set before
    # the first cuBLAS call, so set it here rather than leave it to the user.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False

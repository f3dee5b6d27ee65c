"""Lightning's ``lightning.pytorch.utilities.seed`` names, served by trainkit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from trainkit.utilities.seed import capture_rng_states, restore_rng_states, seed_everything

__all__ = ["isolate_rng", "seed_everything"]


@contextlib.contextmanager
def isolate_rng(include_cuda: bool = True) -> Iterator[None]:
    """Leave Python's, NumPy's and torch's random states as they were once the block ends.

    Args:
        include_cuda: also restore the CUDA generators' states (where CUDA is in use).

    Example:
        >>> import torch
        >>> with isolate_rng():
        ...     inside = torch.rand(1)
        >>> bool(torch.equal(inside, torch.rand(1)))  # the same draw again
        True
    """
    states = capture_rng_states()
    if not include_cuda:
        states.pop("cuda", None)
    try:
        yield
    finally:
        restore_rng_states(states)

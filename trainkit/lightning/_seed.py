"""Lightning's ``seed_everything`` and ``reset_seed``, for every porting module that has them.

``seed_everything`` is trainkit's, recording the seed where trainkit reads it
(``TRAINKIT_GLOBAL_SEED``, ``TRAINKIT_SEED_WORKERS``) and where Lightning records
it (``PL_GLOBAL_SEED``, ``PL_SEED_WORKERS``): Lightning projects read those to seed
what they draw themselves (a dataset's own sampling, a copied ``worker_init_fn``),
and would otherwise draw the same numbers whatever the seed. ``reset_seed`` seeds
again from either.
"""

from __future__ import annotations

import os

from trainkit.utilities import seed as _seed

__all__ = ["reset_seed", "seed_everything"]

#: Where Lightning records the seed and the ``workers`` choice ("1" or "0").
SEED_VARIABLE, WORKERS_VARIABLE = "PL_GLOBAL_SEED", "PL_SEED_WORKERS"


def seed_everything(
    seed: int | str | None = None, workers: bool = False, verbose: bool = False
) -> int:
    """trainkit's :func:`~trainkit.utilities.seed.seed_everything`, also recording the
    seed in ``PL_GLOBAL_SEED`` and ``workers`` in ``PL_SEED_WORKERS``, as Lightning's does.

    Args:
        seed: the seed, an integer in [0, 2**32 - 1]. None reads
            ``TRAINKIT_GLOBAL_SEED``, else ``PL_GLOBAL_SEED``, else 0 with a warning.
        workers: seed DataLoader workers per rank and worker.
        verbose: print the seed used.

    Returns:
        The seed.

    Example:
        >>> import os
        >>> seed_everything(7)
        7
        >>> os.environ["PL_GLOBAL_SEED"], os.environ["PL_SEED_WORKERS"]
        ('7', '0')
    """
    if seed is None and _seed.SEED_VARIABLE not in os.environ:
        found = os.environ.get(SEED_VARIABLE)
        if found is not None and not found.strip().isdigit():
            raise ValueError(
                f"{SEED_VARIABLE}={found!r} is not a seed; set it to an integer in "
                "[0, 2**32 - 1], or pass seed_everything(seed)."
            )
        seed = found
    chosen = _seed.seed_everything(seed, workers=workers, verbose=verbose)
    os.environ[SEED_VARIABLE], os.environ[WORKERS_VARIABLE] = str(chosen), str(int(workers))
    return chosen


def reset_seed() -> None:
    """Seed again with what :func:`seed_everything` last set: from ``TRAINKIT_GLOBAL_SEED``,
    else ``PL_GLOBAL_SEED`` (nothing, if neither is set)."""
    if _seed.SEED_VARIABLE in os.environ:
        _seed.reset_seed()
    elif (found := os.environ.get(SEED_VARIABLE)) is not None:
        seed_everything(found, workers=os.environ.get(WORKERS_VARIABLE) == "1")

"""Lightning Fabric's ``lightning.fabric.utilities.seed`` names, served by trainkit.

``seed_everything`` and ``reset_seed`` record and read the seed where trainkit
does and where Lightning does (``PL_GLOBAL_SEED``, ``PL_SEED_WORKERS``; see
:mod:`trainkit.lightning._seed`). ``pl_worker_init_function`` gives each DataLoader
worker of each rank its own reproducible streams, as Lightning's does, drawn by
trainkit's rule (:func:`trainkit.utilities.seed.seed_worker`), so the numbers differ
from Lightning's.
"""

from __future__ import annotations

from trainkit.lightning._seed import reset_seed, seed_everything
from trainkit.utilities.seed import seed_worker

__all__ = ["pl_worker_init_function", "reset_seed", "seed_everything"]


def pl_worker_init_function(worker_id: int, rank: int | None = None) -> None:
    """A DataLoader ``worker_init_fn``: seed this worker's generators for its rank and index.

    Args:
        worker_id: the worker's index (given by the DataLoader).
        rank: the process's global rank (None: this process's).
    """
    seed_worker(worker_id, rank)

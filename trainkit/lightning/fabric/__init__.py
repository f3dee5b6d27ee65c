"""Lightning Fabric's names that Lightning projects import, under ``trainkit.lightning.fabric``.

Porting maps ``lightning.fabric`` (and ``lightning_fabric``) to this package, as
``lightning.pytorch`` maps to ``trainkit.lightning``. It holds the utilities such
projects use next to the Trainer (seeding, rank-zero helpers, types, data and
file helpers, in :mod:`.utilities`). Fabric itself, the ``Fabric`` class that
runs a loop the user writes, is not provided: trainkit's Trainer runs the loop.
"""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import LIGHTNING_API_VERSION, submodule_or_missing
from trainkit.lightning._seed import seed_everything

__all__ = ["__version__", "seed_everything"]

#: The Lightning release whose API this package follows, as ``trainkit.lightning``'s.
__version__ = LIGHTNING_API_VERSION


def __getattr__(name: str) -> Any:
    return submodule_or_missing(__name__, name, __all__)

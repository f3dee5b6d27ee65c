"""Lightning's ``lightning.pytorch.utilities.seed`` names, served by trainkit."""

from __future__ import annotations

from trainkit.lightning._seed import seed_everything
from trainkit.utilities.seed import isolated_rng as isolate_rng

__all__ = ["isolate_rng", "seed_everything"]

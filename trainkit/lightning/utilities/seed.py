"""Lightning's ``lightning.pytorch.utilities.seed`` names, served by trainkit."""

from __future__ import annotations

from trainkit.utilities.seed import isolated_rng as isolate_rng
from trainkit.utilities.seed import seed_everything

__all__ = ["isolate_rng", "seed_everything"]

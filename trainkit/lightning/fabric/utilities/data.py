"""Lightning Fabric's ``lightning.fabric.utilities.data`` names, served by trainkit."""

from __future__ import annotations

from trainkit.core.hyperparameters import AttributeDict
from trainkit.lightning.utilities.data import suggested_max_num_workers

__all__ = ["AttributeDict", "suggested_max_num_workers"]

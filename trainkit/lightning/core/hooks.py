"""Lightning's ``lightning.pytorch.core.hooks`` names, served by trainkit.

``ModelHooks`` (where the run is) and ``CheckpointHooks`` are bases of the Module,
``DataHooks`` (data preparation, the optional dataloaders, the batch transfer
hooks) of the Module and the DataModule, as in Lightning; each hook does nothing
by default.
"""

from __future__ import annotations

from trainkit.core.hooks import CheckpointHooks, DataHooks
from trainkit.core.hooks import ModuleHooks as ModelHooks

__all__ = ["CheckpointHooks", "DataHooks", "ModelHooks"]

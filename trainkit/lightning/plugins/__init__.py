"""Lightning's ``lightning.pytorch.plugins`` names that trainkit accepts.

The cluster environments (see :mod:`trainkit.lightning.plugins.environments`);
precision, checkpoint-IO and layer-sync plugins are trainkit options instead
(``precision=``, its own checkpoint files, ``sync_batchnorm=True``): docs/porting.md.
"""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import missing
from trainkit.lightning.plugins.environments import (
    LightningEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)

__all__ = ["LightningEnvironment", "SLURMEnvironment", "TorchElasticEnvironment"]


def __getattr__(name: str) -> Any:
    raise missing(__name__, name, __all__)

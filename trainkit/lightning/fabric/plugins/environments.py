"""Lightning Fabric's ``lightning.fabric.plugins.environments``: the same classes as
:mod:`trainkit.lightning.plugins.environments` (one class per environment, as in Lightning)."""

from trainkit.lightning.plugins.environments import (
    ClusterEnvironment,
    LightningEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)

__all__ = [
    "ClusterEnvironment",
    "LightningEnvironment",
    "SLURMEnvironment",
    "TorchElasticEnvironment",
]

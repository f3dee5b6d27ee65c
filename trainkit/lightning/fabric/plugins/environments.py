"""Lightning Fabric's ``lightning.fabric.plugins.environments``: the same classes as
:mod:`trainkit.lightning.plugins.environments` (one class per environment, as in Lightning)."""

from trainkit.lightning.plugins.environments import (
    LightningEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)

__all__ = ["LightningEnvironment", "SLURMEnvironment", "TorchElasticEnvironment"]

"""Lightning Fabric's ``lightning.fabric.plugins``: its ``environments`` submodule.

Lightning's Trainer takes Fabric's cluster environment classes
(``lightning.pytorch.plugins.environments`` re-exports them), so projects import
them from either path; :mod:`.environments` gives the classes of
:mod:`trainkit.lightning.plugins.environments`.
"""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing

__all__: list[str] = []


def __getattr__(name: str) -> Any:
    # Lightning's submodules reached as attributes, as after importing Lightning.
    return submodule_or_missing(__name__, name, __all__)

"""Lightning's ``lightning.pytorch.trainer.connectors``: the one connector projects import.

Lightning's connectors are private parts of its Trainer; trainkit's Trainer has
none. ``accelerator_connector._AcceleratorConnector`` is provided because
projects call it on its own to resolve ``accelerator`` and ``devices`` the way a
Trainer would (scvi-tools does, at import time).
"""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing

__all__: list[str] = []


def __getattr__(name: str) -> Any:
    # Lightning's submodules reached as attributes, as after importing Lightning.
    return submodule_or_missing(__name__, name, __all__)

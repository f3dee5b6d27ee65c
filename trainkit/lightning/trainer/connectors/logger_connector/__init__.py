"""Lightning's ``lightning.pytorch.trainer.connectors.logger_connector``: a type projects import."""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing

__all__: list[str] = []


def __getattr__(name: str) -> Any:
    # Lightning's submodules reached as attributes, as after importing Lightning.
    return submodule_or_missing(__name__, name, __all__)

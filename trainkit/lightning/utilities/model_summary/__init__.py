"""Lightning's ``lightning.pytorch.utilities.model_summary`` names, on trainkit's summary.

The classes and functions live in :mod:`.model_summary`, Lightning's module path
for them, which projects import too.
"""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing
from trainkit.lightning.utilities.model_summary.model_summary import (
    LayerSummary,
    ModelSummary,
    get_formatted_model_size,
    get_human_readable_count,
    summarize,
)

__all__ = [
    "LayerSummary",
    "ModelSummary",
    "get_formatted_model_size",
    "get_human_readable_count",
    "summarize",
]


def __getattr__(name: str) -> Any:
    # Lightning's submodules reached as attributes, as after importing Lightning.
    return submodule_or_missing(__name__, name, __all__)

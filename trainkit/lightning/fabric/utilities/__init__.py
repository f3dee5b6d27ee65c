"""Lightning Fabric's ``lightning.fabric.utilities`` names, served by trainkit."""

from __future__ import annotations

from typing import Any

from trainkit.core.batches import move_data_to_device
from trainkit.core.hyperparameters import AttributeDict
from trainkit.lightning._missing import submodule_or_missing
from trainkit.lightning.utilities import (
    LightningEnum,
    disable_possible_user_warnings,
    is_shared_filesystem,
    measure_flops,
    rank_zero_deprecation,
    rank_zero_info,
    rank_zero_only,
    rank_zero_warn,
    suggested_max_num_workers,
)
from trainkit.utilities.throughput import Throughput

__all__ = [
    "AttributeDict",
    "LightningEnum",
    "Throughput",
    "disable_possible_user_warnings",
    "is_shared_filesystem",
    "measure_flops",
    "move_data_to_device",
    "rank_zero_deprecation",
    "rank_zero_info",
    "rank_zero_only",
    "rank_zero_warn",
    "suggested_max_num_workers",
]


def __getattr__(name: str) -> Any:
    return submodule_or_missing(__name__, name, __all__)

"""Lightning's ``lightning.pytorch.utilities`` names that trainkit provides."""

from __future__ import annotations

from typing import Any

from trainkit.core.batches import move_data_to_device
from trainkit.core.hyperparameters import AttributeDict
from trainkit.lightning._missing import submodule_or_missing
from trainkit.lightning._seed import seed_everything
from trainkit.lightning.utilities.data import suggested_max_num_workers
from trainkit.lightning.utilities.distributed import is_shared_filesystem
from trainkit.lightning.utilities.enums import GradClipAlgorithmType, LightningEnum
from trainkit.lightning.utilities.parameter_tying import (
    find_shared_parameters,
    set_shared_parameters,
)
from trainkit.lightning.utilities.parsing import is_picklable
from trainkit.lightning.utilities.rank_zero import (
    rank_zero_deprecation,
    rank_zero_info,
    rank_zero_only,
    rank_zero_warn,
)
from trainkit.lightning.utilities.warnings import disable_possible_user_warnings
from trainkit.utilities.combined_loader import CombinedLoader
from trainkit.utilities.gradients import grad_norm
from trainkit.utilities.throughput import measure_flops

__all__ = [
    "AttributeDict",
    "CombinedLoader",
    "GradClipAlgorithmType",
    "LightningEnum",
    "disable_possible_user_warnings",
    "find_shared_parameters",
    "grad_norm",
    "is_picklable",
    "is_shared_filesystem",
    "measure_flops",
    "move_data_to_device",
    "rank_zero_deprecation",
    "rank_zero_info",
    "rank_zero_only",
    "rank_zero_warn",
    "seed_everything",
    "set_shared_parameters",
    "suggested_max_num_workers",
]


def __getattr__(name: str) -> Any:
    return submodule_or_missing(__name__, name, __all__)

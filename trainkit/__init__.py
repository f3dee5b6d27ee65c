"""trainkit: a Lightning-style training framework on PyTorch.

The public API is importable from here. Heavy optional packages (tensorboard,
omegaconf, tqdm) are imported only when a feature that needs them is used, so
``import trainkit`` costs little more than ``import torch``.
"""

from trainkit.callbacks.base import Callback
from trainkit.data import DataModule
from trainkit.module import Module
from trainkit.rank_zero import rank_zero_only, rank_zero_print, rank_zero_warn
from trainkit.seed import seed_everything
from trainkit.trainer import Trainer

__version__ = "0.1.0"

__all__ = [
    "Callback",
    "DataModule",
    "Module",
    "Trainer",
    "__version__",
    "rank_zero_only",
    "rank_zero_print",
    "rank_zero_warn",
    "seed_everything",
]

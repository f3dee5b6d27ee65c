"""Lightning's ``lightning.pytorch.callbacks`` names, served by trainkit's callbacks."""

from __future__ import annotations

from typing import Any

from trainkit.callbacks import (
    BackboneFinetuning,
    BaseFinetuning,
    BasePredictionWriter,
    Callback,
    EarlyStopping,
    GradientAccumulation,
    GradientClipping,
    LambdaCallback,
    LearningRateMonitor,
    MixedPrecision,
    ModelCheckpoint,
    ModelSummary,
    NonFiniteLoss,
    TQDMProgressBar,
)
from trainkit.lightning._missing import missing

__all__ = [
    "BackboneFinetuning",
    "BaseFinetuning",
    "BasePredictionWriter",
    "Callback",
    "EarlyStopping",
    "GradientAccumulation",
    "GradientClipping",
    "LambdaCallback",
    "LearningRateMonitor",
    "MixedPrecision",
    "ModelCheckpoint",
    "ModelSummary",
    "NonFiniteLoss",
    "TQDMProgressBar",
]


def __getattr__(name: str) -> Any:
    raise missing(__name__, name, __all__)

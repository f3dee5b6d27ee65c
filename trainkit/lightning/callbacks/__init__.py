"""Lightning's ``lightning.pytorch.callbacks`` names, served by trainkit's callbacks."""

from __future__ import annotations

from typing import Any

from trainkit.callbacks import (
    BackboneFinetuning,
    BaseFinetuning,
    BasePredictionWriter,
    BatchSizeFinder,
    Callback,
    Checkpoint,
    DeviceStatsMonitor,
    EarlyStopping,
    EMAWeightAveraging,
    GradientAccumulation,
    GradientAccumulationScheduler,
    GradientClipping,
    LambdaCallback,
    LearningRateFinder,
    LearningRateMonitor,
    MixedPrecision,
    ModelCheckpoint,
    ModelPruning,
    ModelSummary,
    NonFiniteLoss,
    OnExceptionCheckpoint,
    ProgressBar,
    RichModelSummary,
    RichProgressBar,
    RichProgressBarTheme,
    SpikeDetection,
    StochasticWeightAveraging,
    ThroughputMonitor,
    Timer,
    TQDMProgressBar,
    WeightAveraging,
)
from trainkit.lightning._missing import submodule_or_missing

__all__ = [
    "BackboneFinetuning",
    "BaseFinetuning",
    "BasePredictionWriter",
    "BatchSizeFinder",
    "Callback",
    "Checkpoint",
    "DeviceStatsMonitor",
    "EMAWeightAveraging",
    "EarlyStopping",
    "GradientAccumulation",
    "GradientAccumulationScheduler",
    "GradientClipping",
    "LambdaCallback",
    "LearningRateFinder",
    "LearningRateMonitor",
    "MixedPrecision",
    "ModelCheckpoint",
    "ModelPruning",
    "ModelSummary",
    "NonFiniteLoss",
    "OnExceptionCheckpoint",
    "ProgressBar",
    "RichModelSummary",
    "RichProgressBar",
    "RichProgressBarTheme",
    "SpikeDetection",
    "StochasticWeightAveraging",
    "TQDMProgressBar",
    "ThroughputMonitor",
    "Timer",
    "WeightAveraging",
]


def __getattr__(name: str) -> Any:
    return submodule_or_missing(__name__, name, __all__)

"""Callbacks: plain objects whose ``on_*`` hooks the loop calls after the Module's own."""

from trainkit.callbacks.accumulation import GradientAccumulation
from trainkit.callbacks.base import Callback
from trainkit.callbacks.checkpoint import ModelCheckpoint
from trainkit.callbacks.clipping import GradientClipping
from trainkit.callbacks.early_stopping import EarlyStopping
from trainkit.callbacks.finetuning import BackboneFinetuning, BaseFinetuning
from trainkit.callbacks.lambda_callback import LambdaCallback
from trainkit.callbacks.lr_monitor import LearningRateMonitor
from trainkit.callbacks.model_summary import ModelSummary
from trainkit.callbacks.nonfinite import NonFiniteLoss, NonFiniteLossError
from trainkit.callbacks.precision import MixedPrecision
from trainkit.callbacks.prediction_writer import BasePredictionWriter
from trainkit.callbacks.progress import TQDMProgressBar
from trainkit.callbacks.summary import RunSummary

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
    "NonFiniteLossError",
    "RunSummary",
    "TQDMProgressBar",
]

"""Callbacks: plain objects whose ``on_*`` hooks the loop calls after the Module's own."""

from trainkit.callbacks.base import Callback
from trainkit.callbacks.checkpoint import ModelCheckpoint
from trainkit.callbacks.early_stopping import EarlyStopping
from trainkit.callbacks.lr_monitor import LearningRateMonitor
from trainkit.callbacks.model_summary import ModelSummary
from trainkit.callbacks.progress import TQDMProgressBar

__all__ = [
    "Callback",
    "EarlyStopping",
    "LearningRateMonitor",
    "ModelCheckpoint",
    "ModelSummary",
    "TQDMProgressBar",
]

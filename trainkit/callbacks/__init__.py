"""Callbacks: plain objects whose ``on_*`` hooks the loop calls after the Module's own."""

from trainkit.callbacks.accumulation import GradientAccumulation, GradientAccumulationScheduler
from trainkit.callbacks.base import Callback, Checkpoint
from trainkit.callbacks.batch_size_finder import BatchSizeFinder
from trainkit.callbacks.checkpoint import ModelCheckpoint
from trainkit.callbacks.clipping import GradientClipping
from trainkit.callbacks.device_stats import DeviceStatsMonitor
from trainkit.callbacks.early_stopping import EarlyStopping
from trainkit.callbacks.finetuning import BackboneFinetuning, BaseFinetuning
from trainkit.callbacks.lambda_callback import LambdaCallback
from trainkit.callbacks.lr_finder import LearningRateFinder
from trainkit.callbacks.lr_monitor import LearningRateMonitor
from trainkit.callbacks.model_summary import ModelSummary
from trainkit.callbacks.nonfinite import NonFiniteLoss, NonFiniteLossError
from trainkit.callbacks.on_exception_checkpoint import OnExceptionCheckpoint
from trainkit.callbacks.precision import MixedPrecision
from trainkit.callbacks.prediction_writer import BasePredictionWriter
from trainkit.callbacks.progress import ProgressBar, TQDMProgressBar
from trainkit.callbacks.pruning import ModelPruning
from trainkit.callbacks.rich_model_summary import RichModelSummary
from trainkit.callbacks.rich_progress import RichProgressBar, RichProgressBarTheme
from trainkit.callbacks.spike import SpikeDetection
from trainkit.callbacks.summary import RunSummary
from trainkit.callbacks.swa import StochasticWeightAveraging
from trainkit.callbacks.throughput_monitor import ThroughputMonitor
from trainkit.callbacks.timer import Timer
from trainkit.callbacks.weight_averaging import EMAWeightAveraging, WeightAveraging

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
    "NonFiniteLossError",
    "OnExceptionCheckpoint",
    "ProgressBar",
    "RichModelSummary",
    "RichProgressBar",
    "RichProgressBarTheme",
    "RunSummary",
    "SpikeDetection",
    "StochasticWeightAveraging",
    "TQDMProgressBar",
    "ThroughputMonitor",
    "Timer",
    "WeightAveraging",
]

"""Porting is one prefix replacement: Lightning's documented module paths resolve here.

``lightning.pytorch.X.Y.Name`` -> ``trainkit.lightning.X.Y.Name``, in Python and in
config files' ``class_path``. Each path below is where Lightning defines (or
documents) the class; with Lightning installed, the test also checks that
Lightning really has it there.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import torch

import trainkit
from trainkit import callbacks, loggers, profilers
from trainkit.callbacks import device_stats
from trainkit.callbacks.early_stopping import EarlyStoppingReason
from trainkit.cli.lightning_cli import ArgsType, SaveConfigCallback
from trainkit.cli.lightning_parser import (
    LightningArgumentParser,
    LRSchedulerCallable,
    OptimizerCallable,
)
from trainkit.core import hooks as core_hooks
from trainkit.core import types
from trainkit.core.hyperparameters import HyperparametersMixin
from trainkit.core.loading import instantiate_module
from trainkit.lightning.callbacks import finetuning as lightning_finetuning
from trainkit.lightning.callbacks import prediction_writer as lightning_writer
from trainkit.lightning.callbacks import timer as lightning_timer
from trainkit.lightning.callbacks.progress import progress_bar as lightning_progress_bar
from trainkit.lightning.callbacks.progress import tqdm_progress
from trainkit.lightning.cli import LightningCLI  # builds the ported Trainer
from trainkit.lightning.core import optimizer as lightning_optimizer
from trainkit.lightning.core import saving
from trainkit.lightning.demos import lstm as demo_lstm
from trainkit.lightning.demos import mnist_datamodule
from trainkit.lightning.demos import transformer as demo_transformer
from trainkit.lightning.demos.boring_classes import (
    BoringDataModule,
    BoringModel,
    ManualOptimBoringModel,
    RandomDataset,
)
from trainkit.lightning.fabric.utilities import cloud_io
from trainkit.lightning.fabric.utilities import logger as fabric_logger
from trainkit.lightning.loggers import csv_logs, tensorboard, wandb
from trainkit.lightning.loggers import logger as lightning_logger
from trainkit.lightning.plugins import environments, layer_sync
from trainkit.lightning.plugins import io as plugin_io
from trainkit.lightning.plugins import precision as lightning_precision
from trainkit.lightning.strategies.parallel import ParallelStrategy
from trainkit.lightning.trainer.trainer import Trainer as PortedTrainer
from trainkit.lightning.utilities import compile as lightning_compile
from trainkit.lightning.utilities import data as lightning_data
from trainkit.lightning.utilities import distributed as lightning_distributed
from trainkit.lightning.utilities import (
    enums,
    exceptions,
    memory,
    model_helpers,
    model_summary,
    parameter_tying,
)
from trainkit.lightning.utilities import imports as lightning_imports
from trainkit.lightning.utilities import parsing as lightning_parsing
from trainkit.lightning.utilities import rank_zero as lightning_rank_zero
from trainkit.lightning.utilities import seed as lightning_seed
from trainkit.lightning.utilities import warnings as lightning_warnings
from trainkit.lightning.utilities.model_summary import model_summary as summary_module
from trainkit.loops import state
from trainkit.trainer import accelerators
from trainkit.tuner import Tuner
from trainkit.utilities.combined_loader import CombinedLoader
from trainkit.utilities.gradients import grad_norm
from trainkit.utilities.throughput import Throughput, get_available_flops, measure_flops

from ..helpers import QUIET

PATHS = [
    ("callbacks.batch_size_finder", "BatchSizeFinder", callbacks.BatchSizeFinder),
    ("callbacks.callback", "Callback", trainkit.Callback),
    ("callbacks.device_stats_monitor", "DeviceStatsMonitor", callbacks.DeviceStatsMonitor),
    ("callbacks.early_stopping", "EarlyStopping", callbacks.EarlyStopping),
    ("callbacks.early_stopping", "EarlyStoppingReason", EarlyStoppingReason),
    ("callbacks.finetuning", "BackboneFinetuning", callbacks.BackboneFinetuning),
    (
        "callbacks.gradient_accumulation_scheduler",
        "GradientAccumulationScheduler",
        callbacks.GradientAccumulationScheduler,
    ),
    ("callbacks.lambda_function", "LambdaCallback", callbacks.LambdaCallback),
    ("callbacks.lr_finder", "LearningRateFinder", callbacks.LearningRateFinder),
    ("callbacks.lr_monitor", "LearningRateMonitor", callbacks.LearningRateMonitor),
    ("callbacks.model_checkpoint", "ModelCheckpoint", callbacks.ModelCheckpoint),
    ("callbacks.model_summary", "ModelSummary", callbacks.ModelSummary),
    ("callbacks.on_exception_checkpoint", "OnExceptionCheckpoint", callbacks.OnExceptionCheckpoint),
    ("callbacks.prediction_writer", "BasePredictionWriter", callbacks.BasePredictionWriter),
    ("callbacks.progress", "TQDMProgressBar", callbacks.TQDMProgressBar),
    ("callbacks.progress.progress_bar", "ProgressBar", callbacks.ProgressBar),
    ("callbacks.progress.rich_progress", "RichProgressBar", callbacks.RichProgressBar),
    ("callbacks.progress.tqdm_progress", "TQDMProgressBar", callbacks.TQDMProgressBar),
    ("callbacks.pruning", "ModelPruning", callbacks.ModelPruning),
    ("callbacks.rich_model_summary", "RichModelSummary", callbacks.RichModelSummary),
    (
        "callbacks.stochastic_weight_avg",
        "StochasticWeightAveraging",
        callbacks.StochasticWeightAveraging,
    ),
    ("callbacks.throughput_monitor", "ThroughputMonitor", callbacks.ThroughputMonitor),
    ("callbacks.timer", "Timer", callbacks.Timer),
    ("callbacks", "SpikeDetection", callbacks.SpikeDetection),
    ("callbacks.spike", "SpikeDetection", callbacks.SpikeDetection),
    ("callbacks.weight_averaging", "WeightAveraging", callbacks.WeightAveraging),
    ("cli", "LightningCLI", LightningCLI),
    ("cli", "SaveConfigCallback", SaveConfigCallback),
    ("cli", "LightningArgumentParser", LightningArgumentParser),
    ("cli", "OptimizerCallable", OptimizerCallable),
    ("cli", "LRSchedulerCallable", LRSchedulerCallable),
    ("cli", "ArgsType", ArgsType),
    ("cli", "instantiate_module", instantiate_module),
    ("core.datamodule", "LightningDataModule", trainkit.DataModule),
    ("core.module", "LightningModule", trainkit.Module),
    # Lightning's default folder (and W&B project), lightning_logs: subclasses of trainkit's.
    ("loggers.csv_logs", "CSVLogger", csv_logs.CSVLogger),
    ("loggers.logger", "DummyLogger", loggers.DummyLogger),
    ("loggers.logger", "Logger", loggers.Logger),
    ("loggers.mlflow", "MLFlowLogger", loggers.MLflowLogger),
    ("loggers.tensorboard", "TensorBoardLogger", tensorboard.TensorBoardLogger),
    ("loggers.wandb", "WandbLogger", wandb.WandbLogger),
    ("profilers.advanced", "AdvancedProfiler", profilers.AdvancedProfiler),
    ("profilers.base", "PassThroughProfiler", profilers.PassThroughProfiler),
    ("profilers.profiler", "Profiler", profilers.Profiler),
    ("profilers.pytorch", "PyTorchProfiler", profilers.PyTorchProfiler),
    ("profilers.simple", "SimpleProfiler", profilers.SimpleProfiler),
    ("trainer", "Trainer", PortedTrainer),
    ("trainer.trainer", "Trainer", PortedTrainer),
    ("trainer.states", "TrainerFn", state.TrainerFn),
    ("trainer.states", "RunningStage", state.RunningStage),
    ("tuner", "Tuner", Tuner),
    ("tuner.tuning", "Tuner", Tuner),
    ("utilities.rank_zero", "rank_zero_only", trainkit.rank_zero_only),
    ("utilities.parsing", "AttributeDict", trainkit.lightning.utilities.AttributeDict),
    ("utilities", "CombinedLoader", CombinedLoader),
    (
        "utilities",
        "disable_possible_user_warnings",
        lightning_warnings.disable_possible_user_warnings,
    ),
    ("utilities", "suggested_max_num_workers", lightning_data.suggested_max_num_workers),
    ("utilities", "is_shared_filesystem", lightning_distributed.is_shared_filesystem),
    ("strategies", "ParallelStrategy", ParallelStrategy),
    ("plugins.environments", "SLURMEnvironment", environments.SLURMEnvironment),
    ("plugins.environments", "LightningEnvironment", environments.LightningEnvironment),
    ("plugins.environments", "TorchElasticEnvironment", environments.TorchElasticEnvironment),
    ("plugins", "MixedPrecision", lightning_precision.MixedPrecision),
    ("plugins.precision", "Precision", lightning_precision.Precision),
    ("plugins.precision", "MixedPrecision", lightning_precision.MixedPrecision),
    ("plugins.precision", "HalfPrecision", lightning_precision.HalfPrecision),
    ("plugins.precision", "DoublePrecision", lightning_precision.DoublePrecision),
    ("plugins.precision", "FSDPPrecision", lightning_precision.FSDPPrecision),
    ("plugins.layer_sync", "TorchSyncBatchNorm", layer_sync.TorchSyncBatchNorm),
    ("plugins", "TorchSyncBatchNorm", layer_sync.TorchSyncBatchNorm),
    ("plugins.io", "CheckpointIO", plugin_io.CheckpointIO),
    ("plugins.io", "TorchCheckpointIO", plugin_io.TorchCheckpointIO),
    ("plugins.io", "AsyncCheckpointIO", plugin_io.AsyncCheckpointIO),
    ("accelerators", "Accelerator", accelerators.Accelerator),
    ("accelerators", "CPUAccelerator", accelerators.CPUAccelerator),
    ("accelerators", "CUDAAccelerator", accelerators.CUDAAccelerator),
    ("accelerators", "MPSAccelerator", accelerators.MPSAccelerator),
    ("accelerators", "find_usable_cuda_devices", accelerators.find_usable_cuda_devices),
    ("utilities.types", "STEP_OUTPUT", types.STEP_OUTPUT),
    ("utilities.types", "OptimizerLRScheduler", types.OptimizerLRScheduler),
    ("utilities.types", "TRAIN_DATALOADERS", types.TRAIN_DATALOADERS),
    ("utilities.types", "EVAL_DATALOADERS", types.EVAL_DATALOADERS),
    ("utilities.types", "LRSchedulerConfig", types.LRSchedulerConfig),
    ("utilities.types", "LRSchedulerTypeUnion", types.LRSchedulerTypeUnion),
    ("utilities.types", "OptimizerLRSchedulerConfig", types.OptimizerLRSchedulerConfig),
    ("utilities.grads", "grad_norm", grad_norm),
    ("utilities", "GradClipAlgorithmType", enums.GradClipAlgorithmType),
    ("utilities", "LightningEnum", enums.LightningEnum),
    ("utilities.rank_zero", "rank_zero_debug", lightning_rank_zero.rank_zero_debug),
    ("utilities.rank_zero", "rank_zero_deprecation", lightning_rank_zero.rank_zero_deprecation),
    ("utilities.rank_zero", "WarningCache", lightning_rank_zero.WarningCache),
    (
        "utilities.rank_zero",
        "LightningDeprecationWarning",
        lightning_rank_zero.LightningDeprecationWarning,
    ),
    ("utilities.memory", "recursive_detach", memory.recursive_detach),
    ("utilities.memory", "is_oom_error", memory.is_oom_error),
    ("utilities.seed", "isolate_rng", lightning_seed.isolate_rng),
    ("utilities.model_helpers", "is_overridden", model_helpers.is_overridden),
    ("utilities.model_summary", "ModelSummary", model_summary.ModelSummary),
    ("utilities.memory", "garbage_collection_cuda", memory.garbage_collection_cuda),
    ("utilities.exceptions", "MisconfigurationException", exceptions.MisconfigurationException),
    ("utilities.warnings", "PossibleUserWarning", lightning_warnings.PossibleUserWarning),
    ("core.mixins", "HyperparametersMixin", HyperparametersMixin),
    ("core.saving", "save_hparams_to_yaml", saving.save_hparams_to_yaml),
    ("core.saving", "load_hparams_from_yaml", saving.load_hparams_from_yaml),
    ("core.saving", "get_filesystem", cloud_io.get_filesystem),
    ("fabric.utilities.throughput", "measure_flops", measure_flops),
    ("fabric.utilities.throughput", "get_available_flops", get_available_flops),
    ("fabric.utilities.throughput", "Throughput", Throughput),
    ("loggers.logger", "rank_zero_experiment", lightning_logger.rank_zero_experiment),
    ("utilities.combined_loader", "CombinedLoader", CombinedLoader),
    ("demos.boring_classes", "BoringModel", BoringModel),
    ("demos.boring_classes", "RandomDataset", RandomDataset),
    ("demos.boring_classes", "BoringDataModule", BoringDataModule),
    ("demos.mnist_datamodule", "MNIST", mnist_datamodule.MNIST),
    ("demos", "Transformer", demo_transformer.Transformer),
    ("demos", "WikiText2", demo_transformer.WikiText2),
    ("demos.transformer", "LightningTransformer", demo_transformer.LightningTransformer),
    ("demos", "SimpleLSTM", demo_lstm.SimpleLSTM),
    ("demos.lstm", "SequenceSampler", demo_lstm.SequenceSampler),
    ("demos.lstm", "LightningLSTM", demo_lstm.LightningLSTM),
    ("utilities.model_helpers", "get_torchvision_model", model_helpers.get_torchvision_model),
    ("utilities.imports", "_TORCHVISION_AVAILABLE", lightning_imports._TORCHVISION_AVAILABLE),
    ("utilities.imports", "_RICH_AVAILABLE", lightning_imports._RICH_AVAILABLE),
    # Deeper paths that projects import.
    ("utilities.model_summary.model_summary", "ModelSummary", model_summary.ModelSummary),
    ("utilities.model_summary.model_summary", "summarize", summary_module.summarize),
    ("utilities.model_summary", "summarize", summary_module.summarize),
    ("utilities.model_summary", "get_human_readable_count", model_summary.get_human_readable_count),
    (
        "utilities.model_summary.model_summary",
        "get_formatted_model_size",
        summary_module.get_formatted_model_size,
    ),
    ("callbacks.progress.tqdm_progress", "Tqdm", tqdm_progress.Tqdm),
    ("callbacks.progress.tqdm_progress", "convert_inf", tqdm_progress.convert_inf),
    (
        "callbacks.progress.progress_bar",
        "get_standard_metrics",
        lightning_progress_bar.get_standard_metrics,
    ),
    ("callbacks.prediction_writer", "WriteInterval", lightning_writer.WriteInterval),
    ("callbacks.timer", "Interval", lightning_timer.Interval),
    ("callbacks.finetuning", "multiplicative", lightning_finetuning.multiplicative),
    ("core.optimizer", "do_nothing_closure", lightning_optimizer.do_nothing_closure),
    ("loggers.logger", "merge_dicts", lightning_logger.merge_dicts),
    ("loggers.csv_logs", "ExperimentWriter", csv_logs.ExperimentWriter),
    ("trainer.states", "TrainerState", state.RunState),
    ("trainer.states", "TrainerStatus", state.TrainerStatus),
    ("utilities.data", "extract_batch_size", lightning_data.extract_batch_size),
    ("utilities.data", "has_len_all_ranks", lightning_data.has_len_all_ranks),
    ("utilities.exceptions", "SIGTERMException", exceptions.SIGTERMException),
    ("utilities.types", "DistributedDataParallel", torch.nn.parallel.DistributedDataParallel),
    ("utilities.compile", "from_compiled", lightning_compile.from_compiled),
    ("utilities.compile", "to_uncompiled", lightning_compile.to_uncompiled),
    ("utilities", "is_picklable", lightning_parsing.is_picklable),
    ("utilities.parsing", "lightning_getattr", lightning_parsing.lightning_getattr),
    ("utilities.parsing", "get_init_args", lightning_parsing.get_init_args),
    ("utilities", "find_shared_parameters", parameter_tying.find_shared_parameters),
    ("utilities.parameter_tying", "set_shared_parameters", parameter_tying.set_shared_parameters),
    ("core.mixins.hparams_mixin", "HyperparametersMixin", HyperparametersMixin),
    ("plugins.precision.amp", "MixedPrecision", lightning_precision.MixedPrecision),
    ("plugins.precision.double", "DoublePrecision", lightning_precision.DoublePrecision),
    ("plugins.precision.half", "HalfPrecision", lightning_precision.HalfPrecision),
    ("plugins.precision.fsdp", "FSDPPrecision", lightning_precision.FSDPPrecision),
    ("plugins.precision.precision", "Precision", lightning_precision.Precision),
    ("plugins.io.checkpoint_plugin", "CheckpointIO", plugin_io.CheckpointIO),
    ("plugins.io.torch_plugin", "TorchCheckpointIO", plugin_io.TorchCheckpointIO),
    ("plugins.io.async_plugin", "AsyncCheckpointIO", plugin_io.AsyncCheckpointIO),
    ("accelerators.accelerator", "Accelerator", accelerators.Accelerator),
    ("accelerators.cpu", "CPUAccelerator", accelerators.CPUAccelerator),
    ("accelerators.cpu", "get_cpu_stats", device_stats.cpu_stats),
    ("accelerators.cuda", "CUDAAccelerator", accelerators.CUDAAccelerator),
    ("accelerators.mps", "MPSAccelerator", accelerators.MPSAccelerator),
    ("core.hooks", "ModelHooks", core_hooks.ModuleHooks),
    ("core.hooks", "DataHooks", core_hooks.DataHooks),
    ("core.hooks", "CheckpointHooks", core_hooks.CheckpointHooks),
    # The parameter helpers each logger module imports from Fabric, imported from there.
    *[
        (f"loggers.{module}", name, getattr(fabric_logger, name))
        for module, names in {
            "mlflow": ("_add_prefix", "_convert_params", "_flatten_dict"),
            "wandb": (
                "_add_prefix",
                "_convert_json_serializable",
                "_convert_params",
                "_sanitize_callable_params",
            ),
            "tensorboard": ("_convert_params",),
            "csv_logs": ("_convert_params",),
        }.items()
        for name in names
    ],
]


@pytest.mark.parametrize(("path", "name", "expected"), PATHS, ids=[f"{p}.{n}" for p, n, _ in PATHS])
def test_lightnings_module_paths_resolve_to_trainkits_objects(
    path: str, name: str, expected: object
) -> None:
    module = importlib.import_module(f"trainkit.lightning.{path}")
    assert getattr(module, name) is expected


@pytest.mark.skipif(importlib.util.find_spec("lightning") is None, reason="needs Lightning")
@pytest.mark.parametrize(("path", "name"), [(p, n) for p, n, _ in PATHS])
def test_each_path_is_where_lightning_has_the_name(path: str, name: str) -> None:
    assert hasattr(importlib.import_module(f"lightning.pytorch.{path}"), name)


def test_the_boring_classes_have_lightnings_shapes_and_train() -> None:
    data = BoringDataModule()
    data.setup("fit")
    assert len(data.train_dataloader()) == len(data.val_dataloader()) == 64
    assert next(iter(data.train_dataloader())).shape == (1, 32)
    model = BoringModel()
    assert model(RandomDataset(32, 4)[:]).shape == (4, 2)
    trainer = trainkit.Trainer(max_epochs=1, limit_train_batches=4, limit_val_batches=2, **QUIET)
    trainer.fit(model, datamodule=data)
    assert trainer.global_step == 4
    (result,) = trainer.test(model, verbose=False)
    assert result == {}  # BoringModel's test_step returns its loss and logs nothing
    manual = trainkit.Trainer(max_epochs=1, limit_train_batches=3, limit_val_batches=0, **QUIET)
    manual.fit(ManualOptimBoringModel())
    assert manual.global_step == 3


def test_subpackages_are_reached_as_attributes_as_after_importing_lightning() -> None:
    # A fresh interpreter: nothing else has imported the subpackages first.
    code = (
        "import trainkit.lightning as L\n"
        "assert L.plugins.precision.MixedPrecision is L.plugins.MixedPrecision\n"
        "assert L.accelerators.CPUAccelerator.is_available()\n"
        "assert L.core.saving.load_hparams_from_yaml\n"
        "assert L.utilities.model_summary.ModelSummary\n"
        "assert L.callbacks.progress.TQDMProgressBar\n"
        "assert L.callbacks.progress.progress_bar.get_standard_metrics\n"
        "assert L.trainer.states.TrainerFn.FITTING\n"
        "assert L.plugins.precision.amp.MixedPrecision is L.plugins.MixedPrecision\n"
        "assert L.plugins.io.torch_plugin.TorchCheckpointIO\n"
        "assert L.utilities.model_summary.model_summary.summarize\n"
        "assert L.core.mixins.hparams_mixin.HyperparametersMixin\n"
        "for path in ('nonexistent', 'utilities.nonexistent'):\n"
        "    try:\n"
        "        eval('L.' + path)\n"
        "    except AttributeError as error:\n"
        '        assert "does not provide Lightning\'s nonexistent" in str(error), error\n'
        "    else:\n"
        "        raise AssertionError(path)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_every_porting_package_with_submodules_reaches_them_as_attributes() -> None:
    # A package added later without the hook would answer AttributeError for
    # ``L.<package>.<submodule>`` where Lightning answers the module.
    root = Path(trainkit.__file__).parent / "lightning"
    lacking = [
        str(init.relative_to(root.parent))
        for init in root.rglob("__init__.py")
        if [
            p
            for p in init.parent.iterdir()
            if p.name != "__init__.py" and not p.name.startswith(("_", "."))
        ]
        and "submodule_or_missing" not in init.read_text()
    ]
    assert lacking == []


def test_a_submodule_that_cannot_load_is_an_attribute_error_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainkit.lightning._missing import submodule_or_missing

    package = tmp_path / "porting_probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "needs_extra.py").write_text("raise ImportError('pip install the-extra')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AttributeError, match="needs_extra cannot be loaded: pip install the-extra"):
        submodule_or_missing("porting_probe", "needs_extra", [])
    with pytest.raises(AttributeError, match="does not provide Lightning's absent") as caught:
        submodule_or_missing("porting_probe", "absent", [])
    assert "It has ;" not in str(caught.value)  # a package with no names lists none


def test_version_checks_take_the_lightning_2_6_code_paths() -> None:
    # Lightning projects gate code on the version they import; trainkit.lightning
    # follows Lightning 2.6's API, so such gates choose the 2.6 paths.
    from packaging.version import Version

    import trainkit.lightning as lightning
    from trainkit.lightning import fabric

    assert Version(lightning.__version__) >= Version("2.6")
    assert fabric.__version__ == lightning.__version__
    assert trainkit.__version__ != lightning.__version__  # trainkit's own stays its own


def test_lightning_pytorch_reached_from_the_top_package_is_the_same_package() -> None:
    # `from lightning import pytorch as pl` and `L.pytorch.Trainer`, after porting.
    import trainkit.lightning as L
    from trainkit.lightning import pytorch as pl

    assert pl is L and L.pytorch.Trainer is L.Trainer


def test_the_cli_module_has_lightnings_scheduler_types_and_signature_flag() -> None:
    from torch.optim.lr_scheduler import LRScheduler

    from trainkit.lightning import cli

    assert cli.LRSchedulerTypeTuple == (LRScheduler, cli.ReduceLROnPlateau)
    assert set(typing.get_args(cli.LRSchedulerTypeUnion)) == set(cli.LRSchedulerTypeTuple)
    assert cli._JSONARGPARSE_SIGNATURES_AVAILABLE is True

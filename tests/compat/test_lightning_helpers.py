"""Lightning's helper modules a ported project imports: types, saving, seeds, summaries,
overridden hooks, custom loggers' experiments, exceptions and warnings."""

from __future__ import annotations

import importlib.util
import warnings
from argparse import Namespace
from pathlib import Path
from typing import Any, get_args

import pytest
import torch

import trainkit
import trainkit.lightning as L
from trainkit.core.hyperparameters import AttributeDict
from trainkit.lightning.core.saving import load_hparams_from_yaml, save_hparams_to_yaml
from trainkit.lightning.loggers.logger import DummyExperiment, rank_zero_experiment
from trainkit.lightning.utilities.exceptions import MisconfigurationException
from trainkit.lightning.utilities.memory import garbage_collection_cuda
from trainkit.lightning.utilities.model_helpers import is_overridden
from trainkit.lightning.utilities.model_summary import ModelSummary
from trainkit.lightning.utilities.seed import isolate_rng
from trainkit.lightning.utilities.types import STEP_OUTPUT, OptimizerLRScheduler
from trainkit.lightning.utilities.warnings import PossibleUserWarning
from trainkit.utilities.rank_zero import rank_zero_only

from ..helpers import QUIET, Classifier, blobs, loader


class Typed(Classifier):
    """A Module annotated with Lightning's types, as typed projects write it."""

    def training_step(self, batch: Any, batch_idx: int) -> STEP_OUTPUT:
        return super().training_step(batch, batch_idx)

    def configure_optimizers(self) -> OptimizerLRScheduler:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_a_module_annotated_with_lightnings_types_trains() -> None:
    trainer = trainkit.Trainer(max_steps=2, **QUIET)
    trainer.fit(Typed(), loader(blobs(64)))
    assert trainer.global_step == 2
    assert type(None) in get_args(OptimizerLRScheduler) and torch.optim.Optimizer in get_args(
        OptimizerLRScheduler
    )


def test_hyperparameters_go_to_yaml_and_back(tmp_path: Path) -> None:
    path = tmp_path / "hparams.yaml"
    save_hparams_to_yaml(path, Namespace(lr=0.1, layers=[2, 3], name="net", dtype=torch.float32))
    loaded = load_hparams_from_yaml(path, use_omegaconf=False)
    # What YAML cannot hold is kept as its repr, as trainkit's loggers write hparams.yaml.
    assert loaded == {"lr": 0.1, "layers": [2, 3], "name": "net", "dtype": "torch.float32"}
    save_hparams_to_yaml(path, AttributeDict(lr=0.2))
    config = load_hparams_from_yaml(path)  # an OmegaConf DictConfig, as Lightning returns
    assert config.lr == 0.2 and type(config).__name__ == "DictConfig"
    with pytest.raises(FileNotFoundError, match="no-folder does not exist; create it first"):
        save_hparams_to_yaml(tmp_path / "no-folder" / "h.yaml", {"a": 1})
    with pytest.warns(RuntimeWarning, match="does not exist; no hyperparameters were read"):
        assert load_hparams_from_yaml(tmp_path / "missing.yaml") == {}


def test_omegaconf_interpolations_are_written_resolved(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    config = OmegaConf.create({"width": 4, "hidden": "${width}"})
    save_hparams_to_yaml(tmp_path / "h.yaml", config)
    assert load_hparams_from_yaml(tmp_path / "h.yaml", use_omegaconf=False) == {
        "width": 4,
        "hidden": 4,
    }


def test_isolate_rng_leaves_the_random_state_as_it_was() -> None:
    torch.manual_seed(3)
    expected = torch.rand(2)
    torch.manual_seed(3)
    with isolate_rng():
        torch.rand(5)
    assert torch.equal(torch.rand(2), expected)


def test_is_overridden_for_modules_callbacks_and_a_given_parent() -> None:
    class Hooked(trainkit.Callback):
        def on_train_start(self, trainer: Any, module: Any) -> None: ...

    assert is_overridden("training_step", Classifier())
    assert not is_overridden("on_train_end", Classifier())
    assert is_overridden("on_train_start", Hooked()) and not is_overridden("on_fit_end", Hooked())
    assert not is_overridden("training_step", None)
    assert is_overridden("forward", torch.nn.Linear(2, 2), parent=torch.nn.Module)
    with pytest.raises(ValueError, match="pass parent="):
        is_overridden("forward", torch.nn.Linear(2, 2))
    assert not is_overridden("trainig_step", Classifier())  # no such method: False

    class Extra(Classifier):
        def extra_hook(self) -> None: ...

    with pytest.raises(ValueError, match="Module has no method 'extra_hook' to override"):
        is_overridden("extra_hook", Extra(), parent=trainkit.Module)


def test_is_overridden_judges_wrappers_mocks_and_partials_by_what_they_run() -> None:
    import functools
    from unittest.mock import Mock, patch

    def passing(function: Any) -> Any:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return function(*args, **kwargs)

        return wrapper

    class Wrapped(Classifier):
        on_fit_start = passing(trainkit.Module.on_fit_start)  # the default, wrapped
        training_step = passing(Classifier.training_step)  # an override, wrapped

    assert not is_overridden("on_fit_start", Wrapped()) and is_overridden(
        "training_step", Wrapped()
    )
    model = Classifier()
    model.on_fit_start = Mock()  # counts calls, runs nothing: not an override
    model.on_train_start = Mock(wraps=model.on_train_start)  # wraps the default
    model.training_step = Mock(wraps=model.training_step)  # wraps an override
    assert not is_overridden("on_fit_start", model) and not is_overridden("on_train_start", model)
    assert is_overridden("training_step", model)
    model.on_train_end = functools.partial(trainkit.Module.on_train_end, model)
    assert not is_overridden("on_train_end", model)
    with patch.object(Classifier, "on_fit_end"):
        assert not is_overridden("on_fit_end", Classifier())


def test_a_mock_hook_is_still_called_by_the_trainer() -> None:
    from unittest.mock import Mock

    model = Classifier()
    model.on_fit_start = Mock()
    trainkit.Trainer(max_epochs=1, **QUIET).fit(model, loader(blobs(16), 16))
    model.on_fit_start.assert_called_once_with()


def test_model_summary_lists_the_layers_and_prints_the_fit_table() -> None:
    from trainkit.callbacks.model_summary import summarize

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    model[2].requires_grad_(False)
    summary = ModelSummary(model, max_depth=1)
    assert summary.layer_names == ["0", "1", "2"]
    assert summary.layer_types == ["Linear", "ReLU", "Linear"]
    assert summary.param_nums == [15, 0, 4] and summary.total_layer_params == 19
    assert (summary.total_parameters, summary.trainable_parameters) == (19, 15)
    assert summary.model_size == pytest.approx(19 * 4 / 1e6)
    assert str(summary) == summarize(model, 1)
    assert ModelSummary(model, max_depth=0).layer_names == []
    # Without an example input, Lightning's placeholders; one eval-mode layer counted.
    model[1].eval()
    summary = ModelSummary(model, max_depth=1)
    assert summary.in_sizes == summary.out_sizes == ["?", "?", "?"]
    assert summary.flop_counts == {"0": {}, "1": {}, "2": {}}
    assert summary.total_training_modes == {"train": 2, "eval": 1}


def test_model_summary_sizes_and_flops_come_from_the_example_input() -> None:
    # The values Lightning 2.6.6's ModelSummary gives for the same model.
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    model.example_input_array = torch.zeros(3, 4)
    summary = ModelSummary(model, max_depth=1)
    assert summary.in_sizes == [[3, 4], [3, 8], [3, 8]]
    assert summary.out_sizes == [[3, 8], [3, 8], [3, 2]]
    flops = {name: sum(counts.values()) for name, counts in summary.flop_counts.items()}
    assert flops == {"0": 192, "1": 0, "2": 96} and summary.total_flops == 288

    # Lightning's per-layer table, which projects read (pytorch_tabular renders it).
    layers = summary._layer_summary
    assert list(layers) == ["0", "1", "2"]
    assert [layer.layer_type for layer in layers.values()] == ["Linear", "ReLU", "Linear"]
    assert [layer.num_parameters for layer in layers.values()] == [40, 0, 18]
    assert layers["2"].in_size == [3, 8] and layers["2"].out_size == [3, 2]
    assert all(layer.training for layer in layers.values())


def test_model_summary_gives_its_layers_and_columns_by_lightnings_names() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
    model.example_input_array = torch.zeros(3, 4)
    summary = ModelSummary(model, max_depth=1)
    layers = summary.summarize()
    assert list(layers) == ["0", "1"] and layers["0"].in_size == [3, 4]
    # Every hook a LayerSummary added is gone; its handle stays, as Lightning's.
    assert all(
        layer._hook_handle.id not in layer._hook_handle.hooks_dict_ref()
        for layer in layers.values()
    )
    columns = dict(summary._get_summary_data())
    assert columns["Name"] == ["0", "1"] and columns["In sizes"] == ["[3, 4]", "[3, 8]"]
    assert all(isinstance(cell, str) for cells in columns.values() for cell in cells)


def test_model_summary_warns_that_lazy_parameters_count_zero() -> None:
    summary = ModelSummary(torch.nn.Sequential(torch.nn.LazyLinear(3)))
    with pytest.warns(UserWarning, match=r"may be inaccurate .* 2 uninitialized \(lazy\)"):
        assert summary.total_parameters == 0
    with pytest.warns(UserWarning, match="may be inaccurate"):
        assert summary.trainable_parameters == 0


def test_a_layer_summary_records_the_sizes_of_the_first_call() -> None:
    from trainkit.lightning.utilities.model_summary import LayerSummary

    layer = torch.nn.Linear(4, 2)
    summary = LayerSummary(layer)
    assert (summary.in_size, summary.out_size) == ("?", "?")
    layer(torch.zeros(5, 4))
    layer(torch.zeros(7, 4))  # the hook is gone after the first call
    assert (summary.in_size, summary.out_size) == ([5, 4], [5, 2])
    assert not layer._forward_hooks


def test_a_custom_loggers_experiment_is_real_on_rank_zero_only() -> None:
    class Custom(trainkit.loggers.Logger):
        @property
        @rank_zero_experiment
        def experiment(self) -> str:
            return "the run"

        @property
        def name(self) -> str:
            return "custom"

        @property
        def version(self) -> int:
            return 0

        def log_metrics(self, metrics: Any, step: Any = None) -> None: ...

        def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None: ...

    logger = Custom()
    assert logger.experiment == "the run"
    try:
        rank_zero_only.rank = 1
        assert isinstance(logger.experiment, DummyExperiment)
        assert logger.experiment.add_scalar("x", 1.0) is None
    finally:
        rank_zero_only.rank = None  # type: ignore[assignment]


def test_lightnings_exception_and_warning_classes() -> None:
    with pytest.raises(MisconfigurationException):
        raise MisconfigurationException("bad setting")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PossibleUserWarning)
        warnings.warn("maybe", PossibleUserWarning, stacklevel=1)  # filtered: no error
    assert issubclass(PossibleUserWarning, UserWarning)
    garbage_collection_cuda()  # runs without CUDA too


def test_parallel_strategies_are_lightnings_parallel_strategy() -> None:
    from trainkit.lightning.strategies import ParallelStrategy, SingleDeviceStrategy
    from trainkit.strategies.ddp import DDPStrategy
    from trainkit.strategies.dp import DataParallelStrategy
    from trainkit.strategies.fsdp import FSDPStrategy

    assert isinstance(DDPStrategy("cpu"), ParallelStrategy)
    assert isinstance(FSDPStrategy(), ParallelStrategy)
    assert issubclass(DataParallelStrategy, ParallelStrategy)
    assert not isinstance(SingleDeviceStrategy(torch.device("cpu")), ParallelStrategy)


def test_cluster_environments_asking_for_what_trainkit_does_are_accepted() -> None:
    import signal

    from trainkit.lightning.plugins import (
        LightningEnvironment,
        SLURMEnvironment,
        TorchElasticEnvironment,
    )

    accepted = [SLURMEnvironment(auto_requeue=False), LightningEnvironment()]
    trainer = trainkit.Trainer(plugins=[*accepted, TorchElasticEnvironment()], max_steps=1, **QUIET)
    trainer.fit(Classifier(), loader(blobs(32)))
    assert trainer.global_step == 1
    # Lightning's default requeues the job from inside the process: trainkit does not.
    with pytest.raises(ValueError, match=r"auto_requeue=True: trainkit saves last\.ckpt and stops"):
        trainkit.Trainer(plugins=[SLURMEnvironment()], **QUIET)
    with pytest.raises(ValueError, match=r"requeue_signal=.*SIGHUP.*stops on SIGUSR1 and SIGTERM"):
        trainkit.Trainer(
            plugins=SLURMEnvironment(auto_requeue=False, requeue_signal=signal.SIGHUP), **QUIET
        )
    environment = LightningEnvironment()
    assert (environment.world_size(), environment.global_rank(), environment.local_rank()) == (
        1,
        0,
        0,
    )


def test_lightnings_rank_zero_helpers_take_lightnings_arguments() -> None:
    from trainkit.lightning.utilities import rank_zero_warn
    from trainkit.lightning.utilities.rank_zero import (
        LightningDeprecationWarning,
        WarningCache,
        rank_zero_deprecation,
    )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rank_zero_warn("careful", stacklevel=4, category=RuntimeWarning)  # Lightning's default
        rank_zero_deprecation("renamed")
        cache = WarningCache()
        cache.warn("once")
        cache.warn("once")
        try:
            rank_zero_only.rank = 1
            rank_zero_warn("not on rank 1")
        finally:
            rank_zero_only.rank = None  # type: ignore[assignment]
    assert [str(w.message) for w in caught] == ["careful", "renamed", "once"]
    assert [w.category for w in caught[:2]] == [RuntimeWarning, LightningDeprecationWarning]
    assert {w.filename for w in caught} == {__file__}  # each from the line that called it


def test_memory_helpers_and_the_grad_clip_enum() -> None:
    from trainkit.lightning.utilities import GradClipAlgorithmType
    from trainkit.lightning.utilities.memory import is_oom_error, recursive_detach

    loss = torch.ones(2, requires_grad=True) * 3
    detached = recursive_detach({"out": [loss], "n": 1}, to_cpu=True)
    assert not detached["out"][0].requires_grad and detached["n"] == 1
    assert is_oom_error(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert not is_oom_error(RuntimeError("shapes cannot be multiplied"))
    assert GradClipAlgorithmType.NORM == "Norm" and GradClipAlgorithmType.from_str("value")
    trainer = trainkit.Trainer(
        max_steps=1,
        gradient_clip_val=1.0,
        gradient_clip_algorithm=GradClipAlgorithmType.VALUE,
        **QUIET,
    )
    trainer.fit(Classifier(), loader(blobs(32)))
    assert trainer.global_step == 1


def test_a_project_using_lightnings_helper_names_trains_under_the_import_prefix() -> None:
    from tests.compat.ported_project import run

    ported = run("trainkit.lightning")
    # 2 epochs of the longer loader's 6 batches; validation's two loaders by index.
    assert ported["steps"] == 12 and ported["overridden"] and ported["layers"] == ["layer"]
    assert ported["accelerator"] == "CPUAccelerator"
    assert ported["metrics"] == ["loss", "val/dataloader_idx_0", "val/dataloader_idx_1"]
    torch.manual_seed(0)
    assert not torch.equal(ported["weight"], torch.nn.Linear(4, 1).weight)  # it trained
    if importlib.util.find_spec("lightning") is not None:
        original = run("lightning.pytorch")
        weights = original.pop("weight"), ported.pop("weight")
        assert original == ported
        torch.testing.assert_close(*weights)  # the same training, step for step


# ------------------------------------------- what Lightning's own examples import
def test_the_names_lightnings_examples_start_with(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainkit.lightning import cli_lightning_logo
    from trainkit.lightning.utilities import imports
    from trainkit.lightning.utilities.model_helpers import get_torchvision_model

    cli_lightning_logo()
    assert capsys.readouterr().out.strip() == f"trainkit {trainkit.__version__}"
    assert imports._TORCHVISION_AVAILABLE is (importlib.util.find_spec("torchvision") is not None)
    assert imports._TORCH_GREATER_EQUAL_2_6 is True
    assert imports.at_least("torch", 2, 6) and not imports.at_least("torch", 99)
    assert not imports.at_least("a-package-nobody-installed")
    if imports._TORCHVISION_AVAILABLE:
        assert get_torchvision_model("resnet18", num_classes=3).fc.out_features == 3
    monkeypatch.setitem(__import__("sys").modules, "torchvision", None)
    with pytest.raises(ModuleNotFoundError, match=r"needs torchvision: pip install torchvision"):
        get_torchvision_model("resnet18")


MNIST_DIR = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.mark.skipif(
    not (MNIST_DIR / "MNIST" / "raw").is_dir() or importlib.util.find_spec("torchvision") is None,
    reason="needs the MNIST files beside the checkout (../shared/data) and torchvision",
)
def test_the_mnist_demos_read_torchvisions_files_and_train(tmp_path: Path) -> None:
    from torchvision import datasets

    from trainkit.lightning.demos.mnist_datamodule import MNIST, MNISTDataModule

    test_set = MNIST(str(MNIST_DIR), train=False, download=False)
    assert isinstance(test_set, datasets.MNIST) and len(test_set) == 10_000
    data = MNISTDataModule(str(MNIST_DIR), val_split=1000, num_workers=0, seed=3, batch_size=64)
    data.prepare_data()  # the files are there: nothing to download
    data.setup("fit")
    assert (len(data.dataset_train), len(data.dataset_val)) == (59_000, 1000)
    again = MNISTDataModule(str(MNIST_DIR), val_split=1000, seed=3)
    again.setup("fit")
    other = MNISTDataModule(str(MNIST_DIR), val_split=1000, seed=4)
    other.setup("fit")
    assert again.dataset_val.indices == data.dataset_val.indices != other.dataset_val.indices
    image, label = data.dataset_val[0]
    assert image.shape == (1, 28, 28) and float(image.min()) >= 0.0 and isinstance(label, int)
    assert sum(len(x) for x, _ in data.test_dataloader()) == 10_000  # every test image
    trainer = trainkit.Trainer(max_steps=3, limit_val_batches=2, default_root_dir=tmp_path, **QUIET)

    class Digits(trainkit.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    trainer.fit(Digits(), datamodule=data)
    assert trainer.global_step == 3 and trainer.num_training_batches == 59_000 // 64


def test_suggested_max_num_workers_shares_the_cores_among_the_processes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    from trainkit.lightning.utilities import suggested_max_num_workers

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert [suggested_max_num_workers(n) for n in (1, 2, 8)] == [7, 3, 1]
    with pytest.raises(ValueError, match="pass 1 or more"):
        suggested_max_num_workers(0)


def test_disable_possible_user_warnings_silences_only_that_category() -> None:
    import warnings

    from trainkit.lightning.utilities import disable_possible_user_warnings
    from trainkit.lightning.utilities.warnings import PossibleUserWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        disable_possible_user_warnings()
        warnings.warn("maybe", PossibleUserWarning, stacklevel=1)
        warnings.warn("surely", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["surely"]


@pytest.mark.parametrize(("value", "silenced"), [("0", True), ("off", True), ("1", False)])
def test_possible_user_warnings_0_or_off_silences_them_on_import(
    value: str, silenced: bool
) -> None:
    import subprocess
    import sys

    from tests.helpers import repo_env

    code = (
        "import warnings, trainkit.lightning\n"
        "from trainkit.lightning.utilities.warnings import PossibleUserWarning\n"
        "warnings.warn('maybe', PossibleUserWarning)\n"
    )
    env = repo_env(POSSIBLE_USER_WARNINGS=value)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and ("maybe" not in done.stderr) == silenced


def test_is_shared_filesystem_asks_every_process(tmp_path: Path) -> None:
    from tests.distributed import workers
    from tests.distributed.spawn import run_processes
    from trainkit.lightning.utilities import is_shared_filesystem

    one = trainkit.Trainer(**QUIET).strategy
    assert is_shared_filesystem(one, tmp_path)  # one process: trivially shared
    ranks = run_processes(workers.shared_folders, 2, str(tmp_path), str(tmp_path / "own"))
    expected = {"common": True, "own": False, "url": True, "left_behind": False}
    assert ranks == [expected, expected]


def test_from_compiled_and_to_uncompiled_switch_the_modules_calls() -> None:
    from trainkit.lightning.utilities.compile import (
        _maybe_unwrap_optimized,
        from_compiled,
        to_uncompiled,
    )

    torch._dynamo.reset()
    frames: list[int] = []

    def counting_backend(graph: torch.fx.GraphModule, example_inputs: Any) -> Any:
        frames.append(1)
        return graph

    model = Classifier()
    compiled = torch.compile(model, backend=counting_backend)
    module = from_compiled(compiled)
    assert module is model
    expected = model.net(torch.ones(2, 8))
    torch.testing.assert_close(module(torch.ones(2, 8)), expected)
    assert frames == [1]  # the module's own call went through torch.compile's backend
    # A compiled module trains under a Trainer as it is.
    trainkit.Trainer(max_steps=2, **QUIET).fit(module, loader(blobs(64), 32))
    assert to_uncompiled(module) is model and model._compiled_call_impl is None
    with pytest.raises(ValueError, match="not compiled"):
        to_uncompiled(model)
    assert to_uncompiled(compiled) is model
    with pytest.raises(ValueError, match=r"what torch\.compile"):
        from_compiled(model)
    with pytest.raises(ValueError, match="compiled LightningModule"):
        from_compiled(torch.compile(torch.nn.Linear(2, 2)))
    assert _maybe_unwrap_optimized(model) is model
    assert _maybe_unwrap_optimized(compiled) is model
    with pytest.raises(TypeError, match="LightningModule"):
        _maybe_unwrap_optimized(torch.nn.Linear(2, 2))
    to_uncompiled(model)


def test_the_accelerator_connector_resolves_as_a_trainer_does() -> None:
    # Projects call Lightning's private connector on its own (scvi-tools, at import).
    from trainkit.lightning.trainer.connectors.accelerator_connector import (
        _AcceleratorConnector,
    )

    auto = _AcceleratorConnector(accelerator="auto", devices="auto")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert (auto._accelerator_flag, auto._devices_flag) == (expected, 1)
    assert auto.accelerator.name() == expected
    two = _AcceleratorConnector(accelerator="cpu", devices=2)
    assert (two._accelerator_flag, two._devices_flag, two._strategy_flag) == ("cpu", 2, "ddp")
    with pytest.raises(ValueError, match="devices=0 must be at least 1"):
        _AcceleratorConnector(accelerator="cpu", devices=0)


def test_the_checkpoint_connector_dumps_what_save_checkpoint_writes(tmp_path: Path) -> None:
    # Projects call Lightning's private trainer._checkpoint_connector.dump_checkpoint()
    # for a checkpoint in memory (to keep the best few, or save it elsewhere).
    trainer = L.Trainer(max_epochs=1, **QUIET)
    trainer.fit(Classifier(), loader(blobs(32), 16))
    dumped = trainer._checkpoint_connector.dump_checkpoint()
    trainer.save_checkpoint(tmp_path / "saved.ckpt")
    saved = torch.load(tmp_path / "saved.ckpt", weights_only=True)
    assert dumped["global_step"] == saved["global_step"] == 2
    assert set(dumped) == set(saved) - {"integrity"}  # the file adds its digest
    assert "optimizer_states" in dumped
    for key, tensor in saved["state_dict"].items():
        assert torch.equal(dumped["state_dict"][key], tensor)
    assert "optimizer_states" not in trainer._checkpoint_connector.dump_checkpoint(True)

"""Lightning's Strategy attributes on trainkit's strategies (trainer.strategy.<name>)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import trainkit
import trainkit.lightning as L
from tests.helpers import QUIET
from trainkit.lightning.accelerators import CPUAccelerator
from trainkit.lightning.plugins import TorchCheckpointIO
from trainkit.strategies import SingleDeviceStrategy


class Net(trainkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 2)
        self.seen: dict[str, Any] = {}

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0]).square().mean()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def on_train_epoch_end(self) -> None:
        strategy = self.trainer.strategy
        self.seen.update(
            optimizers=strategy.optimizers,
            trainer_optimizers=self.trainer.optimizers,
            state=strategy.lightning_module_state_dict(),
            optimizer_state=strategy.optimizer_state(self.optimizers()),
            precision_plugin=strategy.precision_plugin,
            scaler=self.trainer.scaler,
        )


def _loader() -> DataLoader[Any]:
    return DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4)


def test_a_trainers_strategy_answers_lightnings_attributes() -> None:
    trainer = L.Trainer(**QUIET)
    strategy = trainer.strategy
    assert isinstance(strategy.accelerator, CPUAccelerator)
    assert isinstance(strategy.checkpoint_io, TorchCheckpointIO)
    assert type(strategy.precision_plugin) is L.plugins.Precision
    assert type(trainer.precision_plugin) is L.plugins.Precision
    assert strategy.optimizers == []  # before a run, as Lightning's
    assert (strategy.num_nodes, strategy.node_rank, strategy.num_processes) == (1, 0, 1)
    assert strategy.parallel_devices == [torch.device("cpu")]
    environment = strategy.cluster_environment
    assert type(environment) is L.plugins.environments.LightningEnvironment
    answers = environment.global_rank(), environment.world_size(), environment.local_rank()
    assert (*answers, environment.node_rank(), environment.creates_processes_externally) == (
        0,
        1,
        0,
        0,
        False,
    )
    assert L.strategies.SingleDeviceStrategy("cpu").cluster_environment is None  # no Trainer


def test_under_torchrun_and_slurm_the_environment_is_theirs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torchrun = {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "MASTER_ADDR": "10.0.0.2",
        "MASTER_PORT": "29511",
        "GROUP_RANK": "1",
    }
    for name, value in torchrun.items():
        monkeypatch.setenv(name, value)
    strategy = L.strategies.DDPStrategy(process_group_backend="gloo")
    trainer = L.Trainer(strategy=strategy, num_nodes=2, devices=2, **QUIET)
    plugin = trainer.strategy.cluster_environment
    assert type(plugin) is L.plugins.environments.TorchElasticEnvironment
    assert (plugin.global_rank(), plugin.world_size(), plugin.local_rank()) == (3, 4, 1)
    assert (plugin.node_rank(), plugin.main_address, plugin.main_port) == (1, "10.0.0.2", 29511)
    assert plugin.creates_processes_externally
    for name in torchrun:
        monkeypatch.delenv(name)
    slurm = {
        "SLURM_PROCID": "1",
        "SLURM_NTASKS": "2",
        "SLURM_LOCALID": "1",
        "SLURM_NODELIST": "node[03-04]",
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_NAME": "train",
    }
    for name, value in slurm.items():
        monkeypatch.setenv(name, value)
    trainer = L.Trainer(
        strategy=L.strategies.DDPStrategy(process_group_backend="gloo"), devices=2, **QUIET
    )
    plugin = trainer.strategy.cluster_environment
    assert type(plugin) is L.plugins.environments.SLURMEnvironment
    assert plugin.auto_requeue is False  # trainkit does not requeue its own job
    assert (plugin.global_rank(), plugin.world_size(), plugin.main_address) == (1, 2, "node03")


def test_during_a_run_it_reads_the_runs_optimizers_module_and_state() -> None:
    module = Net()
    L.Trainer(max_epochs=1, **QUIET).fit(module, _loader())
    seen = module.seen
    assert len(seen["optimizers"]) == 1
    assert seen["optimizers"][0] is seen["trainer_optimizers"][0]
    assert seen["state"].keys() == {"layer.weight", "layer.bias"}
    assert torch.equal(seen["state"]["layer.weight"], module.layer.weight)
    assert set(seen["optimizer_state"]) == {"state", "param_groups"}
    assert seen["optimizer_state"]["param_groups"][0]["lr"] == 0.1


@pytest.mark.parametrize(
    ("precision", "plugin", "name"),
    [
        ("32-true", "Precision", "32-true"),
        ("bf16-mixed", "MixedPrecision", "bf16-mixed"),
        ("bf16-true", "HalfPrecision", "bf16-true"),
        (64, "DoublePrecision", "64-true"),
    ],
)
def test_the_precision_plugin_stands_for_the_precision_option(
    precision: str | int, plugin: str, name: str
) -> None:
    trainer = L.Trainer(precision=precision, **QUIET)
    found = trainer.precision_plugin
    assert type(found) is getattr(L.plugins, plugin)
    assert found.precision == name
    assert type(trainer.strategy.precision_plugin) is type(found)


def test_under_fsdp_the_precision_plugin_is_fsdps() -> None:
    trainer = L.Trainer(strategy="fsdp", devices=1, precision="bf16-mixed", **QUIET)
    assert type(trainer.precision_plugin) is L.plugins.FSDPPrecision
    assert trainer.precision_plugin.precision == "bf16-mixed"


def test_a_float16_runs_plugin_holds_the_runs_scaler() -> None:
    module = Net()
    L.Trainer(max_epochs=1, precision="16-mixed", **QUIET).fit(module, _loader())
    plugin = module.seen["precision_plugin"]
    assert type(plugin) is L.plugins.MixedPrecision
    assert isinstance(plugin.scaler, torch.amp.GradScaler)
    assert plugin.scaler is module.seen["scaler"]  # the one scaling this run's loss


def test_the_plugins_step_contexts_autocast_and_it_unscales_and_clips() -> None:
    plugin = L.plugins.MixedPrecision("bf16-mixed", "cpu")
    a = torch.randn(2, 2)
    for context in (
        plugin.train_step_context,
        plugin.val_step_context,
        plugin.test_step_context,
        plugin.predict_step_context,
    ):
        with context():
            assert (a @ a).dtype == torch.bfloat16
    with L.plugins.Precision().train_step_context():
        assert (a @ a).dtype == torch.float32

    weight = torch.nn.Parameter(torch.zeros(3))
    optimizer = torch.optim.SGD([weight], lr=1.0)
    weight.grad = torch.tensor([3.0, -4.0, 0.0])
    L.plugins.Precision().clip_gradients(optimizer, 1.0, "norm")
    torch.testing.assert_close(weight.grad, torch.tensor([0.6, -0.8, 0.0]))
    weight.grad = torch.tensor([3.0, -4.0, 0.5])
    L.plugins.Precision().clip_gradients(optimizer, 1.0, "value")
    torch.testing.assert_close(weight.grad, torch.tensor([1.0, -1.0, 0.5]))
    with pytest.raises(ValueError, match="'norm' or 'value'"):
        L.plugins.Precision().clip_gradients(optimizer, 1.0, "max")

    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    scaled = L.plugins.MixedPrecision("16-mixed", "cpu", scaler=scaler)
    scaler.scale(weight.sum()).backward()  # type: ignore[no-untyped-call]
    weight.grad = torch.full((3,), 4.0)
    scaled.unscale_gradients(optimizer)
    torch.testing.assert_close(weight.grad, torch.ones(3))


def test_model_to_device_and_remove_checkpoint(tmp_path: Path) -> None:
    strategy = SingleDeviceStrategy()
    with pytest.raises(RuntimeError, match="needs a model: call it during a run"):
        strategy.model_to_device()
    with pytest.raises(RuntimeError, match="needs a Module"):
        strategy.lightning_module_state_dict()
    strategy.connect_module(torch.nn.Linear(2, 2))
    strategy.model_to_device()
    saved = tmp_path / "a.ckpt"
    saved.write_bytes(b"x")
    strategy.remove_checkpoint(saved)
    strategy.remove_checkpoint(saved)  # gone already: not an error
    assert not saved.exists()


def test_connect_keeps_an_untrained_module_that_a_prediction_then_runs() -> None:
    # As projects do for a model that needs no training: connect it, then predict.
    class Predicting(Net):
        def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self.layer(batch[0])  # type: ignore[no-any-return]

    trainer = L.Trainer(**QUIET)
    module = Predicting()
    trainer.strategy.connect(module)
    assert trainer.strategy.lightning_module is module and trainer.strategy.model is module
    state = trainer.strategy.lightning_module_state_dict()
    assert torch.equal(state["layer.weight"], module.layer.weight)
    predictions = trainer.predict(module, _loader())
    assert predictions is not None and len(predictions) == 2


def test_a_strategy_without_a_trainer_answers_for_one_process() -> None:
    strategy = SingleDeviceStrategy()
    assert strategy.accelerator is None
    assert strategy.precision_plugin is None
    assert strategy.checkpoint_io is None
    assert strategy.optimizers == []
    assert (strategy.num_nodes, strategy.node_rank, strategy.num_processes) == (1, 0, 1)


def test_one_process_gathers_without_a_new_dimension() -> None:
    # As Lightning's single-device strategy: the tensor itself.
    value = torch.tensor([1.0, 2.0])
    assert L.Trainer(**QUIET).strategy.all_gather(value) is value


@pytest.mark.parametrize("given", [False, True, 3])
def test_fast_dev_run_reads_as_given(given: bool | int) -> None:
    assert L.Trainer(fast_dev_run=given, **QUIET).fast_dev_run is given

"""trainkit.lightning.strategies: Lightning's strategy names and constructor arguments."""

from __future__ import annotations

import sys
import warnings
from typing import Any

import pytest
import torch
from torch import nn

import trainkit
import trainkit.lightning as L
from tests.distributed import workers
from tests.distributed.spawn import run_processes
from tests.helpers import QUIET
from trainkit.strategies.ddp import DDPStrategy as TrainkitDDP


class Block(nn.Module):
    pass


def test_ddp_takes_lightnings_arguments() -> None:
    strategy = L.strategies.DDPStrategy(
        find_unused_parameters=True,
        static_graph=True,
        broadcast_buffers=False,
        process_group_backend="gloo",
        start_method="spawn",
    )
    assert isinstance(strategy, TrainkitDDP)
    assert strategy.ddp_options["find_unused_parameters"] is True
    assert strategy.ddp_options["static_graph"] is True
    assert strategy.ddp_options["broadcast_buffers"] is False
    assert strategy.process_group_backend == "gloo"
    # Started as strategy="ddp_spawn" starts its processes.
    launcher = trainkit.Trainer(strategy=strategy, devices=2, **QUIET).launcher
    assert type(launcher).__name__ == "SpawnLauncher"


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"accelerator": "gpu"}, TypeError, r"accelerator: Trainer\(accelerator=\.\.\.\)"),
        ({"precision_plugin": object()}, TypeError, r"precision_plugin: Trainer\(precision"),
        ({"model_averaging_period": 4}, TypeError, "model averaging"),
        ({"start_method": "fork"}, ValueError, "'popen'.*'spawn'"),
        ({"find_unused_params": True}, TypeError, "find_unused_params, which Distributed"),
    ],
)
def test_ddp_refuses_what_trainkit_decides_elsewhere(
    arguments: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        L.strategies.DDPStrategy(**arguments)


@pytest.mark.parametrize(
    ("name", "ported"),
    [("ddp", "DDPStrategy"), ("ddp_spawn", "DDPStrategy"), ("fsdp", "FSDPStrategy")],
)
def test_the_strategy_a_name_builds_is_an_instance_of_lightnings_class(
    name: str, ported: str
) -> None:
    # Projects branch on isinstance(trainer.strategy, DDPStrategy), which Lightning's
    # Trainer makes true for strategy="ddp"; trainkit's Trainer builds trainkit's class.
    from trainkit.strategies.registry import DevicePlan

    # What the Trainer builds for the name (it does so through the registry).
    strategy = L.strategies.StrategyRegistry.build(DevicePlan(name, "cpu", (0, 1)))
    cls = getattr(L.strategies, ported)
    assert isinstance(strategy, cls) and issubclass(type(strategy), cls)
    other = L.strategies.FSDPStrategy if ported == "DDPStrategy" else L.strategies.DDPStrategy
    assert not isinstance(strategy, other)

    class Own(cls):  # type: ignore[misc, valid-type]
        pass

    assert not isinstance(strategy, Own)  # a project's subclass stands only for itself
    assert isinstance(Own(), cls) and not isinstance(L.Trainer(**QUIET).strategy, cls)


def test_the_trainers_accelerator_decides_an_instances_devices() -> None:
    trainer = trainkit.Trainer(strategy=L.strategies.DDPStrategy(), **QUIET)  # accelerator="cpu"
    assert trainer.strategy.root_device == torch.device("cpu")
    # A device type given to the strategy itself must agree with the accelerator.
    with pytest.raises(ValueError, match=r"built to run on 'cuda'.*accelerator='cpu'"):
        trainkit.Trainer(strategy=TrainkitDDP("cuda"), **QUIET)


def test_fsdp_takes_lightnings_arguments() -> None:
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    strategy = L.strategies.FSDPStrategy(
        auto_wrap_policy=ModuleWrapPolicy({Block}),
        activation_checkpointing_policy={Block},
        sharding_strategy="SHARD_GRAD_OP",
        use_orig_params=True,
        state_dict_type="full",
    )
    assert strategy.shard_modules == (Block,)
    assert strategy.activation_checkpointing == (Block,)
    assert strategy.reshard_after_forward is False
    assert strategy.state_dict_type == "full"
    hybrid = L.strategies.FSDPStrategy(
        auto_wrap_policy={Block}, sharding_strategy="HYBRID_SHARD", device_mesh=(2, 2)
    )
    assert hybrid.hsdp == (2, 2) and hybrid.reshard_after_forward is True
    assert L.strategies.FSDPStrategy().state_dict_type == "sharded"  # docs/porting.md


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"mixed_precision": object()}, TypeError, r'Trainer\(precision="bf16-mixed"\)'),
        ({"limit_all_gathers": True}, TypeError, "limit_all_gathers: FSDP1 options"),
        ({"sharding_strategy": "NO_SHARD"}, ValueError, "use DDPStrategy"),
        ({"sharding_strategy": "HYBRID_SHARD"}, ValueError, r"needs device_mesh=\(replicate"),
        ({"device_mesh": (2, 2)}, ValueError, "for the hybrid sharding strategies"),
        ({"auto_wrap_policy": lambda *args: True}, TypeError, "not a policy function"),
    ],
)
def test_fsdp_refuses_what_it_cannot_honour(
    arguments: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        L.strategies.FSDPStrategy(**arguments)


def test_model_parallel_takes_lightnings_arguments() -> None:
    from trainkit.strategies.model_parallel import ModelParallelStrategy

    strategy = L.strategies.ModelParallelStrategy(2, 4, False, "gloo")  # Lightning's order
    assert isinstance(strategy, ModelParallelStrategy)
    assert isinstance(strategy, L.strategies.ParallelStrategy)
    assert strategy.sizes == (2, 4) and strategy.state_dict_type == "full"
    assert strategy.process_group_backend == "gloo"
    assert L.strategies.ModelParallelStrategy().state_dict_type == "sharded"
    assert L.strategies.ModelParallelStrategy().sizes == ("auto", "auto")


def test_names_trainkit_does_not_provide_say_so() -> None:
    with pytest.raises(AttributeError, match="does not provide Lightning's DeepSpeedStrategy"):
        L.strategies.DeepSpeedStrategy  # noqa: B018
    assert L.strategies.SingleDeviceStrategy is trainkit.strategies.SingleDeviceStrategy


def test_a_ddp_subclass_overriding_lightnings_hooks_has_them_called() -> None:
    # A project's DDP strategy sets up its process groups in setup(), registers hooks in
    # configure_ddp() before the wrap, and tells each dataset its rank: each is called.
    ranks = run_processes(workers.hooks_of_a_lightning_ddp_subclass, 2)
    for rank, seen in enumerate(ranks):
        assert seen["strategy"] == "Grouped" and seen["tagged"] == rank
        assert seen["reached"] == [True, True]
        assert seen["calls"] == [
            ("setup", "fit", "Classifier"),
            ("configure_ddp", "", "Classifier"),  # when fitting only, before the wrap
            ("setup done", "fit", "ddp"),
            ("process_dataloader", "", "DistributedSampler"),
            ("setup", "validate", "Classifier"),
            ("setup done", "validate", "ddp"),
            ("process_dataloader", "", "EvenSplitSampler"),
        ]


def test_a_strategy_overriding_hooks_trainkit_does_not_call_is_warned() -> None:
    with pytest.warns(UserWarning, match=r"overrides model_to_device, training_step: Lightning"):

        class Custom(L.strategies.SingleDeviceStrategy):
            def model_to_device(self) -> None:
                pass

            def training_step(self, *args: Any) -> Any:
                pass

    with pytest.warns(UserWarning, match=r"overrides setup_optimizers\(trainer\)"):

        class OwnOptimizers(L.strategies.SingleDeviceStrategy):
            def setup_optimizers(self, trainer: Any) -> None:  # type: ignore[override]
                pass

    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class Honoured(L.strategies.SingleDeviceStrategy):  # only hooks trainkit calls
            def setup(self, trainer: Any) -> None:
                super().setup(trainer)

            def process_dataloader(self, dataloader: Any) -> Any:
                return dataloader

    assert Custom and OwnOptimizers and Honoured


def test_two_processes_with_a_communication_hook_train_as_without_it() -> None:
    plain = run_processes(workers.train_with_lightnings_ddp_strategy, 2, False)
    hooked = run_processes(workers.train_with_lightnings_ddp_strategy, 2, True)
    for rank in range(2):
        assert hooked[rank]["calls"] == 3  # one gradient bucket, three steps
        assert hooked[rank]["sampler"] == {"num_replicas": 2, "rank": rank}
        for key, tensor in plain[rank]["state"].items():
            torch.testing.assert_close(hooked[rank]["state"][key], tensor, msg=key)
    assert torch.equal(hooked[0]["state"]["net.0.weight"], hooked[1]["state"]["net.0.weight"])
    cpu = torch.device("cpu")
    for rank in range(2):  # what Lightning's private connector answers under DDP
        assert plain[rank]["connector"] == (True, "ddp", 2, [cpu, cpu], True)
    for rank in range(2):  # Lightning's ParallelStrategy attributes, as in Lightning's DDP
        assert plain[rank]["attributes"] == {
            "num_nodes": 1,
            "node_rank": 0,
            "num_processes": 2,
            "parallel_devices": [cpu, cpu],
            "optimizers": [True],  # the run's one optimizer
            "gathered": (2, 1),
            "device_ids": [0, 1],  # the machine's devices, on every rank
            # These processes get torchrun's variables (tests/distributed/spawn.py), so
            # the plugin is torchrun's, answering this rank.
            "environment": ("TorchElasticEnvironment", rank, 2, rank, 0, True),
        }


def test_a_datamodule_turns_the_distributed_sampler_off_through_the_connector() -> None:
    # Projects that split the data themselves set Lightning's private
    # trainer._accelerator_connector.use_distributed_sampler = False in setup().
    # Each rank's own half in the first epoch; after it is turned on again, the
    # sampler's share of that half (every second sample, from the rank's index) in the second.
    assert run_processes(workers.own_sampler_kept, 2) == [[0, 1, 2, 3, 0, 2], [4, 5, 6, 7, 5, 7]]


def test_the_connector_of_one_process() -> None:
    trainer = L.Trainer(devices=1, **QUIET)
    connector = trainer._accelerator_connector
    assert connector.strategy is trainer.strategy and not connector.is_distributed
    assert connector.accelerator.name() == "cpu" and connector.use_distributed_sampler
    assert (connector._accelerator_flag, connector._devices_flag) == ("cpu", 1)
    assert (connector._strategy_flag, connector._num_nodes_flag) == ("single_device", 1)
    assert connector._precision_flag == "32-true"
    assert type(connector.precision_plugin).__name__ == "Precision"
    assert type(connector.cluster_environment).__name__ == "LightningEnvironment"
    # DDP is distributed even on one device, as in Lightning.
    assert L.Trainer(strategy="ddp", devices=1, **QUIET)._accelerator_connector.is_distributed
    connector.use_distributed_sampler = False
    assert trainer.use_distributed_sampler is False
    with pytest.raises(TypeError, match="True or False"):
        connector.use_distributed_sampler = 0  # type: ignore[assignment]


def test_the_strategys_launcher_is_what_starts_the_other_processes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One process, or ranks started by torchrun: none. Else the Trainer's launcher.
    assert L.Trainer(devices=1, **QUIET).strategy.launcher is None
    assert L.strategies.DDPStrategy().launcher is None  # not a Trainer's yet
    # "ddp" re-runs the command (a script's: this test's worker may run under `python -c`).
    monkeypatch.setattr(sys, "argv", ["train.py"])
    monkeypatch.setattr(sys, "orig_argv", [sys.executable, "train.py"])
    for name, interactive in (("ddp", False), ("ddp_spawn", True)):
        trainer = L.Trainer(strategy=name, devices=2, **QUIET)
        launcher = trainer.strategy.launcher
        assert launcher is trainer.launcher and launcher.num_processes == 2
        assert launcher.is_interactive_compatible is interactive

"""The strategy registry: names, the classes they build, process counts and launchers.

``Trainer(strategy="name")`` reads one registry (``trainkit.strategies.StrategyRegistry``);
each class declares how many processes it runs and how they start, and
``trainkit.launch`` picks the launcher from that. A strategy registered by the
user (Lightning's ``StrategyRegistry.register`` call) works by name like a built-in one.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import TypeVar

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.launch import ScriptLauncher, launcher_for, select_launcher
from trainkit.launch.spawn import SpawnLauncher
from trainkit.strategies import (
    STRATEGY_NAMES,
    DevicePlan,
    SingleDeviceStrategy,
    Strategy,
    StrategyRegistry,
    build_strategy,
    plan_devices,
)
from trainkit.strategies.ddp import DDPStrategy
from trainkit.strategies.dp import DataParallelStrategy
from trainkit.strategies.fsdp import FSDPStrategy
from trainkit.strategies.hybrid import HybridStrategy
from trainkit.strategies.registry import BUILT_IN

CLASSES: dict[str, type[Strategy]] = {
    "single_device": SingleDeviceStrategy,
    "ddp": DDPStrategy,
    "ddp_spawn": DDPStrategy,
    "dp": DataParallelStrategy,
    "hybrid": HybridStrategy,
    "fsdp": FSDPStrategy,
}
T = TypeVar("T")
_JOB_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS")


@pytest.fixture
def plain_python(monkeypatch: pytest.MonkeyPatch, started_as_a_script: None) -> None:
    """This process was started by plain ``python train.py``: no torchrun or SLURM variables."""
    for variable in _JOB_VARIABLES:
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Names a test registers, removed afterwards (the registry outlives the test)."""
    names: list[str] = []
    yield names
    for name in names:
        if name in StrategyRegistry:
            StrategyRegistry.remove(name)


def test_the_names_are_the_built_in_strategies_fsdp_included() -> None:
    # Built-in names first (a test or script may have registered more after them).
    assert StrategyRegistry.available_strategies()[: len(CLASSES)] == list(CLASSES)
    assert ("auto", *CLASSES) == STRATEGY_NAMES
    assert set(BUILT_IN) == set(CLASSES)


@pytest.mark.parametrize("name", list(CLASSES))
def test_each_name_resolves_to_the_class_that_declares_it(name: str) -> None:
    cls = StrategyRegistry.strategy_class(name)
    assert cls is CLASSES[name]
    assert name in cls.names


def test_each_class_declares_exactly_the_names_it_is_registered_under() -> None:
    for cls in set(CLASSES.values()):
        assert set(cls.names) == {n for n, c in CLASSES.items() if c is cls}, cls
    assert DDPStrategy.names == ("ddp", "ddp_spawn")


@pytest.mark.parametrize(
    ("name", "devices", "expected"),
    [
        ("single_device", 1, SingleDeviceStrategy),
        ("ddp", 2, DDPStrategy),
        ("ddp_spawn", 2, DDPStrategy),
        ("fsdp", 2, FSDPStrategy),
        ("hybrid", 2, HybridStrategy),
    ],
)
def test_a_plan_builds_its_class_with_the_trainer_settings(
    name: str, devices: int, expected: type[Strategy]
) -> None:
    timeout = timedelta(seconds=42)
    strategy = build_strategy(plan_devices(name, "cpu", devices), timeout=timeout)
    assert type(strategy) is expected
    assert strategy.root_device.type == "cpu"
    if isinstance(strategy, DDPStrategy):
        assert strategy.timeout == timeout
        assert strategy.device_type == "cpu"


def test_hybrid_by_name_takes_the_accelerator_on_a_cuda_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # accelerator="cpu" on a machine with CUDA: the stages stay on the CPU.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    strategy = build_strategy(plan_devices("hybrid", "cpu", 2), timeout=timedelta(seconds=1))
    assert strategy.device_type == "cpu"  # type: ignore[attr-defined]
    assert strategy.root_device.type == "cpu"


def test_dp_without_two_cuda_devices_trains_on_one_and_warns_at_the_callers_line() -> None:
    with pytest.warns(UserWarning, match="strategy='dp' splits each batch") as caught:
        trainer = trainkit.Trainer(strategy="dp", devices=1, **QUIET)
    assert type(trainer.strategy) is SingleDeviceStrategy
    assert caught[0].filename == __file__  # the line that built the Trainer


@pytest.mark.parametrize(
    ("name", "device_type", "devices", "processes"),
    [
        ("single_device", "cpu", 1, 1),
        ("ddp", "cpu", 4, 4),
        ("ddp_spawn", "cpu", 3, 3),
        ("fsdp", "cuda", 4, 4),
        ("hybrid", "cpu", 4, 4),  # on the CPU each process runs its stages on the CPU
        ("hybrid", "cuda", 4, 2),  # two GPUs per process: one per stage
        ("hybrid", "cuda", 1, 1),
        ("dp", "cuda", 4, 1),  # one process drives every device
    ],
)
def test_process_counts_per_plan(name: str, device_type: str, devices: int, processes: int) -> None:
    plan = DevicePlan(name, device_type, tuple(range(devices)))
    assert plan.processes == processes


@pytest.mark.parametrize(
    ("name", "processes", "expected"),
    [
        ("ddp_spawn", 2, SpawnLauncher),
        ("ddp", 2, ScriptLauncher),
        ("fsdp", 4, ScriptLauncher),
        ("hybrid", 2, ScriptLauncher),
        ("ddp", 1, None),
        ("fsdp", 1, None),
        ("hybrid", 1, None),
        ("single_device", 1, None),
        ("dp", 1, None),
    ],
)
def test_launcher_per_name(
    plain_python: None, name: str, processes: int, expected: type | None
) -> None:
    launcher = select_launcher(name, processes)
    if expected is None:
        assert launcher is None
    else:
        assert type(launcher) is expected
        assert launcher.num_processes == processes  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "variables",
    [
        {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"},
        {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_NAME": "train"},
    ],
    ids=["torchrun", "slurm"],
)
@pytest.mark.parametrize("name", ["ddp", "ddp_spawn", "fsdp", "hybrid"])
def test_nothing_is_launched_under_torchrun_or_slurm(
    plain_python: None, monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], name: str
) -> None:
    for variable, value in variables.items():
        monkeypatch.setenv(variable, value)
    assert select_launcher(name, 2) is None


def test_an_instance_is_launched_by_what_its_class_declares(plain_python: None) -> None:
    strategy = DDPStrategy("cpu")
    launcher = launcher_for(strategy, "cpu", 3)
    assert isinstance(launcher, ScriptLauncher) and launcher.num_processes == 3
    assert strategy.environment is launcher.environment  # this process is its rank 0
    assert launcher_for(DDPStrategy("cpu", rank=0, world_size=2), "cpu", 2) is None
    assert launcher_for(SingleDeviceStrategy("cpu"), "cpu", 1) is None
    assert launcher_for(DDPStrategy("cpu"), "cpu", "auto") is None


@pytest.mark.parametrize(
    ("typo", "suggestion"), [("fsdpp", "fsdp"), ("singel_device", "single_device")]
)
def test_an_unknown_name_names_the_valid_ones_and_the_likely_one(
    typo: str, suggestion: str
) -> None:
    expected = (
        rf"Unknown strategy '{typo}'; valid strategies are \[.*'fsdp'.*\]\. "
        rf"Did you mean '{suggestion}'"
    )
    with pytest.raises(ValueError, match=expected):
        trainkit.Trainer(strategy=typo, **QUIET)
    with pytest.raises(ValueError, match=expected):
        StrategyRegistry.strategy_class(typo)


class Recording(SingleDeviceStrategy):
    """A user's strategy: one device, counting the batches it moves."""

    def __init__(self, device: str = "cpu", label: str = "") -> None:
        super().__init__(device)
        self.label = label
        self.batches = 0

    def batch_to_device(self, batch: T) -> T:
        self.batches += 1
        return super().batch_to_device(batch)


def test_a_registered_strategy_trains_by_name(registered: list[str]) -> None:
    registered.append("recording")
    cls = StrategyRegistry.register("recording", Recording, description="counts", label="mine")
    assert cls is Recording  # as Lightning's register returns it
    assert "recording" in StrategyRegistry.available_strategies()
    assert plan_devices("recording", "cpu", 1) == DevicePlan("recording", "cpu", (0,))
    trainer = trainkit.Trainer(strategy="recording", max_steps=3, **QUIET)
    assert trainer.launcher is None
    trainer.fit(Classifier(), loader(blobs(128)))
    assert isinstance(trainer.strategy, Recording)
    assert trainer.strategy.label == "mine"  # the registered init_params
    assert trainer.strategy.batches == 3 and trainer.global_step == 3


def test_a_registered_ddp_variant_keeps_its_arguments_and_launches_like_ddp(
    plain_python: None, registered: list[str]
) -> None:
    registered.append("ddp_unused")
    StrategyRegistry.register("ddp_unused", DDPStrategy, find_unused_parameters=True)
    plan = plan_devices("ddp_unused", "cpu", 2)
    assert plan.processes == 2
    assert isinstance(select_launcher(plan.strategy, plan.processes), ScriptLauncher)
    strategy = build_strategy(plan)
    assert isinstance(strategy, DDPStrategy)
    assert strategy.ddp_options["find_unused_parameters"] is True


def test_register_as_a_decorator(registered: list[str]) -> None:
    registered.append("decorated")

    @StrategyRegistry.register("decorated", label="from the decorator")
    class Decorated(Recording):
        pass

    built = build_strategy(plan_devices("decorated", "cpu", 1))
    assert type(built) is Decorated and built.label == "from the decorator"


def test_register_refuses_what_it_cannot_build(registered: list[str]) -> None:
    with pytest.raises(ValueError, match=r"'ddp' is registered already.*override=True"):
        StrategyRegistry.register("ddp", Recording)
    assert StrategyRegistry.strategy_class("ddp") is DDPStrategy
    with pytest.raises(ValueError, match="other than 'auto'"):
        StrategyRegistry.register("auto", Recording)
    with pytest.raises(TypeError, match="needs a Strategy subclass"):
        StrategyRegistry.register("not_a_strategy", object)  # type: ignore[arg-type]
    assert "not_a_strategy" not in StrategyRegistry
    registered.append("replaced")
    StrategyRegistry.register("replaced", Recording)
    StrategyRegistry.register("replaced", DDPStrategy, override=True)
    assert StrategyRegistry.strategy_class("replaced") is DDPStrategy
    StrategyRegistry.remove("replaced")
    with pytest.raises(ValueError, match="Unknown strategy 'replaced'"):
        plan_devices("replaced", "cpu", 1)
    with pytest.raises(KeyError, match="'replaced' is not a registered strategy"):
        StrategyRegistry.remove("replaced")


@pytest.mark.parametrize(
    ("name", "cls", "option", "value", "launch"),
    [
        ("ddp_find_unused_parameters_true", DDPStrategy, "find_unused_parameters", True, "script"),
        (
            "ddp_find_unused_parameters_false",
            DDPStrategy,
            "find_unused_parameters",
            False,
            "script",
        ),
        (
            "ddp_spawn_find_unused_parameters_true",
            DDPStrategy,
            "find_unused_parameters",
            True,
            "spawn",
        ),
        ("fsdp_cpu_offload", FSDPStrategy, "cpu_offload", True, "script"),
    ],
)
def test_lightnings_names_for_a_built_in_with_other_arguments_build_it_so(
    name: str, cls: type, option: str, value: bool, launch: str
) -> None:
    assert name in StrategyRegistry.available_strategies()
    assert StrategyRegistry.launch_mode(name) == launch  # started as the built-in it names
    if cls is DDPStrategy:
        trainer = trainkit.Trainer(strategy=name, accelerator="cpu", devices=1, logger=False)
        assert type(trainer.strategy) is DDPStrategy
        assert trainer.strategy.ddp_options[option] is value
    else:
        assert StrategyRegistry.entry(name).init_params == {option: value}
        assert StrategyRegistry.strategy_class(name) is cls


@pytest.mark.parametrize("name", ["ddp_fork", "ddp_notebook_find_unused_parameters_true"])
def test_lightnings_forking_names_are_refused_saying_what_to_use(name: str) -> None:
    with pytest.raises(ValueError, match=rf"strategy='{name}' forks .* Use strategy='ddp_spawn'"):
        trainkit.Trainer(strategy=name, accelerator="cpu", devices=2, logger=False)

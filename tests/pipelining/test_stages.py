"""Which layers the hybrid strategy cuts, and the options it refuses across processes."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from trainkit.callbacks import GradientClipping
from trainkit.launch.environment import ClusterEnvironment
from trainkit.launch.launcher import free_port
from trainkit.pipelining.pipe import PipelinedSequential
from trainkit.pipelining.stages import refuse_step_shaping, stages_of
from trainkit.strategies.ddp import end_process_group
from trainkit.strategies.hybrid import HybridStrategy

FIT_QUIET = {
    "enable_progress_bar": False,
    "enable_model_summary": False,
    "enable_checkpointing": False,
}


class Listed(trainkit.Module):
    """No forward of its own: the default one runs the listed layers."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 8)
        self.second = nn.Linear(8, 2)

    def configure_stages(self) -> list[nn.Module]:
        return [self.first, nn.Tanh(), self.second]


class WithSequential(trainkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))

    def forward(self, x: torch.Tensor) -> Any:
        return self.body(x)

    def configure_stages(self) -> nn.Sequential:
        return self.body


def test_a_listed_model_runs_its_layers_and_keeps_its_names_when_split() -> None:
    model = Listed()
    x = torch.randn(6, 4)
    expected = model(x)
    layers, install = stages_of(model)
    restore = install(PipelinedSequential(layers, [2, 1], ["cpu", "cpu"], micro_batches=3))
    torch.testing.assert_close(model(x), expected)
    assert list(model.state_dict()) == [
        "first.weight",
        "first.bias",
        "second.weight",
        "second.bias",
    ]
    restore()
    assert "_stage_runner" not in model.__dict__


def test_a_sequential_attribute_is_replaced_and_given_back() -> None:
    model = WithSequential()
    original = model.body
    keys = list(model.state_dict())
    layers, install = stages_of(model)
    restore = install(PipelinedSequential(layers, [1, 2], ["cpu", "cpu"]))
    assert isinstance(model.body, PipelinedSequential)
    assert list(model.state_dict()) == keys
    restore()
    assert model.body is original


def test_a_model_without_stages_or_forward_says_what_to_define() -> None:
    class Plain(trainkit.Module):
        pass

    with pytest.raises(ValueError, match="configure_stages\\(\\) returns, but it returns None"):
        stages_of(Plain())
    with pytest.raises(NotImplementedError, match="has no forward"):
        Plain()(torch.randn(1, 4))


def test_a_sequential_that_is_not_an_attribute_is_refused() -> None:
    class Detached(WithSequential):
        def configure_stages(self) -> nn.Sequential:
            return nn.Sequential(nn.Linear(4, 2))

    with pytest.raises(ValueError, match="not an attribute of the module"):
        stages_of(Detached())


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"precision": "16-mixed"}, "fp16 mixed precision"),
        ({"accumulate_grad_batches": 2}, "gradient accumulation"),
        ({"callbacks": [GradientClipping(max_norm=1.0)]}, "clipping by norm"),
    ],
)
def test_options_the_cross_process_pipeline_cannot_honour_are_refused(
    options: dict[str, Any], problem: str
) -> None:
    trainer = trainkit.Trainer(accelerator="cpu", logger=False, **options)
    with pytest.raises(ValueError, match=problem):
        refuse_step_shaping(trainer.step_slots)


def test_bf16_and_clipping_by_value_are_allowed_across_processes() -> None:
    trainer = trainkit.Trainer(
        accelerator="cpu",
        logger=False,
        precision="bf16-mixed",
        callbacks=[GradientClipping(max_value=1.0)],
    )
    refuse_step_shaping(trainer.step_slots)


class ListedWithForward(trainkit.Module):
    """Lists its layers and also has a forward that adds a skip connection."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.second = nn.Linear(4, 2)

    def configure_stages(self) -> list[nn.Module]:
        return [self.first, nn.Tanh(), self.second]

    def forward(self, x: torch.Tensor) -> Any:
        return self.second(torch.tanh(self.first(x)) + x)  # lost if the list ran in order

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_a_listed_model_with_its_own_forward_is_refused_with_what_to_drop() -> None:
    with pytest.raises(
        ValueError, match="returns a list of layers, and ListedWithForward"
    ) as error:
        stages_of(ListedWithForward())
    assert "Drop forward()" in str(error.value)
    assert "return from configure_stages() the nn.Sequential" in str(error.value)


@pytest.mark.parametrize(
    "layout", [{"stage_devices": 2}, {"pipeline_size": 2}], ids=["in-process", "across-ranks"]
)
def test_both_hybrid_layouts_refuse_it(layout: dict[str, Any]) -> None:
    # Refused when the strategy sets the module up, before any stage is built.
    strategy = HybridStrategy(environment=ClusterEnvironment.local(0, 2, 29500), **layout)
    with pytest.raises(ValueError, match="also defines forward"):
        strategy.setup_module(ListedWithForward())


def test_fit_under_the_in_process_hybrid_refuses_it() -> None:
    environment = ClusterEnvironment.local(0, 1, free_port())
    strategy = HybridStrategy(stage_devices=2, environment=environment)
    trainer = trainkit.Trainer(strategy=strategy, max_steps=1, logger=False, **FIT_QUIET)
    data = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)))
    try:
        with pytest.raises(ValueError, match="also defines forward"):
            trainer.fit(ListedWithForward(), DataLoader(data, batch_size=4))
    finally:
        end_process_group()

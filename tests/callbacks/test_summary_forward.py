"""The summary's FLOPs, In sizes and Out sizes: one forward pass of example_input_array."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

import trainkit
from tests.helpers import QUIET, blobs, loader
from trainkit.callbacks.model_summary import ModelSummary, summarize, summary_table


class TwoInputs(trainkit.Module):
    """Two positional inputs, a layer the forward never calls, a tuple output."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 4)
        self.b = nn.Linear(4, 2)
        self.unused = nn.Linear(1, 1)
        self.example_input_array = (torch.zeros(5, 3), torch.zeros(5, 4))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Any:
        return self.b(self.a(x) + y), 7


def _columns(table: Any) -> list[list[str]]:
    header = table.header
    return [
        [row[header.index(name)] for name in ("FLOPs", "In sizes", "Out sizes")]
        for row in table.rows
    ]


def test_sizes_and_flops_are_lightnings() -> None:
    # The cells Lightning 2.6.6's summary shows for the same model.
    table = summary_table(TwoInputs())
    assert table.header[-3:] == ["FLOPs", "In sizes", "Out sizes"]
    assert _columns(table) == [
        ["120", "[5, 3]", "[5, 4]"],
        ["80", "[5, 4]", "[5, 2]"],
        ["0", "?", "?"],
    ]
    assert table.total_flops == 200 and ("200", "Total Flops") in table.totals
    text = summarize(TwoInputs())
    assert text.splitlines()[-1] == "200       Total Flops"


def test_keyword_inputs_and_the_module_without_an_example() -> None:
    class Keywords(trainkit.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(3, 4)
            self.example_input_array = {"x": torch.zeros(5, 3)}

        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"out": self.a(x)}

    assert _columns(summary_table(Keywords())) == [["120", "[5, 3]", "[5, 4]"]]
    plain = summary_table(nn.Sequential(nn.Linear(3, 4)))
    assert "FLOPs" not in plain.header and plain.total_flops is None
    assert "Total Flops" not in summarize(nn.Sequential(nn.Linear(3, 4)))


def test_the_pass_changes_nothing_the_training_sees() -> None:
    class Noisy(trainkit.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.BatchNorm1d(3)
            self.frozen = nn.Dropout(0.5).eval()  # the user's choice: stays in eval mode
            self.example_input_array = torch.randn(4, 3) + 5

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.frozen(self.norm(x)) + torch.randn(1)  # draws from the random stream

    model = Noisy()
    stats = model.norm.running_mean.clone()
    state = torch.get_rng_state()
    summary_table(model)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(model.norm.running_mean, stats)  # eval mode: no statistics update
    assert model.training and model.norm.training and not model.frozen.training
    assert all(p.grad is None for p in model.parameters())


def test_a_model_with_lazy_parameters_is_not_run() -> None:
    # The pass would create the lazy weights at fit start, not where training creates them.
    model = nn.Sequential(nn.LazyLinear(4), nn.ReLU())
    model.example_input_array = torch.zeros(2, 3)  # type: ignore[assignment]
    table = summary_table(model)
    assert "FLOPs" not in table.header and table.note and "lazy" in table.note
    assert nn.parameter.is_lazy(model[0].weight)


def test_a_failing_example_warns_and_the_summary_goes_on() -> None:
    model = TwoInputs()
    model.example_input_array = torch.zeros(5, 7)  # one input where forward takes two
    with pytest.warns(UserWarning, match=r"could not run example_input_array through TwoInputs"):
        table = summary_table(model)
    assert "FLOPs" not in table.header and table.rows


def test_the_callback_shows_them_in_one_process_only(capsys: pytest.CaptureFixture[str]) -> None:
    def trainer(world_size: int, compile_options: Any = None) -> Any:
        hardware = SimpleNamespace(compile_options=compile_options)
        return SimpleNamespace(is_global_zero=True, world_size=world_size, hardware=hardware)

    ModelSummary().on_fit_start(trainer(2), TwoInputs())
    assert "FLOPs" not in capsys.readouterr().out  # rank 0 alone must not run a sharded model
    ModelSummary().on_fit_start(trainer(1, compile_options={}), TwoInputs())
    assert "FLOPs" not in capsys.readouterr().out  # it would compile the forward, for a summary
    ModelSummary().on_fit_start(trainer(1), TwoInputs())
    assert "FLOPs" in capsys.readouterr().out

    class Classifier(TwoInputs):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            return nn.functional.cross_entropy(nn.functional.pad(self.a(x[:, :3]), (0, 0)), y % 4)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    trainer = trainkit.Trainer(max_steps=1, **{**QUIET, "enable_model_summary": True})
    trainer.fit(Classifier(), loader(blobs(32)))
    out = capsys.readouterr().out
    assert (
        "| FLOPs | In sizes | Out sizes" in out and out.splitlines()[-1] == "200       Total Flops"
    )


@pytest.mark.skipif(importlib.util.find_spec("lightning") is None, reason="needs Lightning")
def test_the_same_cells_as_lightnings_summary() -> None:
    import lightning.pytorch as pl
    from lightning.pytorch.utilities.model_summary import ModelSummary as LightningSummary

    class Same(pl.LightningModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.unused = nn.Linear(3, 4), nn.Linear(4, 2), nn.Linear(1, 1)
            self.example_input_array = (torch.zeros(5, 3), torch.zeros(5, 4))

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> Any:
            return self.b(self.a(x) + y), 7

    theirs = [line.split("|") for line in str(LightningSummary(Same())).splitlines()[2:5]]
    assert [[cell.strip() for cell in row[-3:]] for row in theirs] == _columns(
        summary_table(TwoInputs())
    )


def test_a_scripted_submodule_has_unknown_sizes_and_the_run_goes_on() -> None:
    # torch.jit.script modules take no forward hooks; Lightning shows "?" for them.
    from trainkit.lightning.utilities.model_summary import ModelSummary as LightningSummary

    class Scripted(trainkit.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(3, 4)
            self.b = torch.jit.script(nn.Linear(4, 2))
            self.example_input_array = torch.zeros(5, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(self.a(x))

    assert [row[1:] for row in _columns(summary_table(Scripted()))] == [
        ["[5, 3]", "[5, 4]"],
        ["?", "?"],
    ]
    lightning = LightningSummary(Scripted())  # type: ignore[arg-type]
    assert lightning.in_sizes == [[5, 3], "?"]


class AnyInputs(trainkit.Module):
    """Passes whatever it is called with to a layer that takes anything."""

    class TakesAnything(nn.Module):
        def forward(self, *args: Any, **kwargs: Any) -> None:
            return None

    def __init__(self, example: Any) -> None:
        super().__init__()
        self.layer = self.TakesAnything()
        self.example_input_array = example

    def forward(self, *args: Any, **kwargs: Any) -> None:
        return self.layer(*args, **kwargs)


@pytest.mark.parametrize(
    ("example", "shown"),
    [
        ([], "?"),  # no input at all
        (torch.tensor(0.0), "?"),  # a scalar
        ((1, 2), ["?", "?"]),
        ({"a": torch.zeros(1, 2)}, [1, 2]),  # a layer called with keywords only
        ({"a": torch.zeros(1, 2), "b": torch.zeros(3)}, [[1, 2], [3]]),
        ((torch.zeros(2, 3),), [2, 3]),
    ],
)
def test_in_sizes_count_keyword_inputs_and_show_nothing_as_unknown(
    example: Any, shown: Any
) -> None:
    # The cells Lightning 2.6.6 shows for the same inputs.
    from trainkit.lightning.utilities.model_summary import ModelSummary as LightningSummary

    forward = summary_table(AnyInputs(example)).forward
    assert forward is not None and forward.input_shapes == [shown]
    assert LightningSummary(AnyInputs(example)).in_sizes == [shown]  # type: ignore[arg-type]

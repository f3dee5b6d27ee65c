"""ModelSummary: correct totals (frozen, shared, lazy) and the rows a user expects."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

import trainkit
from trainkit.callbacks.model_summary import (
    ModelSummary,
    human_readable_count,
    summarize,
    summary_table,
)


def totals(text: str) -> dict[str, str]:
    """The totals block: label -> value text."""
    result = {}
    for line in text.splitlines():
        if "params" in line and "|" not in line and not line.startswith("Note"):
            value, label = line[:10].strip(), line[10:].strip()
            result[label] = value
    return result


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))


def test_known_model_totals_and_rows() -> None:
    text = summarize(mlp())
    assert totals(text) == {
        "Trainable params": "2.8 K",
        "Non-trainable params": "0",
        "Total params": "2.8 K",
        "Total estimated model params size (MB)": "0.011",  # 2762 * 4 bytes
    }
    rows = [line.split("|") for line in text.splitlines() if "|" in line]
    cells = [[cell.strip() for cell in row] for row in rows]
    assert cells[0] == ["", "Name", "Type", "Params", "Mode"]
    assert cells[1:] == [
        ["0", "0", "Linear", "2.1 K", "train"],
        ["1", "1", "ReLU", "0", "train"],
        ["2", "2", "Linear", "650", "train"],
    ]


def test_frozen_parameters_are_non_trainable() -> None:
    model = mlp()
    model[0].requires_grad_(False)
    model[2].eval()
    text = summarize(model)
    assert totals(text)["Trainable params"] == "650"
    assert totals(text)["Non-trainable params"] == "2.1 K"
    assert totals(text)["Total params"] == "2.8 K"
    assert "| eval" in text


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(100, 100, bias=False)
        self.decoder = nn.Linear(100, 100, bias=False)
        self.decoder.weight = self.encoder.weight


def test_shared_weights_are_counted_once() -> None:
    text = summarize(Tied())
    assert totals(text)["Total params"] == "10.0 K"  # not 20.0 K
    assert totals(text)["Total estimated model params size (MB)"] == "0.040"


def test_depth_two_shows_nested_names() -> None:
    model = nn.Sequential()
    model.add_module("encoder", nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
    model.add_module("head", nn.Linear(4, 1))
    shallow = summarize(model, max_depth=1)
    deep = summarize(model, max_depth=2)
    assert "encoder.0" not in shallow
    assert "encoder.0" in deep and "encoder.1" in deep
    assert "| head" in deep
    assert "|" not in summarize(model, max_depth=0)  # totals only


def test_a_child_registered_under_two_names_is_listed_under_both() -> None:
    # As Lightning's table at depth 1 (a Module that keeps `self.loss = self.model.loss`).
    from trainkit.lightning.utilities.model_summary import ModelSummary as LightningSummary

    model = nn.Module()
    model.inner = nn.Sequential(nn.Linear(4, 4))
    model.inner.loss = nn.MSELoss()
    model.loss = model.inner.loss
    assert "| loss " in summarize(model, max_depth=1)
    assert LightningSummary(model, max_depth=1).layer_names == ["inner", "loss"]
    assert LightningSummary(model, max_depth=2).layer_names == ["inner", "inner.0", "inner.loss"]


def test_lazy_parameters_count_as_zero_and_are_noted() -> None:
    model = nn.Sequential(nn.LazyLinear(8), nn.Linear(8, 2))
    text = summarize(model)
    assert totals(text)["Total params"] == "18"
    assert "Note: 2 uninitialized (lazy) parameters in 0" in text


def test_size_uses_each_parameter_element_size() -> None:
    text = summarize(nn.Linear(1000, 1000).half())
    assert totals(text)["Total estimated model params size (MB)"] == "2.002"


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0, "0"),
        (999, "999"),
        (1000, "1.0 K"),
        (2762, "2.8 K"),
        (123_456, "123 K"),
        (1_234_567, "1.2 M"),
    ],
)
def test_human_readable_count(number: int, text: str) -> None:
    assert human_readable_count(number) == text


NOT_COMPILED = SimpleNamespace(compile_options=None)


def test_callback_prints_on_rank_zero_only(capsys: pytest.CaptureFixture[str]) -> None:
    module: Any = mlp()
    ModelSummary().on_fit_start(
        SimpleNamespace(is_global_zero=False, world_size=1, hardware=NOT_COMPILED), module
    )
    assert capsys.readouterr().out == ""
    ModelSummary().on_fit_start(
        SimpleNamespace(is_global_zero=True, world_size=1, hardware=NOT_COMPILED), module
    )
    assert "2.8 K     Total params" in capsys.readouterr().out


def test_invalid_depth_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_depth=-2"):
        ModelSummary(max_depth=-2)


def test_fast_dev_run_keeps_the_summary_and_barebones_drops_it() -> None:
    # As in Lightning: a quick check run still shows what it trains.
    import trainkit

    quick = trainkit.Trainer(fast_dev_run=True, logger=False, accelerator="cpu")
    assert any(isinstance(c, ModelSummary) for c in quick.callbacks)
    bare = trainkit.Trainer(barebones=True, accelerator="cpu")
    assert not any(isinstance(c, ModelSummary) for c in bare.callbacks)


class OwnParameter(trainkit.Module):
    """A parameter on the model itself, which no listed layer holds."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(2, 2))
        self.layer = torch.nn.Linear(2, 3)
        self.example_input_array = torch.ones(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x @ self.scale)


def test_parameters_of_no_listed_layer_have_a_row_of_their_own() -> None:
    # As in Lightning's table: "other params", its count, n/a elsewhere.
    table = summary_table(OwnParameter())
    assert table.rows[-1] == [" ", "other params", "n/a", "4", "n/a", "n/a", "n/a", "n/a"]
    assert table.total_parameters == 13
    assert "  | other params | n/a    | 4      | n/a" in summarize(OwnParameter())
    assert summary_table(torch.nn.Sequential(torch.nn.Linear(2, 3))).rows[-1][1] == "0"


@pytest.mark.parametrize("depth", [-2, "deep", 1.5, True])
def test_a_wrong_max_depth_says_which_values_work(depth: Any) -> None:
    with pytest.raises(ValueError, match=r"`max_depth` can be -1, 0 or > 0, got .*: pass -1"):
        summary_table(torch.nn.Linear(2, 2), depth)

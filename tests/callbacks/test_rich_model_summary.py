"""RichModelSummary: ModelSummary's data as a rich table, max_depth respected."""

from __future__ import annotations

import io

import pytest

import trainkit
from tests.helpers import NEEDS_RICH, QUIET, Classifier, blobs, loader
from trainkit.callbacks import ModelSummary
from trainkit.callbacks.model_summary import summary_table
from trainkit.callbacks.rich_model_summary import RichModelSummary

# Without the rich extra (a newcomer's ".[dev]"), the module is skipped; CI installs it.
Console = pytest.importorskip("rich.console", reason=NEEDS_RICH).Console


def fit_with(summary: RichModelSummary) -> trainkit.Trainer:
    trainer = trainkit.Trainer(max_steps=1, callbacks=[summary], **QUIET)
    trainer.fit(Classifier(), loader(blobs(64)))
    return trainer


@pytest.mark.parametrize(
    ("max_depth", "names"), [(1, ["net"]), (2, ["net", "net.0", "net.1", "net.2"])]
)
def test_fit_prints_the_table_to_max_depth(
    max_depth: int, names: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    trainer = fit_with(RichModelSummary(max_depth=max_depth))
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert [row.split("│")[2].strip() for row in rows] == names
    assert "┃ Name" in out
    # The same totals as ModelSummary's.
    for value, label in summary_table(Classifier(), max_depth).totals:
        assert f"{label}: {value}" in out
    # It is the run's model summary: the Trainer adds no ModelSummary beside it.
    summaries = [c for c in trainer.callbacks if isinstance(c, ModelSummary)]
    assert len(summaries) == 1


def test_max_depth_zero_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    fit_with(RichModelSummary(max_depth=0))
    assert "Total params" not in capsys.readouterr().out


def test_header_style_is_applied() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system="truecolor", width=100)
    RichModelSummary(header_style="#ff0000").print_summary(Classifier(), console=console)
    assert "38;2;255;0;0" in out.getvalue()


def test_unknown_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="header_colour"):
        RichModelSummary(header_colour="red")


def test_the_flops_total_is_spelled_as_lightnings_rich_table_spells_it() -> None:
    import torch

    model = Classifier()
    model.example_input_array = torch.zeros(2, 8)
    out = io.StringIO()
    RichModelSummary().print_summary(model, console=Console(file=out, width=100))
    assert "Total FLOPs: " in out.getvalue() and "Total Flops" not in out.getvalue()

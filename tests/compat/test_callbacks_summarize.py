"""ModelSummary.summarize and RichModelSummary.summarize: the static methods a project
overrides to show the summary its own way, called with Lightning's arguments."""

from __future__ import annotations

import io
from typing import Any

import pytest

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader, needs_rich
from trainkit.callbacks import ModelSummary, RichModelSummary
from trainkit.callbacks.model_summary import summarize

OPTIONS = {**QUIET, "enable_model_summary": True}


def _fit(summary: ModelSummary) -> None:
    trainer = trainkit.Trainer(max_steps=1, callbacks=[summary], **OPTIONS)
    trainer.fit(Frozen(), loader(blobs(32), 16))


class Frozen(Classifier):
    """Classifier whose last layer is frozen."""

    def __init__(self) -> None:
        super().__init__()
        self.net[2].requires_grad_(False)


CALLS: list[dict[str, Any]] = []


def _record(
    summary_data: list[tuple[str, list[str]]],
    total_parameters: int,
    trainable_parameters: int,
    model_size: float,
    total_training_modes: dict[str, int],
    **summarize_kwargs: Any,
) -> None:
    CALLS.append(
        {
            "summary_data": summary_data,
            "total_parameters": total_parameters,
            "trainable_parameters": trainable_parameters,
            "model_size": model_size,
            "total_training_modes": total_training_modes,
            "summarize_kwargs": summarize_kwargs,
        }
    )


class Recording(ModelSummary):
    summarize = staticmethod(_record)


class RichRecording(RichModelSummary):
    summarize = staticmethod(_record)


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()


def test_an_override_gets_the_summary_data_and_the_constructors_kwargs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _fit(Recording(max_depth=2, prefix="model"))
    assert len(CALLS) == 1
    call = CALLS[0]
    columns = [name for name, _ in call["summary_data"]]
    assert columns == [" ", "Name", "Type", "Params", "Mode"]
    cells = dict(call["summary_data"])
    assert cells["Name"] == ["net", "net.0", "net.1", "net.2"]
    assert cells["Params"] == ["387", "288", "0", "99"]
    assert cells["Mode"] == ["train"] * 4
    # 8*32+32 trainable, 32*3+3 frozen; four bytes each.
    assert call["total_parameters"] == 387 and call["trainable_parameters"] == 288
    assert call["model_size"] == pytest.approx(387 * 4 / 1e6)
    assert call["total_training_modes"] == {"train": 4, "eval": 0}
    assert call["summarize_kwargs"] == {"total_flops": 0, "prefix": "model"}
    assert "Total params" not in capsys.readouterr().out  # the override replaced the table


def test_without_an_override_the_table_is_printed_as_before(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _fit(ModelSummary(max_depth=2))
    assert capsys.readouterr().out == summarize(Frozen(), max_depth=2) + "\n"


def test_the_default_summarize_can_be_called_with_lightnings_arguments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = [(" ", ["0"]), ("Name", ["fc"]), ("Type", ["Linear"]), ("Params", ["9"])]
    ModelSummary.summarize(data, 9, 9, 0.0, {"train": 1, "eval": 0}, 0)
    out = capsys.readouterr().out
    assert "0 | fc   | Linear | 9" in out and "9         Total params" in out


def test_keyword_arguments_need_an_override_to_take_them() -> None:
    with pytest.raises(TypeError, match="prefix"):
        ModelSummary(prefix="model")


@needs_rich
def test_keyword_arguments_need_an_override_to_take_them_in_the_rich_summary_too() -> None:
    with pytest.raises(TypeError, match="prefix"):
        RichModelSummary(prefix="model")


@needs_rich
def test_a_rich_override_gets_header_style_and_its_own_kwargs() -> None:
    _fit(RichRecording(max_depth=1, header_style="bold", width=60))
    assert CALLS[0]["summarize_kwargs"] == {"total_flops": 0, "header_style": "bold", "width": 60}
    assert [name for name, _ in CALLS[0]["summary_data"]][1] == "Name"


@needs_rich
def test_the_rich_summarize_draws_the_table_on_richs_console(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import rich
    from rich.console import Console

    out = io.StringIO()
    monkeypatch.setattr(rich, "_console", Console(file=out, width=80))
    data = [(" ", ["0"]), ("Name", ["fc"]), ("Type", ["Linear"]), ("Params", ["9"])]
    RichModelSummary.summarize(data, 9, 9, 0.0, {"train": 1, "eval": 0}, 0)
    text = out.getvalue()
    assert "┃ Name" in text and "│ fc" in text and "Total params: 9" in text

"""rank_zero_only and friends act on global rank 0 and nowhere else."""

from __future__ import annotations

import warnings

import pytest

import trainkit


@pytest.mark.parametrize(("variable", "rank"), [("RANK", "1"), ("SLURM_PROCID", "3")])
def test_other_ranks_do_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], variable: str, rank: str
) -> None:
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv(variable, rank)
    assert trainkit.rank_zero_only(lambda: "ran")() is None
    trainkit.rank_zero_print("hello")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainkit.rank_zero_warn("careful")
    assert capsys.readouterr().out == "" and caught == []


def test_rank_zero_does_everything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RANK", "0")
    assert trainkit.rank_zero_only(lambda: "ran")() == "ran"
    trainkit.rank_zero_print("hello")
    with pytest.warns(UserWarning, match="careful"):
        trainkit.rank_zero_warn("careful")
    assert capsys.readouterr().out == "hello\n"

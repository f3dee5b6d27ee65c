"""How durations and rates read in the progress bar's and the run summary's lines."""

from __future__ import annotations

import pytest

from trainkit.utilities.durations import format_duration, format_rate


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.04, "0.0s"), (59.94, "59.9s"), (60, "1m00s"), (3599, "59m59s"), (3600, "1h00m00s")],
)
def test_durations_at_the_unit_boundaries(seconds: float, shown: str) -> None:
    assert format_duration(seconds) == shown


@pytest.mark.parametrize(
    ("batches", "seconds", "shown"),
    [(0, 1.0, "? it/s"), (5, 0.0, "? it/s"), (1, 2.0, "2 s/it"), (99.9, 1.0, "99.9 it/s")],
)
def test_rates_without_work_below_one_a_second_and_below_a_hundred(
    batches: float, seconds: float, shown: str
) -> None:
    assert format_rate(batches, seconds) == shown

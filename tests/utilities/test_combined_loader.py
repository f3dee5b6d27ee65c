"""CombinedLoader: Lightning's sampling modes, its iteration and its length."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

from trainkit.utilities.combined_loader import (
    CombinedBatches,
    CombinedLoader,
    flatten,
    is_loader_collection,
    training_iterable,
)


def _loaders() -> dict[str, DataLoader[Any]]:
    # "a": 2 batches ([0..3], [4, 5]); "b": 3 batches of 5.
    return {"a": DataLoader(range(6), batch_size=4), "b": DataLoader(range(15), batch_size=5)}


def _plain(batch: Any) -> Any:
    if isinstance(batch, dict):
        return {key: _plain(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_plain(value) for value in batch)
    return batch.tolist() if isinstance(batch, torch.Tensor) else batch


def test_max_size_cycle_starts_the_shorter_again_until_the_longest_ends() -> None:
    combined = CombinedLoader(_loaders(), "max_size_cycle")
    assert len(combined) == 3
    assert [(_plain(b), i, d) for b, i, d in combined] == [
        ({"a": [0, 1, 2, 3], "b": [0, 1, 2, 3, 4]}, 0, 0),
        ({"a": [4, 5], "b": [5, 6, 7, 8, 9]}, 1, 0),
        ({"a": [0, 1, 2, 3], "b": [10, 11, 12, 13, 14]}, 2, 0),
    ]


def test_min_size_stops_with_the_shortest() -> None:
    combined = CombinedLoader(_loaders())  # Lightning's default mode
    assert combined.mode == "min_size" and len(combined) == 2
    assert [_plain(b)["b"] for b, _, _ in combined] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]


def test_max_size_gives_none_for_the_ended_ones() -> None:
    combined = CombinedLoader(_loaders(), "max_size")
    assert len(combined) == 3
    assert [_plain(b)["a"] for b, _, _ in combined] == [[0, 1, 2, 3], [4, 5], None]


def test_sequential_reads_each_whole_with_its_index() -> None:
    combined = CombinedLoader(
        [DataLoader(range(3), batch_size=2), DataLoader(range(2))], "sequential"
    )
    assert len(combined) == 4
    assert [(_plain(b), i, d) for b, i, d in combined] == [
        ([0, 1], 0, 0),
        ([2], 1, 0),
        ([0], 0, 1),
        ([1], 1, 1),
    ]
    with pytest.raises(ValueError, match="gives each iterable's batches separately"):
        next(combined.batches())


def test_nested_shapes_come_back_as_given() -> None:
    a, b, c = DataLoader(range(2)), DataLoader(range(10, 12)), DataLoader(range(20, 22))
    combined = CombinedLoader({"x": [a, b], "y": (c,)}, "min_size")
    first, _, _ = next(iter(combined))
    assert _plain(first) == {"x": [[0], [10]], "y": ([20],)}
    assert combined.flattened == [a, b, c]
    assert combined.sampler == {"x": [a.sampler, b.sampler], "y": (c.sampler,)}


def test_replacing_the_loaders_keeps_the_shape() -> None:
    combined = CombinedLoader(_loaders(), "max_size_cycle")
    replacement = [DataLoader(range(2)), DataLoader(range(3))]
    combined.flattened = replacement
    assert combined.iterables == {"a": replacement[0], "b": replacement[1]}
    assert len(combined) == 3
    with pytest.raises(ValueError, match="holds 2 iterables; 1 were given"):
        combined.flattened = replacement[:1]


def test_each_iteration_starts_afresh() -> None:
    combined = CombinedLoader(_loaders(), "max_size_cycle")
    assert [_plain(b) for b, _, _ in combined] == [_plain(b) for b, _, _ in combined]


def test_an_empty_loader_ends_a_cycling_combination() -> None:
    combined = CombinedLoader([DataLoader(range(4)), DataLoader(range(0))], "max_size_cycle")
    assert len(combined) == 0 and list(combined) == []


def test_bad_modes_and_lengthless_iterables_are_named() -> None:
    with pytest.raises(
        ValueError, match=r"Unsupported mode 'longest', please select one of: \['min_size'"
    ):
        CombinedLoader(_loaders(), "longest")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="its generator has none"):
        len(CombinedLoader([(i for i in range(3))]))


def test_flatten_rebuilds_the_shape() -> None:
    leaves, rebuild = flatten({"a": [1, (2, 3)], "b": 4})
    assert leaves == [1, 2, 3, 4]
    assert rebuild(["p", "q", "r", "s"]) == {"a": ["p", ("q", "r")], "b": "s"}


def test_a_collection_of_loaders_is_combined_and_a_list_of_batches_is_not() -> None:
    loaders = _loaders()
    assert is_loader_collection(loaders) and is_loader_collection([loaders["a"]])
    batches = [(torch.zeros(2, 3), torch.zeros(2)), (torch.ones(2, 3), torch.ones(2))]
    assert not is_loader_collection(batches) and not is_loader_collection([])
    assert training_iterable(batches) is batches
    combined = training_iterable(loaders)
    assert isinstance(combined, CombinedBatches) and combined.combined.mode == "max_size_cycle"
    assert len(combined) == 3 and _plain(next(iter(combined)))["a"] == [0, 1, 2, 3]
    with pytest.raises(
        ValueError, match="Training cannot read CombinedLoader\\(mode='sequential'\\)"
    ):
        training_iterable(CombinedLoader(loaders, "sequential"))


def test_a_loader_ending_with_the_longest_is_not_started_again() -> None:
    starts = {"a": 0, "b": 0}

    class Counting:
        def __init__(self, name: str, n: int) -> None:
            self.name, self.n = name, n

        def __iter__(self) -> Any:
            starts[self.name] += 1
            return iter(range(self.n))

        def __len__(self) -> int:
            return self.n

    combined = CombinedLoader({"a": Counting("a", 3), "b": Counting("b", 3)}, "max_size_cycle")
    assert [b for b, _, _ in combined] == [{"a": i, "b": i} for i in range(3)]
    assert starts == {"a": 1, "b": 1}
    uneven = CombinedLoader([Counting("a", 2), Counting("b", 5)], "max_size_cycle")
    assert [b[0] for b, _, _ in uneven] == [0, 1, 0, 1, 0] and starts["a"] == 4

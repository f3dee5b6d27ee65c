"""Lightning's ``lightning.pytorch.loggers.logger`` names, served by trainkit."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trainkit.loggers import DummyLogger, Logger
from trainkit.loggers.dummy import DummyExperiment

__all__ = ["DummyExperiment", "DummyLogger", "Logger", "merge_dicts", "rank_zero_experiment"]


def rank_zero_experiment(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Wrap a custom logger's ``experiment`` property: the real one on global rank 0 only.

    Elsewhere the property gives a :class:`~trainkit.loggers.dummy.DummyExperiment`,
    whose every method does nothing, so the run is created by rank 0 alone.

    Example:
        >>> class MyLogger(Logger):
        ...     @property
        ...     @rank_zero_experiment
        ...     def experiment(self):
        ...         return "the run"
    """
    from trainkit.utilities.rank_zero import global_rank

    @functools.wraps(fn)
    def experiment(self: Any) -> Any:
        if global_rank() > 0:
            return DummyExperiment()
        return fn(self)

    return experiment


def merge_dicts(
    dicts: Sequence[Mapping[str, Any]],
    agg_key_funcs: Mapping[str, Any] | None = None,
    default_func: Callable[[Sequence[Any]], Any] = statistics.mean,
) -> dict[str, Any]:
    """One dict from several: each key's values (None left out) aggregated by a function.

    Nested dicts are merged the same way, key by key; their functions are a nested
    mapping in ``agg_key_funcs``.

    Args:
        dicts: the dicts to merge.
        agg_key_funcs: key -> the function that aggregates its list of values (for a
            nested dict, a mapping of its keys' functions); other keys use ``default_func``.
        default_func: the function for keys without one (the mean).

    Example:
        >>> merge_dicts([{"a": 1.0, "n": {"x": 1}}, {"a": 3.0, "b": 5, "n": {"x": 2}}],
        ...             {"n": {"x": sum}})
        {'a': 2.0, 'n': {'x': 3}, 'b': 5}
    """
    functions = agg_key_funcs or {}
    keys = list(dict.fromkeys(key for one in dicts for key in one))
    merged: dict[str, Any] = {}
    for key in keys:
        values = [one[key] for one in dicts if one.get(key) is not None]
        if not values:
            continue
        function = functions.get(key)
        if isinstance(values[0], Mapping):
            merged[key] = merge_dicts(values, function, default_func)
        else:
            merged[key] = (function or default_func)(values)
    return merged

"""Lightning Fabric's ``lightning.fabric.utilities.logger``: the private helpers logger
libraries import to prepare hyperparameters and metric names, served by trainkit."""

from __future__ import annotations

import dataclasses
import inspect
import json
from argparse import Namespace
from collections.abc import Mapping, MutableMapping
from typing import Any

import torch

from trainkit.loggers._tracking import prefixed

__all__ = [
    "_add_prefix",
    "_convert_json_serializable",
    "_convert_params",
    "_flatten_dict",
    "_is_json_serializable",
    "_sanitize_callable_params",
    "_sanitize_params",
]


def _convert_params(params: Mapping[str, Any] | Namespace | None) -> dict[str, Any]:
    """``params`` as a dict: a Namespace's attributes, ``{}`` for None.

    Example:
        >>> _convert_params(Namespace(lr=0.1)), _convert_params(None)
        ({'lr': 0.1}, {})
    """
    if params is None:
        return {}
    if isinstance(params, Namespace):
        return vars(params)
    return params if isinstance(params, dict) else dict(params)


def _sanitize_callable_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Each callable value replaced by what it returns when called without arguments, or
    by its name (a class, a callable that needs arguments or returns a callable).

    Example:
        >>> _sanitize_callable_params({"act": torch.nn.ReLU, "n": 3, "f": lambda: 5})
        {'act': 'ReLU', 'n': 3, 'f': 5}
    """

    def plain(value: Any) -> Any:
        if inspect.isclass(value):
            return value.__name__
        if not callable(value):
            return value
        try:
            called = value()
        except Exception:
            return getattr(value, "__name__", None)
        return getattr(value, "__name__", None) if callable(called) else called

    return {key: plain(value) for key, value in params.items()}


def _flatten_dict(
    params: Mapping[Any, Any], delimiter: str = "/", parent_key: str = ""
) -> dict[str, Any]:
    """Nested mappings (and Namespaces, dataclass instances, lists of mappings) as one
    level, their keys joined by ``delimiter``.

    Example:
        >>> _flatten_dict({"a": {"b": 1}, "l": [{"x": 2}], "n": Namespace(c=3), "v": [1, 2]})
        {'a/b': 1, 'l/0/x': 2, 'n/c': 3, 'v': [1, 2]}
    """
    flat: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{parent_key}{delimiter}{key}" if parent_key else str(key)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = dataclasses.asdict(value)
        elif isinstance(value, Namespace):
            value = vars(value)
        if isinstance(value, MutableMapping):
            flat.update(_flatten_dict(value, delimiter, name))
        elif (
            isinstance(value, list) and value and all(isinstance(v, MutableMapping) for v in value)
        ):
            for index, item in enumerate(value):
                flat.update(_flatten_dict(item, delimiter, f"{name}{delimiter}{index}"))
        else:
            flat[name] = value
    return flat


def _sanitize_params(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with NumPy scalars as Python numbers and every value that is not a bool,
    int, float, str or tensor written as its ``str`` (changed in place, and returned).

    Example:
        >>> _sanitize_params({"lr": 0.1, "sizes": [1, 2], "ok": True})
        {'lr': 0.1, 'sizes': '[1, 2]', 'ok': True}
    """
    for key, value in params.items():
        if hasattr(value, "item") and type(value).__module__ == "numpy" and value.ndim == 0:
            value = params[key] = value.item()
        if type(value) not in (bool, int, float, str, torch.Tensor):
            params[key] = str(value)
    return params


def _is_json_serializable(value: Any) -> bool:
    """Whether ``json.dumps`` can write ``value``.

    Example:
        >>> _is_json_serializable([1, "a"]), _is_json_serializable(object())
        (True, False)
    """
    try:
        json.dumps(value)
    except (TypeError, ValueError, OverflowError):
        return False
    return True


def _convert_json_serializable(params: Mapping[str, Any]) -> dict[str, Any]:
    """Each value JSON cannot write replaced by its ``str``.

    Example:
        >>> _convert_json_serializable({"a": 1, "b": {1, 2}})
        {'a': 1, 'b': '{1, 2}'}
    """
    return {k: v if _is_json_serializable(v) else str(v) for k, v in params.items()}


def _add_prefix(metrics: Mapping[str, Any], prefix: str, separator: str) -> Mapping[str, Any]:
    """Each metric name as ``<prefix><separator><name>`` (``metrics`` itself without a prefix).

    Example:
        >>> _add_prefix({"loss": 0.5}, "train", "-")
        {'train-loss': 0.5}
    """
    return prefixed(metrics, prefix, separator) if prefix else metrics

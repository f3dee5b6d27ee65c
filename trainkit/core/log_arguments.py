"""What ``self.log`` and ``self.log_dict`` accept, beyond what the results store records.

``Module.log`` hands each value to the Trainer's results store
(``trainkit.loops.results``); the checks here cover the Lightning arguments
trainkit treats differently, and the entries ``log_dict`` logs one by one.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from trainkit.core.module import Module


def check_log_options(
    module: Module, name: str, enable_graph: bool, sync_dist_group: Any, rank_zero_sync: bool
) -> None:
    """``self.log`` options trainkit handles differently: a warning or an error saying why.

    Args:
        module: the Module that logs (its strategy tells whether there are several processes).
        name: the logged name, for the messages.
        enable_graph: ``self.log``'s ``enable_graph``.
        sync_dist_group: ``self.log``'s ``sync_dist_group``.
        rank_zero_sync: whether both ``rank_zero_only`` and ``sync_dist`` were set.
    """
    if enable_graph:
        warnings.warn(
            f"self.log({name!r}, enable_graph=True): trainkit always logs detached values, so "
            "that no autograd graph is kept alive; the value is logged without its graph.",
            stacklevel=3,
        )
    if sync_dist_group is not None:
        warnings.warn(
            f"self.log({name!r}, sync_dist_group=...): trainkit reduces sync_dist values over "
            "all processes, not over a group. Reduce over your group yourself before logging "
            "if that differs.",
            stacklevel=3,
        )
    if rank_zero_sync and module.trainer.strategy.world_size > 1:
        raise ValueError(
            f"self.log({name!r}, rank_zero_only=True, sync_dist=True): a value logged from "
            "rank 0 only cannot be reduced across processes (the others would wait forever). "
            "Drop one of the two."
        )


def warn_unattached(module: Module, name: str) -> None:
    """``self.log`` on a Module no Trainer runs: a warning, and nothing is recorded.

    As in Lightning, so that a project's tests may call a step method directly.

    Args:
        module: the Module that logs.
        name: the logged name, for the message.
    """
    warnings.warn(
        f"self.log({name!r}) was called on a {type(module).__name__} not attached to a "
        "Trainer (a step method called directly, in a test say): the value is not "
        "recorded. Run the module with trainer.fit/validate/test to record it.",
        stacklevel=3,
    )


def dict_entries(dictionary: Mapping[str, Any] | Any) -> Iterable[tuple[str, Any]]:
    """The ``(name, value)`` pairs ``self.log_dict(dictionary)`` logs.

    Args:
        dictionary: metric name to value, or a torchmetrics ``MetricCollection``
            (each of its metrics under its name, prefix included).

    Example:
        >>> list(dict_entries({"a": 1.0, "b": 2.0}))
        [('a', 1.0), ('b', 2.0)]
    """
    items = getattr(dictionary, "items", None)
    if items is None:
        raise TypeError(
            f"self.log_dict() got a {type(dictionary).__name__}; pass a dict of name to "
            "value (or a torchmetrics MetricCollection)."
        )
    if is_metric_collection(dictionary):
        # As Lightning: the collection's metrics by their prefixed names; with
        # compute groups, metrics share their group's state by reference
        # instead of copying every state at every step.
        shared = bool(getattr(dictionary, "_enable_compute_groups", False))
        return items(keep_base=False, copy_state=not shared)  # type: ignore[no-any-return]
    return items()  # type: ignore[no-any-return]


def is_metric_collection(value: Any) -> bool:
    """Whether ``value`` is a torchmetrics ``MetricCollection`` (without importing torchmetrics).

    Args:
        value: anything passed to ``self.log_dict``.
    """
    return isinstance(value, torch.nn.Module) and any(
        cls.__name__ == "MetricCollection" and cls.__module__.split(".")[0] == "torchmetrics"
        for cls in type(value).__mro__
    )

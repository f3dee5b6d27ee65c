"""Lightning's ``logger_connector.result``: the type of one dataloader's evaluation results.

``_OUT_DICT`` annotates what ``validate``/``test`` return per dataloader (and what
an ``_EvaluationLoop``'s ``_print_results`` receives): metric name -> value.
"""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import missing

__all__ = ["_OUT_DICT"]

#: One dataloader's results: metric name -> value.
_OUT_DICT = dict[str, Any]


def __getattr__(name: str) -> Any:
    raise missing(__name__, name, __all__)

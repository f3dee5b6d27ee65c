"""Lightning's ``lightning.pytorch.loops``: the evaluation loop class projects subclass.

trainkit's loops are functions over a run (``trainkit/loops``), not Lightning's
loop objects. ``evaluation_loop._EvaluationLoop`` is provided because projects
subclass it to print evaluation results their own way (``_print_results``) and
set an instance as ``trainer.test_loop`` or ``trainer.validate_loop``.
"""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing

__all__: list[str] = []


def __getattr__(name: str) -> Any:
    # Lightning's submodules reached as attributes, as after importing Lightning.
    return submodule_or_missing(__name__, name, __all__)

"""What every probe shares: the framework to import, the working folder, the recording."""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

#: The line prefix the recorded JSON is printed after (probes may print other lines).
MARKER = "PARITY "


def framework() -> tuple[ModuleType, str]:
    """``(L, name)``: ``lightning.pytorch`` or ``trainkit.lightning``, from ``sys.argv[1]``.

    Also moves into the folder given as ``sys.argv[2]`` and silences warnings and
    Lightning's logging: the probes compare behaviour, not messages.
    """
    name = sys.argv[1]
    os.makedirs(sys.argv[2], exist_ok=True)
    os.chdir(sys.argv[2])
    warnings.simplefilter("ignore")
    if name == "lightning":
        import lightning.pytorch as module

        for logger in ("lightning", "lightning.pytorch", "lightning.fabric"):
            logging.getLogger(logger).setLevel(logging.ERROR)
    elif name == "trainkit":
        import trainkit.lightning as module
    else:
        raise SystemExit(f"usage: python -m <probe> lightning|trainkit <folder> (got {name!r})")
    return module, name


def plain(value: Any) -> Any:
    """``value`` as JSON: tensors and floats rounded (to 4 places), containers walked."""
    if isinstance(value, torch.Tensor):
        value = value.detach().float()
        return (
            round(value.item(), 4)
            if value.numel() == 1
            else [round(v, 4) for v in value.flatten().tolist()]
        )
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if value is None or isinstance(value, (int, str, bool)):
        return value
    return type(value).__name__


class Record:
    """The observations of one probe, by key."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def __setitem__(self, key: str, value: Any) -> None:
        self.values[key] = plain(value)

    def probe(self, key: str, read: Callable[[], Any]) -> None:
        """Record ``read()``, or the type of the exception it raised."""
        try:
            self[key] = read()
        except Exception as error:
            self.values[key] = f"ERR {type(error).__name__}"

    def emit(self) -> None:
        """Print the record as the run's last line."""
        print(MARKER + json.dumps(self.values, sort_keys=True), flush=True)


def relative(path: Any) -> Any:
    """``path`` relative to the working folder (the two runs work in different ones)."""
    return os.path.relpath(path) if isinstance(path, str) and os.path.isabs(path) else path

"""What every benchmark prints first: the exact command and the machine."""

from __future__ import annotations

import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any


def exact_command() -> str:
    """The command line that ran this script, with PYTHONPATH if it was set."""
    command = shlex.join([sys.executable, *sys.argv])
    pythonpath = os.environ.get("PYTHONPATH")
    return f"PYTHONPATH={shlex.quote(pythonpath)} {command}" if pythonpath else command


def machine_info(**extra: Any) -> dict[str, Any]:
    """Platform, Python, torch and trainkit versions, thread and CPU counts, plus ``extra``.

    Args:
        **extra: further entries, inserted after the processor.
    """
    import torch

    import trainkit

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        **extra,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "trainkit": f"{trainkit.__version__} ({Path(trainkit.__file__).parent})",
    }


def write_json(path: Path, result: dict[str, Any]) -> None:
    """Write a benchmark's results to ``path`` and say where they went.

    Args:
        path: the ``--json`` file.
        result: the results (JSON-serialisable).
    """
    import json

    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nresults written to {path}")

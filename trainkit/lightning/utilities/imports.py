"""Lightning's ``lightning.pytorch.utilities.imports`` flags, for code that tests them.

Lightning's examples guard optional imports with these (``if _TORCHVISION_AVAILABLE:``).
Each is a plain bool here, found from the installed packages' metadata without
importing them.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys

__all__ = [
    "_OMEGACONF_AVAILABLE",
    "_PYTHON_GREATER_EQUAL_3_11_0",
    "_RICH_AVAILABLE",
    "_TORCHMETRICS_GREATER_EQUAL_0_8_0",
    "_TORCHMETRICS_GREATER_EQUAL_0_9_1",
    "_TORCHMETRICS_GREATER_EQUAL_0_11",
    "_TORCHMETRICS_GREATER_EQUAL_1_0_0",
    "_TORCHVISION_AVAILABLE",
    "_TORCH_GREATER_EQUAL_2_6",
    "_TORCH_GREATER_EQUAL_2_8",
]


def at_least(package: str, *minimum: int) -> bool:
    """Whether ``package`` is installed at version ``minimum`` or later (its release numbers).

    Args:
        package: the distribution's name, e.g. ``"torchmetrics"``.
        minimum: the release numbers, e.g. ``1, 0, 0``.

    Example:
        >>> at_least("torch", 2), at_least("torch", 99), at_least("no-such-package")
        (True, False, False)
    """
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return False
    release = tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])
    return release >= minimum


_PYTHON_GREATER_EQUAL_3_11_0 = sys.version_info >= (3, 11)
_TORCH_GREATER_EQUAL_2_6 = at_least("torch", 2, 6)
_TORCH_GREATER_EQUAL_2_8 = at_least("torch", 2, 8)
_TORCHMETRICS_GREATER_EQUAL_0_8_0 = at_least("torchmetrics", 0, 8)
_TORCHMETRICS_GREATER_EQUAL_0_9_1 = at_least("torchmetrics", 0, 9, 1)
_TORCHMETRICS_GREATER_EQUAL_0_11 = at_least("torchmetrics", 0, 11)
_TORCHMETRICS_GREATER_EQUAL_1_0_0 = at_least("torchmetrics", 1, 0, 0)
_OMEGACONF_AVAILABLE = importlib.util.find_spec("omegaconf") is not None
_TORCHVISION_AVAILABLE = importlib.util.find_spec("torchvision") is not None
_RICH_AVAILABLE = at_least("rich", 10, 2, 2)

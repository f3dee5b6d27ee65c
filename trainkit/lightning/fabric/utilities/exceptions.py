"""Lightning Fabric's ``lightning.fabric.utilities.exceptions``: the same
``MisconfigurationException`` as ``trainkit.lightning.utilities.exceptions`` (in
Lightning too, one class under both paths)."""

from __future__ import annotations

from trainkit.lightning.utilities.exceptions import MisconfigurationException

__all__ = ["MisconfigurationException"]

"""Lightning Fabric's ``lightning.fabric.utilities.warnings`` names, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.utilities.warnings import PossibleUserWarning

__all__ = ["PossibleUserWarning"]

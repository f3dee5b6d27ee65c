"""Lightning's ``lightning.pytorch.utilities.exceptions`` names.

trainkit itself raises ``ValueError``/``TypeError`` with a message saying what to
change where Lightning raises ``MisconfigurationException`` (docs/porting.md); this
class is here for code that raises or catches it itself. ``SIGTERMException`` is
what ``fit`` raises (a ``SystemExit``) after stopping for SIGTERM, its checkpoint
saved.
"""

from __future__ import annotations

from trainkit.checkpoint.preemption import SIGTERMException

__all__ = ["MisconfigurationException", "SIGTERMException"]


class MisconfigurationException(Exception):
    """A setting that cannot work, raised by code ported from Lightning."""

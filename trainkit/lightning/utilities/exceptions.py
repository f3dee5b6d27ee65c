"""Lightning's ``lightning.pytorch.utilities.exceptions`` names.

trainkit itself raises ``ValueError``/``TypeError`` with a message saying what to
change where Lightning raises ``MisconfigurationException`` (docs/porting.md); this
class is here for code that raises or catches it itself.
"""

from __future__ import annotations

__all__ = ["MisconfigurationException"]


class MisconfigurationException(Exception):
    """A setting that cannot work, raised by code ported from Lightning."""

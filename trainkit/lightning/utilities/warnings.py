"""Lightning's ``lightning.pytorch.utilities.warnings`` names.

trainkit's own warnings are ``UserWarning``s; a filter on ``PossibleUserWarning``
therefore leaves them shown (docs/porting.md).
"""

from __future__ import annotations

__all__ = ["PossibleUserWarning"]


class PossibleUserWarning(UserWarning):
    """A warning about something that may or may not be intended."""

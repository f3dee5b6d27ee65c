"""Lightning's ``lightning.pytorch.utilities.warnings`` names.

trainkit's own warnings are ``UserWarning``s; a filter on ``PossibleUserWarning``
therefore leaves them shown (docs/porting.md).
"""

from __future__ import annotations

import warnings

__all__ = ["PossibleUserWarning", "disable_possible_user_warnings"]


class PossibleUserWarning(UserWarning):
    """A warning about something that may or may not be intended."""


def disable_possible_user_warnings(module: str = "") -> None:
    """Ignore ``PossibleUserWarning``s (from ``module``, a regular expression; "": any).

    trainkit itself raises none (its warnings are ``UserWarning``s that name a
    problem and are shown), so this silences only such warnings from other code.

    Args:
        module: which modules' warnings, as for :func:`warnings.filterwarnings`.
    """
    warnings.filterwarnings("ignore", category=PossibleUserWarning, module=module)

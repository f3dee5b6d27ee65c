"""Lightning's ``lightning.pytorch.callbacks.progress.tqdm_progress`` names, served by trainkit.

``Tqdm`` is for progress bars that override ``init_train_tqdm()`` and its siblings
and build their bars themselves, as Lightning's documentation shows.
"""

from __future__ import annotations

import math

from tqdm.auto import tqdm

from trainkit.callbacks import TQDMProgressBar

__all__ = ["TQDMProgressBar", "Tqdm", "convert_inf"]

# The width a decimal number (or a number given as a string) is padded to with
# zeros, so that the bar's text does not jump as the digits change.
_WIDTH = 5


class Tqdm(tqdm):  # type: ignore[misc]
    """A tqdm bar whose decimal numbers keep one width: ``0.5`` shows as ``0.500``.

    Integers show as they are; numbers tqdm writes in scientific notation too.

    Example:
        >>> [Tqdm.format_num(value) for value in (0.5, 1.0, 12, "2", 1e-8)]
        ['0.500', '1.000', '12', '2.000', '1e-8']
    """

    @staticmethod
    def format_num(n: float | str) -> str:
        """``n`` as the bar writes it.

        Args:
            n: a number, or a number already written as a string.
        """
        text = n if isinstance(n, str) else tqdm.format_num(n)
        if not isinstance(n, (float, str)) or "e" in text:
            return str(text)
        if "." not in text and len(text) < _WIDTH:
            try:
                float(text)
            except ValueError:
                return text  # not a number: shown as it is
            text += "."
        return text.ljust(_WIDTH, "0")


def convert_inf(x: float | None) -> float | None:
    """``x``, or None where tqdm cannot show it (an infinite or NaN count, or none).

    Args:
        x: a count or total.

    Example:
        >>> convert_inf(float("inf")) is None, convert_inf(3)
        (True, 3)
    """
    if x is None or math.isinf(x) or math.isnan(x):
        return None
    return x

"""Lightning's ``lightning.pytorch.utilities.enums`` names."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

__all__ = ["GradClipAlgorithmType", "LightningEnum"]


class LightningEnum(str, Enum):
    """A string enum that equals its value in any case (``X.NORM == "Norm"``).

    Example:
        >>> class Kind(LightningEnum):
        ...     A = "alpha"
        >>> Kind.A == "ALPHA", Kind.from_str("a"), Kind.from_str("alpha", source="value")
        (True, <Kind.A: 'alpha'>, <Kind.A: 'alpha'>)
    """

    @classmethod
    def from_str(cls, value: str, source: Literal["key", "value", "any"] = "key") -> Any:
        """The member whose name (``source="key"``), value, or either matches ``value``.

        Raises:
            ValueError: none matches; the message lists what would.
        """
        if source in ("key", "any"):
            for name in cls.__members__:
                if name.lower() == value.lower():
                    return cls[name]
        if source in ("value", "any"):
            for member in cls:
                if member.value.lower() == value.lower():
                    return member
        allowed = [*cls.__members__] if source != "value" else []
        allowed += [member.value for member in cls] if source != "key" else []
        raise ValueError(f"{value!r} is not a {cls.__name__}: expected one of {allowed}.")

    def __eq__(self, other: object) -> bool:
        other = other.value if isinstance(other, Enum) else other
        return isinstance(other, str) and self.value.lower() == other.lower()

    def __hash__(self) -> int:
        return hash(self.value.lower())


class GradClipAlgorithmType(LightningEnum):
    """``gradient_clip_algorithm``: by the gradients' total norm, or each value."""

    VALUE = "value"
    NORM = "norm"

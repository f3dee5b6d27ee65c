"""The error for a Lightning name that trainkit does not provide."""

from __future__ import annotations


def missing(module: str, name: str, known: list[str]) -> AttributeError:
    """An AttributeError naming what is missing and where the differences are listed.

    Args:
        module: the porting module asked (e.g. "trainkit.lightning.callbacks").
        name: the name asked for.
        known: the names the module has.
    """
    return AttributeError(
        f"{module} has no {name!r}: trainkit does not provide Lightning's {name}. "
        f"It has {', '.join(sorted(known))}; docs/porting.md lists what ports and what does not."
    )

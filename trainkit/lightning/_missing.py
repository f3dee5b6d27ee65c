"""The error for a Lightning name that trainkit does not provide, Lightning's submodules
reached as attributes, and the Lightning version the porting packages follow."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

#: The Lightning release whose API ``trainkit.lightning`` follows, its ``__version__``:
#: Lightning projects compare ``pl.__version__`` with a release to choose a code path, and
#: must take the one for this API. trainkit's own version is ``trainkit.__version__``.
LIGHTNING_API_VERSION = "2.6.0"


def missing(module: str, name: str, known: list[str]) -> AttributeError:
    """An AttributeError naming what is missing and where the differences are listed.

    Args:
        module: the porting module asked (e.g. "trainkit.lightning.callbacks").
        name: the name asked for.
        known: the names the module has.
    """
    has = f"It has {', '.join(sorted(known))}; " if known else ""
    return AttributeError(
        f"{module} has no {name!r}: trainkit does not provide Lightning's {name}. "
        f"{has}docs/porting.md lists what ports and what does not."
    )


def submodule_or_missing(package: str, name: str, known: list[str]) -> ModuleType:
    """The submodule ``package.name``, imported now; else :func:`missing`'s error.

    Importing Lightning loads its subpackages, so Lightning code reaches them as
    attributes without importing them (``L.plugins.MixedPrecision``,
    ``L.utilities.model_summary.ModelSummary``); trainkit's porting packages load
    theirs when first reached so.

    Args:
        package: the porting package asked (its ``__name__``).
        name: the attribute asked for.
        known: the names the package has.

    Raises:
        AttributeError: ``package`` has no submodule ``name`` (see :func:`missing`), or
            importing it failed for want of an extra (the import error says which).
    """
    if not name.startswith("__"):
        try:
            found = importlib.util.find_spec(f"{package}.{name}") is not None
        except (ImportError, ValueError):
            found = False
        if found:
            try:
                return importlib.import_module(f"{package}.{name}")
            except ImportError as error:  # an extra it needs is not installed
                # An AttributeError still (hasattr() probes catch no other), saying why.
                raise AttributeError(f"{package}.{name} cannot be loaded: {error}") from error
    raise missing(package, name, known)

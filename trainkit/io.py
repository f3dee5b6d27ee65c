"""``trainkit.io``, kept for the import paths the docs show.

Its home is :mod:`trainkit.utilities.io`."""

from trainkit.utilities.io import atomic_write

__all__ = ["atomic_write"]

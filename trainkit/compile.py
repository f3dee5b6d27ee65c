"""``trainkit.compile``, kept for the import paths the docs show.

Its home is :mod:`trainkit.utilities.compile`."""

from trainkit.utilities.compile import CompileError

__all__ = ["CompileError"]

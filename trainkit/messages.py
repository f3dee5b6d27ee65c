"""``trainkit.messages``, kept for the import paths the docs show.

Its home is :mod:`trainkit.utilities.messages`."""

from trainkit.utilities.messages import UsageError, did_you_mean

__all__ = ["UsageError", "did_you_mean"]

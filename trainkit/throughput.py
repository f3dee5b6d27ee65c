"""``trainkit.throughput``, kept for the import paths the docs show.

Its home is :mod:`trainkit.utilities.throughput`."""

from trainkit.utilities.throughput import Throughput, get_available_flops, measure_flops

__all__ = ["Throughput", "get_available_flops", "measure_flops"]

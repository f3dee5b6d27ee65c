"""The probes are programs run in their own processes, not modules to import (doctests)."""

collect_ignore_glob = ["p_*.py"]

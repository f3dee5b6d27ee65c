"""Side-by-side probes: the same Lightning code run under Lightning and under trainkit.lightning.

Each ``p_*.py`` module is a small Lightning program. Run as
``python -m tests.compat.parity.p_<name> lightning|trainkit <folder>``, it imports
``lightning.pytorch`` or ``trainkit.lightning`` as ``L``, works in ``<folder>``,
and prints what it observed as one JSON line. ``test_parity.py`` runs the trainkit
side everywhere and, where Lightning is installed, the Lightning side too, and
compares the two; the differences it allows are the deliberate ones, each named
with the row of docs/porting.md that explains it.
"""

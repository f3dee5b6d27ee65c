"""What the loggers ported to Lightning's default folder share, for the ported Trainer's CLI.

trainkit's CSV and TensorBoard loggers and their ported subclasses (which write to
``lightning_logs``) have the same class names, so a config naming ``CSVLogger`` for
a Trainer's ``logger`` matched both. The ported ones also derive from
:class:`_LightningLogs`, which the ported Trainer's signature lists first among the
``logger`` types: a short name resolves to the ported class, as ``lightning.pytorch``
has one. The module is private, so the class itself is never offered as a choice.
"""

from __future__ import annotations

from trainkit.loggers.base import Logger


class _LightningLogs(Logger):
    """A logger that writes to Lightning's default folder, ``lightning_logs``."""

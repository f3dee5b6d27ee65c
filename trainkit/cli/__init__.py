"""Configs and the command line: one config engine, two entry points.

``LightningCLI`` (``lightning_cli.py``, ``lightning_parser.py``, ``optimizers.py``) runs a
Lightning project's ``main.py`` on jsonargparse. The ``trainkit`` command (``main.py``: the
command line and the run; ``args.py``: LightningCLI's argument forms) reads its configs
with ``engine.py``, a LightningCLI subclass, then checks what the Trainer would refuse
(``checks.py``); ``config.py`` holds the list-entry overrides jsonargparse has no form
for. Importing this package does not import jsonargparse.
"""

from trainkit.cli.lightning_cli import LightningCLI, SaveConfigCallback
from trainkit.cli.main import main

__all__ = ["LightningCLI", "SaveConfigCallback", "main"]

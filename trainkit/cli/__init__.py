"""The ``trainkit`` command: ``main.py`` (argument parsing and the run), ``args.py``
(LightningCLI's argument forms), ``checks.py`` (what is checked before anything is
built) and ``config.py`` (YAML -> checked dataclasses -> objects).

``LightningCLI`` (``lightning_cli.py``, ``lightning_parser.py``, ``optimizers.py``) runs a
Lightning project's ``main.py`` on jsonargparse, the extra ``trainkit[cli]``; importing it
does not import jsonargparse.
"""

from trainkit.cli.lightning_cli import LightningCLI, SaveConfigCallback
from trainkit.cli.main import main

__all__ = ["LightningCLI", "SaveConfigCallback", "main"]

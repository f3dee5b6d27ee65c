"""The ``trainkit`` command: ``main.py`` (argument parsing and the run), ``args.py``
(LightningCLI's argument forms), ``checks.py`` (what is checked before anything is
built) and ``config.py`` (YAML -> checked dataclasses -> objects)."""

from trainkit.cli.main import main

__all__ = ["main"]

"""DummyLogger: what a fast dev run logs to (nothing), keeping the user's logger calls working.

As Lightning does, ``Trainer(fast_dev_run=...)`` with loggers replaces them with
one DummyLogger: ``trainer.logger.experiment.add_image(...)`` and other calls a
Module makes on its logger still work, and no file is written.
"""

from __future__ import annotations

from typing import Any

from trainkit.loggers.base import Logger


class DummyExperiment:
    """An experiment that accepts any call, attribute or index and does nothing.

    Example:
        >>> experiment = DummyExperiment()
        >>> experiment.add_scalar("loss", 0.5, 3) is None, experiment[0] is experiment
        (True, True)
    """

    def nop(self, *args: Any, **kwargs: Any) -> None:
        """Do nothing (what every method of the experiment is)."""

    def __getattr__(self, name: str) -> Any:
        return self.nop

    def __getitem__(self, index: Any) -> DummyExperiment:
        return self  # logger.experiment[0].add_image(...) works too

    def __setitem__(self, index: Any, value: Any) -> None:
        pass


class DummyLogger(Logger):
    """A logger that writes nothing; its ``experiment`` accepts any call.

    Example:
        >>> logger = DummyLogger()
        >>> logger.log_metrics({"loss": 0.5}, step=1)
        >>> logger.experiment.add_histogram("weights", [1, 2])
        >>> logger.name, logger.version, logger.save_dir, logger.log_dir
        ('', '', None, None)
    """

    def __init__(self) -> None:
        self._experiment = DummyExperiment()

    @property
    def experiment(self) -> DummyExperiment:
        """An object whose every method does nothing."""
        return self._experiment

    @property
    def name(self) -> str:
        return ""

    @property
    def version(self) -> str:
        return ""

    def log_metrics(self, *args: Any, **kwargs: Any) -> None:
        """Nothing (any arguments, as every method of this logger)."""

    def log_hyperparams(self, *args: Any, **kwargs: Any) -> None:
        """Nothing (any arguments, as every method of this logger)."""

    def __getitem__(self, index: int) -> DummyLogger:
        return self  # trainer.logger[0] in code written for a list of loggers

    def __getattr__(self, name: str) -> Any:
        # Methods of another logger class that a Module calls (log_image, ...).
        if name.startswith("_"):
            raise AttributeError(name)
        return self._experiment.nop

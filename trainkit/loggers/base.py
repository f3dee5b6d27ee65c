"""The Logger interface: where scalar metrics and hyperparameters are written.

The Trainer calls loggers from global rank 0 only; a logger never needs to ask
which rank it is on. Values arrive as plain Python floats: the Trainer reads
device tensors once, when a logger is due to write, never per step.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any


class Logger(ABC):
    """Base class for experiment loggers."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The experiment name: the folder under ``save_dir`` that holds the versions."""

    @property
    @abstractmethod
    def version(self) -> int | str:
        """The run's version (``N`` of ``version_N``), assigned on first use."""

    @property
    @abstractmethod
    def save_dir(self) -> str:
        """The root folder passed by the user."""

    @property
    def log_dir(self) -> str:
        """The folder this run writes to: ``<save_dir>/<name>/version_<version>``."""
        version = self.version
        folder = version if isinstance(version, str) else f"version_{version}"
        return os.path.join(self.save_dir, self.name, folder)

    @abstractmethod
    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Record scalar metrics at a global step.

        Args:
            metrics: metric name to value.
            step: the global step the values belong to.
        """

    @abstractmethod
    def log_hyperparams(self, params: Mapping[str, Any]) -> None:
        """Record the run's hyperparameters.

        Args:
            params: hyperparameter name to value (nested mappings allowed).
        """

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of this logger: its version."""
        return {"version": self.version}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue writing to the saved run (the default logger cannot, and ignores it).

        Args:
            state: what :meth:`state_dict` returned.
        """

    def save(self) -> None:
        """Flush buffered records to disk."""

    def finalize(self, status: str) -> None:
        """Flush and close at the end of a run.

        Args:
            status: "success", "failed" or "interrupted".
        """
        self.save()

"""Lightning's ``lightning.pytorch.loggers.tensorboard``: trainkit's TensorBoard logger
with Lightning's default folder name."""

from __future__ import annotations

import os
from typing import Any

from trainkit.lightning.fabric.utilities.logger import _convert_params
from trainkit.lightning.loggers._folder import _LightningLogs
from trainkit.loggers import tensorboard

__all__ = ["TensorBoardLogger", "_convert_params"]


class TensorBoardLogger(tensorboard.TensorBoardLogger, _LightningLogs):
    """trainkit's :class:`~trainkit.loggers.TensorBoardLogger`, named ``lightning_logs`` by
    default as Lightning's is (``<save_dir>/lightning_logs/version_N``); the arguments are
    the same.

    Example:
        >>> import tempfile
        >>> root = tempfile.mkdtemp()
        >>> TensorBoardLogger(root).log_dir == os.path.join(root, "lightning_logs", "version_0")
        True
    """

    def __init__(
        self,
        save_dir: str | os.PathLike[str],
        name: str | None = "lightning_logs",
        version: int | str | None = None,
        log_graph: bool = False,
        default_hp_metric: bool = True,
        prefix: str = "",
        sub_dir: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            save_dir,
            name=name,
            version=version,
            log_graph=log_graph,
            default_hp_metric=default_hp_metric,
            prefix=prefix,
            sub_dir=sub_dir,
            **kwargs,
        )

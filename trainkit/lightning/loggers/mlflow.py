"""Lightning's ``lightning.pytorch.loggers.mlflow`` names, served by trainkit.

The module also has the parameter helpers Lightning's imports from Fabric
(``_convert_params``, ``_flatten_dict``, ``_add_prefix``): projects import them
from here.
"""

from __future__ import annotations

from trainkit.lightning.fabric.utilities.logger import _add_prefix, _convert_params, _flatten_dict
from trainkit.lightning.loggers import MLFlowLogger

__all__ = ["MLFlowLogger", "_add_prefix", "_convert_params", "_flatten_dict"]

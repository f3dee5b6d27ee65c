"""Lightning's ``lightning.pytorch.core.saving`` names: hyperparameters to and from YAML,
and ``get_filesystem``, which projects import from here."""

from __future__ import annotations

import os
import warnings
from argparse import Namespace
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainkit.checkpoint.weights import load_hparams_file, plain_value
from trainkit.lightning.fabric.utilities.cloud_io import get_filesystem
from trainkit.utilities.io import atomic_write

__all__ = ["get_filesystem", "load_hparams_from_yaml", "save_hparams_to_yaml"]


def save_hparams_to_yaml(
    config_yaml: str | os.PathLike[str],
    hparams: Mapping[str, Any] | Namespace,
    use_omegaconf: bool = True,
) -> None:
    """Write ``hparams`` to the YAML file ``config_yaml`` (complete or not at all).

    Args:
        config_yaml: the file; its folder must exist.
        hparams: a mapping (an ``AttributeDict``, an OmegaConf ``DictConfig``) or a
            ``Namespace``. Values YAML cannot hold are written as their ``repr``.
        use_omegaconf: resolve OmegaConf containers' interpolations before writing.

    Raises:
        FileNotFoundError: the folder does not exist.
    """
    folder = Path(config_yaml).parent
    if not folder.is_dir():
        raise FileNotFoundError(
            f"save_hparams_to_yaml: the folder {folder} does not exist; create it first."
        )
    values: Any = vars(hparams) if isinstance(hparams, Namespace) else hparams
    if use_omegaconf:
        values = _resolved(values)
    import yaml

    with atomic_write(config_yaml) as file:
        yaml.safe_dump(plain_value(dict(values)), file, sort_keys=False)


def load_hparams_from_yaml(
    config_yaml: str | os.PathLike[str], use_omegaconf: bool = True
) -> dict[str, Any]:
    """The hyperparameters in the YAML file ``config_yaml``.

    Args:
        config_yaml: a ``.yaml``/``.yml`` file holding a mapping.
        use_omegaconf: return an OmegaConf ``DictConfig`` (where omegaconf can hold the
            values), as Lightning does.

    Returns:
        The mapping; empty, with a warning, if the file does not exist.
    """
    if not Path(config_yaml).exists():
        warnings.warn(
            f"load_hparams_from_yaml: {config_yaml} does not exist; no hyperparameters "
            "were read from it.",
            RuntimeWarning,
            stacklevel=2,
        )
        return {}
    loaded = load_hparams_file(config_yaml)
    if use_omegaconf:
        from omegaconf import OmegaConf
        from omegaconf.errors import UnsupportedValueType, ValidationError

        try:
            return OmegaConf.create(loaded)  # type: ignore[return-value]
        except (UnsupportedValueType, ValidationError):
            pass
    return loaded


def _resolved(value: Any) -> Any:
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    if isinstance(value, Mapping):
        return {key: _resolved(item) for key, item in value.items()}
    return value

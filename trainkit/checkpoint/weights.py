"""Weights and hyperparameters from a checkpoint: which file ``ckpt_path`` names, the
module's weights (``Module.load_from_checkpoint``), and the saved ``__init__`` arguments."""

from __future__ import annotations

import glob
import inspect
import numbers
import os
import pickle
import warnings
from argparse import Namespace
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from trainkit.checkpoint import sharded
from trainkit.checkpoint.files import (
    CHECKPOINT_HYPER_PARAMS_KEY,
    CHECKPOINT_HYPER_PARAMS_NAME,
    CHECKPOINT_HYPER_PARAMS_TYPE,
    FORMAT,
    OBJECT_HYPER_PARAMS_KEY,
    CheckpointError,
    RefusedObjectsError,
    clip_keys,
    is_plain,
)
from trainkit.checkpoint.stand_ins import holds_stand_in, plain_entries
from trainkit.utilities.rank_zero import rank_zero_print

if TYPE_CHECKING:
    from trainkit.core.data import DataModule


def resolve_path(
    ckpt_path: str | os.PathLike[str] | None, last_paths: list[Path], warn: Callable[[str], None]
) -> Path | str | None:
    """The checkpoint file ``ckpt_path`` names; ``"last"`` is the newest of ``last_paths``.

    For ``"last"`` the file picked is printed (rank 0), so a log shows which
    run a job resumed.

    Args:
        ckpt_path: a path, a URL (returned as it is), ``"last"``, or None (no checkpoint).
        last_paths: where ``last.ckpt`` may be (each ModelCheckpoint's newest run's).
        warn: prints a warning (rank 0): ``"last"`` with no such file starts fresh.
    """
    if ckpt_path is None:
        return None
    if isinstance(ckpt_path, str) and "://" in ckpt_path:
        return ckpt_path  # a URL: load() reads it (a Path would lose a slash)
    if os.fspath(ckpt_path) != "last":
        return Path(ckpt_path)
    sharded.settle()
    candidates = [path for path in last_paths if sharded.exists(path)]
    what = ""
    if not candidates:
        # No last.ckpt (ModelCheckpoint(save_last=None), Lightning's default):
        # the newest checkpoint file of those folders, said below.
        folders = {str(path.parent) for path in last_paths}
        candidates = [
            Path(name)
            for folder in folders
            for name in glob.glob(os.path.join(folder, "*.ckpt"))
            if sharded.exists(name)
        ]
        what = " (the newest checkpoint there: no last.ckpt was kept)"
    if not candidates:
        warn(  # Lightning's words first
            'ckpt_path="last" is set, but there is no last checkpoint available (no last.ckpt '
            f"nor any other checkpoint in {sorted(str(p.parent) for p in last_paths)}). No "
            "checkpoint will be loaded: fit starts from scratch, and validate, test and predict "
            "use the model as it is. HINT: Set `ModelCheckpoint(..., save_last=True)`."
        )
        return None
    picked = max(candidates, key=sharded.saved_at)
    rank_zero_print(f"trainkit: ckpt_path='last' resumes from {picked}{what}", flush=True)
    return picked


def peek(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The lineage and global step of a checkpoint file, or None if it is not one.

    Reads the file's plain entries only (:func:`plain_entries`): no tensor data, and
    whatever objects the file stores are neither built nor in the way.

    Args:
        path: a file that may be a trainkit checkpoint.
    """
    if sharded.is_folder(path):
        path = Path(path) / sharded.META_FILE
    try:
        checkpoint = plain_entries(path)
    except Exception:  # any unreadable file is simply "not one of ours"
        return None
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        return None
    loop = checkpoint.get("loop", {})
    return {"lineage": checkpoint.get("lineage"), "global_step": loop.get("global_step", 0)}


def weights(checkpoint: Mapping[str, Any], source: str | os.PathLike[str]) -> Any:
    """The checkpoint's ``state_dict`` entry (the model's weights), or a CheckpointError.

    Args:
        checkpoint: a loaded checkpoint.
        source: its file, for the message.
    """
    if not isinstance(checkpoint, Mapping) or "state_dict" not in checkpoint:
        raise CheckpointError(
            f"The checkpoint {os.fspath(source)} has no 'state_dict' entry (the model's "
            "weights): it is not a checkpoint of a whole training run (a bare state dict, or "
            "written by another tool); load a file ModelCheckpoint or Trainer.save_checkpoint "
            "wrote, or load the weights yourself with module.load_state_dict(torch.load(path))."
        )
    return checkpoint["state_dict"]


def load_module_state(
    module: nn.Module, state: Mapping[str, torch.Tensor], source: str, strict: bool = True
) -> None:
    """Load ``state`` into ``module``, or explain every key that does not fit.

    Args:
        module: the model to load into.
        state: a state dict.
        source: where the state came from, for the message (a file name).
        strict: with False, missing and unexpected keys are allowed (a warning
            lists them) and the keys that match are loaded; mis-shaped keys are
            an error either way.

    Raises:
        CheckpointError: listing missing, unexpected and mis-shaped keys.
    """
    own = module.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    mis_shaped = sorted(
        f"{key}: checkpoint {tuple(state[key].shape)}, model {tuple(own[key].shape)}"
        for key in set(own) & set(state)
        if isinstance(state[key], torch.Tensor) and state[key].shape != own[key].shape
    )
    if mis_shaped or (strict and (missing or unexpected)):
        lines = [f"The checkpoint {source} does not fit {type(module).__name__}:"]
        for title, keys in (
            ("missing", missing),
            ("unexpected", unexpected),
            ("mis-shaped", mis_shaped),
        ):
            if keys:
                lines.append(f"  {title} keys ({len(keys)}): {', '.join(clip_keys(keys))}")
        lines.append(
            "Build the model with the same architecture and hyperparameters as the run that "
            "saved it (Module.load_from_checkpoint does this from the saved hparams)."
        )
        raise CheckpointError("\n".join(lines))
    for title, keys in (("missing from", missing), ("not in the model but in", unexpected)):
        if keys:
            warnings.warn(
                f"strict=False: keys {title} the checkpoint {source} were skipped: "
                f"{', '.join(clip_keys(keys))}.",
                stacklevel=2,
            )
    module.load_state_dict(state, strict=strict)


def plain_hparams(hparams: Mapping[str, Any]) -> dict[str, Any]:
    """Hyperparameters reduced to what a weights-only checkpoint can hold.

    Numbers, strings, booleans, None and containers of them are kept; anything
    else (a model passed to ``__init__``, a function) becomes its ``repr`` so the
    checkpoint stays loadable without running code.

    Args:
        hparams: the module's hyperparameters.
    """
    return {str(key): plain_value(value) for key, value in hparams.items()}


def plain_value(value: Any) -> Any:
    """``value`` with containers kept and anything but numbers, strings, booleans and
    None replaced by its ``repr`` (what YAML and weights-only checkpoints can hold).

    An enum member becomes its name (as Lightning writes one to YAML); subclasses of
    the plain types and NumPy scalars become the plain type.

    Example:
        >>> import enum
        >>> class Mode(str, enum.Enum):
        ...     FAST = "fast-mode"
        >>> plain_value({"mode": Mode.FAST, "sizes": (64, 32), "f": print})
        {'mode': 'FAST', 'sizes': [64, 32], 'f': '<built-in function print>'}

    Args:
        value: any value.
    """
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, Enum):
        return value.name  # as Lightning writes an Enum to YAML
    if isinstance(value, str):  # a subclass: YAML writes plain strings only
        return str.__str__(value)
    if isinstance(value, numbers.Number) and hasattr(value, "item"):
        return plain_value(value.item())  # a NumPy scalar (np.float64 is a float, too)
    if isinstance(value, int):  # a subclass (bool has none)
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k): plain_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or (
        isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray))
    ):  # an OmegaConf ListConfig is a Sequence too
        return [plain_value(v) for v in value]
    try:
        return repr(value)
    except Exception:  # a repr that cannot run (a module with meta-device tensors, say)
        return f"<{type(value).__module__}.{type(value).__qualname__} object>"


def _omegaconf_kind(value: Any) -> str | None:
    # "DictConfig" or "ListConfig" for an OmegaConf container (omegaconf is optional).
    kind = type(value)
    names = ("DictConfig", "ListConfig")
    return (
        kind.__name__
        if kind.__module__.startswith("omegaconf") and kind.__name__ in names
        else None
    )


def hparams_entries(hparams: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A checkpoint's two hyperparameter entries: the values, and how the objects were kept.

    The first (``hyper_parameters``) holds plain values (:func:`is_plain`) as
    they are (a dict subclass as a dict), and any other value as it is too: pickled with the file,
    as Lightning stores it, so that ``torch.load(path, weights_only=False)`` gives
    the objects back. A safe load reads a stand-in for each (see
    :mod:`trainkit.checkpoint.stand_ins`). The second (``OBJECT_HYPER_PARAMS_KEY``)
    says, by name, how each value that is not plain was kept:

    - ``{"object": <its plain_value>}``: pickled as it is, in the first entry; the
      plain form is what a resume compares the run's value with;
    - ``{"omegaconf": "DictConfig"}`` (or ``"ListConfig"``): an OmegaConf
      container, stored as plain data in the first entry and rebuilt from it by
      any load (no code from the file runs);
    - ``{"pickled": None}``: an object that could not be pickled (a lambda): the
      first entry holds its ``repr``.

    Files an earlier trainkit wrote may hold ``{"pickled": <uint8 tensor>}``: the
    object pickled apart, with its ``repr`` in the first entry.

    Args:
        hparams: the module's (or DataModule's) hyperparameters.
    """
    values: dict[str, Any] = {}
    objects: dict[str, Any] = {}
    for name, value in hparams.items():
        key = str(name)
        kind = _omegaconf_kind(value)
        if kind is not None:
            from omegaconf import OmegaConf  # installed: the value is one of its containers

            values[key] = plain_value(OmegaConf.to_container(value, resolve=True))
            objects[key] = {"omegaconf": kind}
        elif is_plain(value):
            values[key] = _stored_plain(value)
        elif _picklable(value):
            values[key] = value
            objects[key] = {"object": plain_value(value)}
        else:
            values[key] = plain_value(value)
            objects[key] = {"pickled": None}
    return values, objects


def _stored_plain(value: Any) -> Any:
    # A plain value as the checkpoint stores it: as it is (a tuple stays a tuple, as in
    # Lightning's files), but for dict subclasses (an AttributeDict), stored as dicts
    # so that a safe load reads them without stand-ins.
    if isinstance(value, dict):
        return {key: _stored_plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_stored_plain(item) for item in value]
        return items if isinstance(value, list) else tuple(items)
    return value


class _Probe(pickle.Pickler):
    # Pickles into nothing, with plain tensors by reference (torch.save stores their
    # data apart); tensor subclasses are pickled through, as their own code may fail.
    def persistent_id(self, obj: Any) -> Any:
        if type(obj) in _PLAIN_TENSORS or isinstance(obj, torch.UntypedStorage):
            return id(obj)
        return None


_PLAIN_TENSORS = (torch.Tensor, nn.Parameter)


class _Nowhere:
    def write(self, data: bytes) -> int:
        return len(data)


def _picklable(value: Any) -> bool:
    # Whether torch.save can store ``value`` (a lambda or an open file it cannot).
    try:
        _Probe(_Nowhere(), protocol=2).dump(value)
    except Exception:  # whatever pickling raises, the value is kept as its repr
        return False
    return True


def saved_hyperparameters(checkpoint: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """The hyperparameters a checkpoint saved (a dict or an ``argparse.Namespace``), as a dict.

    Args:
        checkpoint: a loaded checkpoint.
        prefix: ``"datamodule_"`` for a DataModule's.
    """
    found = checkpoint.get(prefix + CHECKPOINT_HYPER_PARAMS_KEY) or {}
    return dict(vars(found) if isinstance(found, Namespace) else found)


def saved_hparams_plain(checkpoint: Mapping[str, Any], prefix: str = "") -> Any:
    """A checkpoint's hyperparameters with each object as its plain form, for comparing.

    Args:
        checkpoint: a loaded checkpoint.
        prefix: ``"datamodule_"`` for a DataModule's.
    """
    saved = checkpoint.get(prefix + CHECKPOINT_HYPER_PARAMS_KEY)
    entries = checkpoint.get(prefix + OBJECT_HYPER_PARAMS_KEY) or {}
    if not isinstance(saved, Mapping):
        return saved
    return {
        key: entries[key]["object"] if "object" in entries.get(key, ()) else plain_value(value)
        for key, value in saved.items()
    }


def _saved_objects(
    checkpoint: Mapping[str, Any],
    prefix: str,
    wanted: Callable[[str], bool],
    weights_only: bool,
    path: object,
) -> dict[str, Any]:
    # The hyperparameters that __init__ receives, no override replaces, and the
    # checkpoint's entry does not hold as they were: OmegaConf containers rebuilt from
    # their data; objects a safe load read as stand-ins, or an older trainkit pickled
    # apart, an error saying how to get them (or, trusted, unpickled).
    entries = checkpoint.get(prefix + OBJECT_HYPER_PARAMS_KEY) or {}
    saved = saved_hyperparameters(checkpoint, prefix)
    rebuilt: dict[str, Any] = {}
    pickled: dict[str, torch.Tensor | None] = {}
    for name, entry in entries.items():
        if not wanted(name):
            continue
        if "omegaconf" in entry:
            from omegaconf import OmegaConf  # a DictConfig was saved: it is installed

            rebuilt[name] = OmegaConf.create(saved.get(name))
        elif "pickled" in entry:
            pickled[name] = entry["pickled"]
    unloaded = [name for name, value in saved.items() if wanted(name) and holds_stand_in(value)]
    needed = sorted({*pickled, *unloaded})
    if not needed:
        return rebuilt
    shown = ", ".join(
        f"{name}={entries.get(name, {}).get('object', saved.get(name, '?'))}" for name in needed
    )
    shown = (
        f"hyperparameters {shown} as objects"
        if len(needed) > 1
        else f"hyperparameter {shown} as an object"
    )
    lost = sorted(name for name, data in pickled.items() if data is None)
    if lost:
        raise CheckpointError(
            f"The checkpoint {path} saved the {shown}, and "
            f"{', '.join(lost)} could not be pickled then, so it cannot be rebuilt from the "
            f"file. Pass it yourself: load_from_checkpoint(path, {lost[0]}=...)."
        )
    if weights_only:
        # Also the error torch.load raises for it, which code written for Lightning
        # catches to load again with weights_only=False.
        raise RefusedObjectsError(
            f"The checkpoint {path} saved the {shown}, and "
            "loading with weights_only=True (the default) runs no code from the file, so "
            "they cannot be rebuilt. If you trust the file, pass weights_only=False; or "
            f"pass them yourself: load_from_checkpoint(path, {needed[0]}=...)."
        )
    for name, data in pickled.items():
        assert data is not None  # the lost ones raised above
        rebuilt[name] = pickle.loads(data.numpy().tobytes())  # the caller trusts the file
    return rebuilt


def _as_saved_type(saved: dict[str, Any], checkpoint: Mapping[str, Any], prefix: str) -> Any:
    # The one object save_hyperparameters(obj) was given, as its type: a Namespace, an
    # OmegaConf DictConfig (rebuilt from plain data), or a dict. trainkit records the
    # type's name; Lightning, the class itself (for OmegaConf containers).
    kind = str(checkpoint.get(prefix + CHECKPOINT_HYPER_PARAMS_TYPE) or "").lower()
    if "namespace" in kind:
        return Namespace(**saved)
    if "dictconfig" in kind:
        from omegaconf import OmegaConf  # a DictConfig was saved: it is installed

        return OmegaConf.create(saved)
    return saved


#: Where Lightning versions before 1.0 kept the hyperparameters.
_PAST_HYPER_PARAMS_KEYS = ("hparams", "module_arguments")


def init_arguments(
    init: Callable[..., Any],
    checkpoint: Mapping[str, Any],
    overrides: Mapping[str, Any],
    hparams_file: str | os.PathLike[str] | None = None,
    prefix: str = "",
    weights_only: bool = True,
    path: object = None,
) -> dict[str, Any]:
    """The ``__init__`` arguments that rebuild a Module from ``checkpoint``.

    The saved hyperparameters (or those in ``hparams_file``), updated by
    ``overrides``. When they were saved under one argument's name
    (``hparams_name``, for a Module that takes a single config dict or
    Namespace), they become that argument. Unless ``__init__`` takes
    ``**kwargs``, only the names it accepts are kept. Of the hyperparameters saved
    as objects (:func:`hparams_entries`), OmegaConf containers are rebuilt; the
    others are unpickled with ``weights_only=False``, and with ``weights_only=True``
    are an error unless ``overrides`` replaces them.

    Args:
        init: the class's ``__init__``.
        checkpoint: a loaded checkpoint (trainkit's or Lightning's).
        overrides: keyword arguments that replace saved values.
        hparams_file: a YAML file whose hyperparameters replace the saved ones.
        prefix: ``"datamodule_"`` for a DataModule's hyperparameters (saved under
            ``datamodule_hyper_parameters`` and ``datamodule_hparams_name``).
        weights_only: False unpickles the hyperparameters saved as objects.
        path: the checkpoint, for messages.

    Returns:
        The keyword arguments to call the class with.

    Raises:
        ValueError: ``hparams_file`` is not a ``.yaml``/``.yml`` file.
        CheckpointError: a hyperparameter saved as an object is needed, and
            ``weights_only`` is True (or it could not be pickled when saved).
    """
    saved: dict[str, Any] = {}
    past = () if prefix else _PAST_HYPER_PARAMS_KEYS
    for key in (*past, prefix + CHECKPOINT_HYPER_PARAMS_KEY):
        found = checkpoint.get(key) or {}
        saved.update(vars(found) if isinstance(found, Namespace) else found)
    parameters = list(inspect.signature(init).parameters.values())[1:]  # skip self
    names = [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters)
    name = str(checkpoint.get(prefix + CHECKPOINT_HYPER_PARAMS_NAME) or "")
    whole = name in names  # one argument receives them all
    if whole and name in overrides:
        # That argument given whole: it replaces every saved value (as in Lightning).
        return {k: v for k, v in overrides.items() if takes_any or k in names}
    if hparams_file is not None:
        saved = load_hparams_file(hparams_file)
    else:
        saved.update(
            _saved_objects(
                checkpoint,
                prefix,
                lambda key: key not in overrides and (whole or takes_any or key in names),
                weights_only,
                path,
            )
        )
    saved.update(overrides)
    arguments: dict[str, Any] = dict(saved)
    if whole:
        arguments = {**overrides, name: _as_saved_type(saved, checkpoint, prefix)}
    if not takes_any:
        arguments = {key: value for key, value in arguments.items() if key in names}
    return arguments


def load_hparams_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Hyperparameters from a YAML file (as loggers write ``hparams.yaml``).

    Args:
        path: a ``.yaml`` or ``.yml`` file holding a mapping.

    Returns:
        The mapping.

    Raises:
        ValueError: the file is not YAML or does not hold a mapping.
        FileNotFoundError: there is no such file.
    """
    file = Path(path)
    if file.suffix.lower() not in (".yaml", ".yml"):
        raise ValueError(
            f"hparams_file={str(file)!r}: trainkit reads hyperparameters from .yaml or .yml "
            "files (not .csv); convert the file to YAML, or pass the values as keyword "
            "arguments to load_from_checkpoint."
        )
    if not file.is_file():  # Lightning warns and goes on with the checkpoint's values
        raise FileNotFoundError(
            f"hparams_file {str(file)!r} does not exist, so the hyperparameters meant to "
            "replace the checkpoint's were not read. Pass the hparams.yaml a logger wrote "
            "(in logger.log_dir; none under fast_dev_run), or leave hparams_file out to use "
            "the hyperparameters saved in the checkpoint."
        )
    import yaml  # only here: importing trainkit does not load yaml

    loaded = yaml.safe_load(file.read_text()) or {}
    if not isinstance(loaded, dict):
        raise ValueError(
            f"hparams_file {file} holds a {type(loaded).__name__}, not a mapping of "
            "hyperparameter names to values."
        )
    return {str(key): value for key, value in loaded.items()}


def restore_datamodule(datamodule: DataModule | None, checkpoint: Mapping[str, Any]) -> None:
    """Load ``datamodule``'s saved state, if the checkpoint holds one (as Lightning does
    whenever it loads a checkpoint: in fit, validate, test and predict).

    Args:
        datamodule: the run's DataModule (None: nothing to do).
        checkpoint: a trainkit or Lightning checkpoint.
    """
    if datamodule is None:
        return
    # Lightning's key (the class's name); "datamodule" in files of older trainkit.
    for key in (type(datamodule).__qualname__, "datamodule"):
        if key in checkpoint:
            datamodule.load_state_dict(checkpoint[key])
            return

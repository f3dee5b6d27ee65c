"""Run configurations: YAML (through OmegaConf) -> checked dataclasses -> objects.

A run config has four sections::

    trainer:                 # any Trainer argument (TrainerConfig)
      max_epochs: 3
      callbacks:             # objects are given as class_path + init_args
        - class_path: trainkit.callbacks.ModelCheckpoint
          init_args: {monitor: val/acc, mode: max}
    model:   {class_path: recipes.mnist.model.MNISTClassifier, init_args: {lr: 0.01}}
    data:    {class_path: recipes.mnist.data.MNISTData, init_args: {batch_size: 128}}
    ckpt_path: null          # resume (fit) or load weights (validate/test/predict)

OmegaConf reads the YAML, merges ``key=value`` overrides and resolves
``${...}`` interpolations. The result is then checked against the dataclasses
below, before anything is built: an unknown key names the valid keys and the
closest match, a wrong type names the key, the expected type and the value, and
a ``class_path`` that cannot be imported, or ``init_args`` its class does not
take, say which.

``TrainerConfig`` is generated from ``Trainer.__init__``: its fields are the
Trainer's arguments, with their types and the documentation of the Trainer's
docstring, so the two can never drift apart.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from trainkit.messages import did_you_mean


class ConfigError(ValueError):
    """A configuration is wrong; the message names the key and the fix."""


@dataclass
class ClassSpec:
    """An object to build: ``class_path`` (``package.module.Class``) and its arguments."""

    class_path: str = field(metadata={"doc": "import path of the class, package.module.Class"})
    init_args: dict[str, Any] = field(
        default_factory=dict, metadata={"doc": "keyword arguments for the class"}
    )


# Trainer arguments whose config form differs from the Python one: objects
# become ClassSpecs, a Strategy object becomes its name.
_CONFIG_TYPES: dict[str, Any] = {
    "callbacks": list[ClassSpec],
    "logger": Union[bool, list[ClassSpec]],  # noqa: UP007 (a runtime type object)
    "strategy": str,
    "default_root_dir": Union[str, None],  # noqa: UP007
}


def _trainer_config_class() -> type:
    from trainkit.trainer import Trainer

    hints = typing.get_type_hints(Trainer.__init__)
    docs = trainer_argument_docs()
    fields = []
    for name, parameter in inspect.signature(Trainer.__init__).parameters.items():
        if name == "self":
            continue
        kind = _CONFIG_TYPES.get(name, hints[name])
        default = parameter.default
        spec: Any
        if name == "callbacks":
            spec = field(default_factory=list, metadata={"doc": docs.get(name, "")})
        elif name == "logger":
            spec = field(default=True, metadata={"doc": docs.get(name, "")})
        else:
            spec = field(default=default, metadata={"doc": docs.get(name, "")})
        fields.append((name, kind, spec))
    return dataclasses.make_dataclass(
        "TrainerConfig",
        fields,
        namespace={"__doc__": "The ``trainer`` section: Trainer's arguments."},
    )


def trainer_argument_docs() -> dict[str, str]:
    """The Trainer's ``Args:`` documentation, argument name -> text."""
    from trainkit.trainer import Trainer

    docstring = inspect.getdoc(Trainer) or ""
    section = docstring.split("Args:", 1)[1].split("\n\n", 1)[0] if "Args:" in docstring else ""
    docs: dict[str, str] = {}
    current = None
    for line in section.splitlines():
        match = re.match(r"^    (\w+): (.*)$", line)
        if match:
            current = match.group(1)
            docs[current] = match.group(2).strip()
        elif current and line.strip():
            docs[current] += " " + line.strip()
    return docs


TrainerConfig = _trainer_config_class()


@dataclass
class RunConfig:
    """A whole run: trainer, model, data and an optional checkpoint."""

    model: ClassSpec = field(metadata={"doc": "the Module to train or evaluate"})
    trainer: TrainerConfig = field(  # type: ignore[valid-type]
        default_factory=TrainerConfig, metadata={"doc": "Trainer arguments"}
    )
    data: ClassSpec | None = field(default=None, metadata={"doc": "the DataModule"})
    ckpt_path: str | None = field(
        default=None,
        metadata={"doc": "checkpoint to resume from (fit) or to load weights from; 'last'"},
    )


# ------------------------------------------------------------------- loading
def load_config(path: str | os.PathLike[str], overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML config, apply ``key=value`` overrides, and check everything.

    Args:
        path: the YAML file.
        overrides: dot-list overrides such as ``["trainer.max_epochs=5"]``.

    Raises:
        ConfigError: the file is missing or malformed, or a key, type or class is wrong.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"Config file {file} does not exist.")
    config: Any
    try:
        config = OmegaConf.load(file)
        for item in overrides or []:
            if "=" not in item:
                raise ConfigError(
                    f"Override {item!r} is not of the form key=value (e.g. trainer.max_epochs=5)."
                )
        if overrides:
            config = OmegaConf.merge(config, OmegaConf.from_dotlist(list(overrides)))
        raw = OmegaConf.to_container(config, resolve=True)
    except OmegaConfBaseException as error:
        raise ConfigError(f"Cannot read {file}: {error}") from error
    if not isinstance(raw, dict):
        raise ConfigError(f"{file} must hold a mapping with trainer/model/data keys.")
    return build_dataclass(RunConfig, raw, "")  # type: ignore[no-any-return]


def to_dict(config: Any) -> Any:
    """A config dataclass as plain containers (for YAML and checkpoints).

    Args:
        config: a RunConfig (or any part of it).
    """
    return dataclasses.asdict(config)


def to_yaml(config: RunConfig) -> str:
    """The resolved config, with every default filled in, as YAML.

    Args:
        config: a checked RunConfig.
    """
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.create(to_dict(config)))


# ------------------------------------------------------------------ checking
def build_dataclass(kind: type, raw: Any, path: str) -> Any:
    """Check ``raw`` against dataclass ``kind`` and build it.

    Args:
        kind: the dataclass.
        raw: the value from the YAML.
        path: the dotted key of ``raw`` (for messages).
    """
    where = path or "the config"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a mapping of keys, got {_show(raw)}.")
    known = {f.name: f for f in dataclasses.fields(kind)}
    for key in raw:
        if key not in known:
            hint = did_you_mean(str(key), known)
            raise ConfigError(
                f"Unknown key {_join(path, key)!r}.{hint} Valid keys of {where}: "
                f"{', '.join(sorted(known))}."
            )
    hints = typing.get_type_hints(kind)
    values = {}
    for name, spec in known.items():
        if name in raw:
            values[name] = check_type(raw[name], hints[name], _join(path, name))
        elif spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{_join(path, name)!r} is required ({spec.metadata.get('doc')}).")
    return kind(**values)


def check_type(value: Any, annotation: Any, path: str) -> Any:
    """Return ``value`` (dataclasses built) if it matches ``annotation``, else raise.

    Args:
        value: a value from the config.
        annotation: the expected type.
        path: the dotted key, for the message.
    """
    if annotation is Any:
        return value
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        for option in typing.get_args(annotation):
            try:
                return check_type(value, option, path)
            except ConfigError:
                continue
        raise _type_error(path, annotation, value)
    if annotation is type(None):
        if value is None:
            return None
        raise _type_error(path, annotation, value)
    if dataclasses.is_dataclass(annotation):
        return build_dataclass(annotation, value, path)  # type: ignore[arg-type]
    if origin is list:
        if not isinstance(value, list):
            raise _type_error(path, annotation, value)
        (item,) = typing.get_args(annotation)
        return [check_type(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise _type_error(path, annotation, value)
        key_type, item = typing.get_args(annotation)
        return {
            check_type(k, key_type, path): check_type(v, item, _join(path, str(k)))
            for k, v in value.items()
        }
    checks: dict[Any, Any] = {
        bool: lambda v: isinstance(v, bool),
        int: lambda v: isinstance(v, int) and not isinstance(v, bool),
        float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        str: lambda v: isinstance(v, str),
    }
    if annotation in checks:
        if checks[annotation](value):
            return float(value) if annotation is float and not isinstance(value, int) else value
        raise _type_error(path, annotation, value)
    return value  # a type the config cannot express: let the object's own checks speak


def _type_error(path: str, annotation: Any, value: Any) -> ConfigError:
    return ConfigError(f"{path!r} must be {_type_name(annotation)}, got {_show(value)}.")


def _type_name(annotation: Any) -> str:
    if annotation is type(None):
        return "null"
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is list:
        return f"a list of {_type_name(typing.get_args(annotation)[0])}"
    if origin is dict:
        return "a mapping"
    if dataclasses.is_dataclass(annotation):
        if annotation is ClassSpec:
            return "a mapping with class_path and init_args"
        return f"a mapping ({getattr(annotation, '__name__', annotation)})"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        annotation, getattr(annotation, "__name__", str(annotation))
    )


def _show(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


# ------------------------------------------------------------------ building
def import_class(class_path: str, where: str) -> type:
    """Import ``package.module.Class``, or explain what is missing.

    Args:
        class_path: the dotted path.
        where: the config key it came from.
    """
    module_name, _, class_name = class_path.rpartition(".")
    if not module_name:
        raise ConfigError(
            f"{where}: class_path {class_path!r} must be a full import path, e.g. "
            "recipes.mnist.model.MNISTClassifier."
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(
            f"{where}: cannot import module {module_name!r} for class_path {class_path!r} "
            f"({error}). Check the spelling, and run trainkit from the folder that contains "
            "the package (the working directory is on the import path)."
        ) from error
    found = getattr(module, class_name, None)
    if not isinstance(found, type):
        names = [
            n for n, v in vars(module).items() if isinstance(v, type) and not n.startswith("_")
        ]
        hint = did_you_mean(class_name, names)
        raise ConfigError(f"{where}: module {module_name!r} has no class {class_name!r}.{hint}")
    return found


def check_init_args(spec: ClassSpec, where: str) -> type:
    """Import ``spec``'s class and check that it takes ``init_args`` (nothing is built).

    Args:
        spec: the class and its arguments.
        where: the config key, for messages.
    """
    cls = import_class(spec.class_path, where)
    signature = inspect.signature(cls)
    try:
        signature.bind(**spec.init_args)
    except TypeError as error:
        accepted = [
            n
            for n, p in signature.parameters.items()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        unknown = [k for k in spec.init_args if k not in signature.parameters]
        hint = ""
        if unknown and not any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
            hint = did_you_mean(unknown[0], accepted)
        raise ConfigError(
            f"{where}.init_args do not fit {cls.__name__}{signature}: {error}.{hint}"
        ) from error
    return cls


def instantiate(spec: ClassSpec, where: str) -> Any:
    """Build the object ``spec`` describes.

    Args:
        spec: the class and its arguments.
        where: the config key, for messages.
    """
    return check_init_args(spec, where)(**spec.init_args)

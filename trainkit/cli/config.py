"""Run configurations: YAML (through OmegaConf) -> checked dataclasses -> objects.

A run config has four sections::

    trainer:                 # any Trainer keyword (TrainerConfig)
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

``TrainerConfig`` (the ``trainer`` section) is generated from the option
dataclasses of ``trainkit.trainer.options`` (hardware, loop, step and output options:
their fields' types, defaults and ``doc`` metadata), followed by the Trainer's
three components, ``strategy`` (a name), ``callbacks`` and ``logger`` (class_path
+ init_args entries). The Trainer takes exactly these keywords, and the
``--help`` text is built from the same fields, so the Python API, the config
schema and the command line cannot drift apart. No docstring is parsed.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import os
import sys
import types
import typing
from collections import abc
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Literal, Union

from trainkit.trainer.options import HardwareOptions, LoopOptions, OutputOptions, StepOptions
from trainkit.utilities.messages import UsageError, did_you_mean


class ConfigError(UsageError, ValueError):
    """A configuration is wrong; the message names the key and the fix."""


@dataclass
class ClassSpec:
    """An object to build: ``class_path`` (``package.module.Class``) and its arguments."""

    class_path: str = field(metadata={"doc": "import path of the class, package.module.Class"})
    init_args: dict[str, Any] = field(
        default_factory=dict, metadata={"doc": "keyword arguments for the class"}
    )


#: The option groups of the ``trainer`` section, in order: heading -> options dataclass.
OPTION_GROUPS: dict[str, type] = {
    "hardware options": HardwareOptions,
    "loop options": LoopOptions,
    "step options": StepOptions,
    "output options": OutputOptions,
}

COMPONENTS_HEADING = "components"

# The Trainer's components (objects, not values) as a config spells them:
# name, config type, default, documentation.
_COMPONENTS: tuple[tuple[str, Any, Any, str], ...] = (
    (
        "strategy",
        Union[str, ClassSpec],  # noqa: UP007 (a runtime type object)
        "auto",
        "How the processes and devices share the work: 'auto' (single_device on one "
        "device, ddp on several), 'single_device', 'ddp', 'ddp_spawn', 'dp', 'hybrid' or 'fsdp'; "
        "or a class_path + init_args entry for a strategy with arguments (e.g. "
        "trainkit.strategies.ddp.DDPStrategy with init_method, rank and world_size).",
    ),
    (
        "callbacks",
        list[ClassSpec],
        [],
        "Callbacks, a list of class_path + init_args entries, called in this order after "
        "the Module's own hooks.",
    ),
    (
        "logger",
        Union[bool, list[ClassSpec]],  # noqa: UP007 (a runtime type object)
        True,
        "true for a TensorBoard logger under default_root_dir, false for none, or a list "
        "of class_path + init_args entries.",
    ),
    (
        "profiler",
        Union[str, None],  # noqa: UP007 (a runtime type object)
        None,
        "Time every hook, step and batch fetch, and print the report when the run ends: "
        "'simple', 'advanced' (cProfile) or 'pytorch' (torch.profiler); null: no profiling.",
    ),
)


def trainer_config_class() -> type:
    """Build the ``trainer`` section's dataclass from the option classes and components.

    The fields are every field of the :data:`OPTION_GROUPS` dataclasses (their
    types, defaults and ``doc`` metadata), then the components ``strategy``,
    ``callbacks``, ``logger`` and ``profiler`` in their config form. No docstring is read, so
    editing one never changes the command line.

    Example:
        >>> [f.name for f in dataclasses.fields(trainer_config_class())][-4:]
        ['strategy', 'callbacks', 'logger', 'profiler']
    """
    specs: list[tuple[str, Any, Any]] = []
    for options in OPTION_GROUPS.values():
        hints = typing.get_type_hints(options)
        for option in dataclasses.fields(options):
            doc = option.metadata["doc"]
            specs.append((option.name, hints[option.name], _field(option.default, doc)))
    for name, kind, default, doc in _COMPONENTS:
        specs.append((name, kind, _field(default, doc)))
    return dataclasses.make_dataclass(
        "TrainerConfig",
        specs,
        namespace={"__doc__": "The trainer section: the Trainer's options and components."},
    )


def _field(default: Any, doc: str) -> Any:
    if isinstance(default, (list, dict)):  # a fresh copy for every config
        return field(default_factory=lambda: copy.deepcopy(default), metadata={"doc": doc})
    return field(default=default, metadata={"doc": doc})


def trainer_groups() -> dict[str, list[str]]:
    """The ``trainer`` section's field names by group heading, in schema order.

    Example:
        >>> trainer_groups()["components"]
        ['strategy', 'callbacks', 'logger', 'profiler']
    """
    groups = {
        heading: [option.name for option in dataclasses.fields(options)]
        for heading, options in OPTION_GROUPS.items()
    }
    groups[COMPONENTS_HEADING] = [name for name, *_ in _COMPONENTS]
    return groups


TrainerConfig = trainer_config_class()


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
    test_after_fit: bool = field(
        default=False,
        metadata={
            "doc": "after fit, test the best checkpoint (or the final weights when no "
            "ModelCheckpoint monitors a metric) and print the test metrics"
        },
    )


# ------------------------------------------------------------------- loading
def load_config(
    path: str | os.PathLike[str] | list[str | os.PathLike[str]],
    overrides: list[str] | None = None,
) -> RunConfig:
    """Read a YAML config, apply ``key=value`` overrides, and check everything.

    Several files (LightningCLI's repeated ``--config``) are merged in order:
    mappings key by key, any other value (a list included) replaced whole.
    An override's key is a dotted path; a list entry is reached by its index
    (``trainer.callbacks.0.init_args.monitor``) or, for entries with a
    ``class_path``, by the class name (``trainer.callbacks.ModelCheckpoint``),
    and inside an entry a key other than ``class_path``/``init_args`` is one of
    its ``init_args`` (``trainer.callbacks.ModelCheckpoint.monitor``). The value
    is read as YAML, as OmegaConf reads a dot-list.

    Args:
        path: the YAML file, or several to merge.
        overrides: dot-list overrides such as ``["trainer.max_epochs=5"]``.

    Raises:
        ConfigError: a file is missing or malformed, or a key, type or class is wrong.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    files = [Path(p) for p in (path if isinstance(path, list) else [path])]
    if not files:
        raise ConfigError(
            "No config file given (trainkit fit CONFIG.yaml, or --config CONFIG.yaml)."
        )
    merged: Any = None
    for file in files:
        raw = _read_yaml(file)
        merged = raw if merged is None else _merge(merged, raw)
    if not isinstance(merged, dict):
        raise ConfigError(
            f"{files[-1]} must hold a mapping with trainer/model/data keys, got "
            f"{_show(merged)} (see docs/configuration.md for the layout)."
        )
    for item in overrides or []:
        apply_override(merged, item)
    try:
        resolved = OmegaConf.to_container(OmegaConf.create(merged), resolve=True)
    except OmegaConfBaseException as error:
        reason = str(error).splitlines()[0]
        raise ConfigError(
            f"Cannot resolve the config: {reason} (check the ${{...}} interpolations)."
        ) from error
    return build_dataclass(RunConfig, resolved, "")  # type: ignore[no-any-return]


def _read_yaml(file: Path) -> Any:
    """One config file as plain containers, interpolations left as written."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not file.is_file():
        raise ConfigError(f"Config file {file} does not exist.")
    try:
        config = OmegaConf.load(file)
        return OmegaConf.to_container(config, resolve=False)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(
            f"Cannot read {file}: invalid YAML{where}: {problem} (fix the syntax there; "
            "indent nested keys consistently and quote values that contain ': ' or '#')."
        ) from error
    except (OmegaConfBaseException, UnicodeDecodeError) as error:
        reason = str(error).splitlines()[0]
        raise ConfigError(f"Cannot read {file}: {reason}.") from error


def _merge(base: Any, extra: Any) -> Any:
    # Mappings merge key by key; anything else (lists too) is replaced whole.
    if isinstance(base, dict) and isinstance(extra, dict):
        merged = dict(base)
        for key, value in extra.items():
            merged[key] = _merge(base[key], value) if key in base else value
        return merged
    return extra


def apply_override(config: dict[str, Any], item: str) -> None:
    """Apply one ``key=value`` override to ``config`` (plain containers), in place.

    Args:
        config: the config as read (mappings and lists).
        item: ``dotted.key=value``; see :func:`load_config` for what a key may reach.

    Example:
        >>> run = {"trainer": {"callbacks": [{"class_path": "a.EarlyStopping", "init_args": {}}]}}
        >>> apply_override(run, "trainer.callbacks.EarlyStopping.patience=5")
        >>> run["trainer"]["callbacks"][0]["init_args"]
        {'patience': 5}
    """
    key, sep, text = item.partition("=")
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(
            f"Override {item!r} is not of the form key=value (e.g. trainer.max_epochs=5)."
        )
    value = _parse_value(text, item)
    parts = key.split(".")
    node: Any = config
    path = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if (
            isinstance(node, dict)
            and "class_path" in node
            and part not in ("class_path", "init_args")
        ):
            # The short form: a key inside a class_path entry is one of its init_args.
            if not isinstance(node.get("init_args"), dict):
                node["init_args"] = {}
            node, path = node["init_args"], _join(path, "init_args")
        if isinstance(node, list):
            position = _list_position(node, part, path)
            if last:
                if position == len(node):
                    node.append(value)
                else:
                    node[position] = value
                return
            if position == len(node):
                node.append({})
            if not isinstance(node[position], (dict, list)):
                node[position] = {}
            node, path = node[position], _join(path, position)
            continue
        if not isinstance(node, dict):
            raise ConfigError(
                f"Cannot set {key!r}: {path!r} is {_show(node)}, not a mapping or list "
                f"(set {path} as a whole instead)."
            )
        if last:
            node[part] = value
            return
        if not isinstance(node.get(part), (dict, list)):
            node[part] = {}
        node, path = node[part], _join(path, part)


def _parse_value(text: str, item: str) -> Any:
    # The value as OmegaConf reads a dot-list value (YAML, with its float forms).
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        parsed: Any = OmegaConf.to_container(
            OmegaConf.from_dotlist([f"value={text}"]), resolve=False
        )
        return parsed["value"]
    except Exception as error:  # yaml.YAMLError or OmegaConfBaseException
        if not isinstance(error, OmegaConfBaseException) and "yaml" not in type(error).__module__:
            raise
        reason = str(error).splitlines()[0]
        raise ConfigError(
            f"Override {item!r}: the value is not valid YAML ({reason}); quote it, e.g. "
            f"key='{text}'."
        ) from error


def _list_position(entries: list[Any], part: str, path: str) -> int:
    """The index ``part`` names in ``entries``: a number, or a class name."""
    try:
        position = int(part)
    except ValueError:
        position = -1
    else:
        if position < 0:
            position += len(entries)
        if not 0 <= position <= len(entries):
            raise ConfigError(
                f"{path!r} has {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, so "
                f"index {part} is out of range (use "
                f"0 to {len(entries) - 1}, or {len(entries)} to add an entry)."
            )
        return position
    names = [
        str(entry["class_path"]).rpartition(".")[2]
        for entry in entries
        if isinstance(entry, dict) and "class_path" in entry
    ]
    matches = [
        i
        for i, entry in enumerate(entries)
        if isinstance(entry, dict) and str(entry.get("class_path", "")).rpartition(".")[2] == part
    ]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise ConfigError(
            f"{len(matches)} entries of {path!r} are {part} (indices "
            f"{', '.join(map(str, matches))}); name the one you mean by index, e.g. "
            f"{path}.{matches[0]}."
        )
    hint = did_you_mean(part, names)
    raise ConfigError(
        f"No entry of {path!r} has the class {part!r}.{hint} (entries: "
        f"{', '.join(names) or 'none'}; use a class name from these, or an index)."
    )


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
            key = _join(path, name)
            example = (
                " {class_path: package.module.Class}"
                if spec.type in (ClassSpec, "ClassSpec")
                else " ..."
            )
            raise ConfigError(
                f"{key!r} is required ({spec.metadata.get('doc')}; add {key}:{example} to the "
                "config)."
            )
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
        deeper: list[ConfigError] = []
        for option in typing.get_args(annotation):
            try:
                return check_type(value, option, path)
            except ConfigError as error:
                # A list or mapping of the right kind with one wrong item: name the item.
                if str(error).startswith((f"'{path}[", f"'{path}.")):
                    deeper.append(error)
        if deeper:
            raise deeper[0]
        raise _type_error(path, annotation, value)
    if annotation is type(None):
        if value is None:
            return None
        raise _type_error(path, annotation, value)
    if dataclasses.is_dataclass(annotation):
        return build_dataclass(annotation, value, path)  # type: ignore[arg-type]
    if origin is Literal:
        choices = typing.get_args(annotation)
        if any(value == c and type(value) is type(c) for c in choices):
            return value
        hint = did_you_mean(str(value), [str(c) for c in choices])
        raise ConfigError(f"{path!r} must be {_type_name(annotation)}, got {_show(value)}.{hint}")
    if origin in _SEQUENCES or annotation in _SEQUENCES:
        if not isinstance(value, (list, tuple)):
            raise _type_error(path, annotation, value)
        items = typing.get_args(annotation) or (Any,)
        if origin is tuple and not (len(items) == 2 and items[1] is Ellipsis):
            if len(items) != len(value):
                raise _type_error(path, annotation, value)
            pairs = enumerate(zip(items, value, strict=True))
            return tuple(check_type(v, t, f"{path}[{i}]") for i, (t, v) in pairs)
        checked = [check_type(v, items[0], f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(checked) if origin is tuple else checked
    if origin in _MAPPINGS or annotation in _MAPPINGS:
        if not isinstance(value, dict):
            raise _type_error(path, annotation, value)
        key_type, item = typing.get_args(annotation) or (Any, Any)
        return {
            check_type(k, key_type, path): check_type(v, item, _join(path, str(k)))
            for k, v in value.items()
        }
    if _is_path_type(annotation):
        if isinstance(value, (str, PurePath)):
            return value
        raise _type_error(path, annotation, value)
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


_SEQUENCES = (list, tuple, abc.Sequence, abc.MutableSequence, abc.Iterable, abc.Collection)
_MAPPINGS = (dict, abc.Mapping, abc.MutableMapping)


def _is_path_type(annotation: Any) -> bool:
    # Path, PurePath and os.PathLike[str] take a string from a config.
    kind = typing.get_origin(annotation) or annotation
    return isinstance(kind, type) and (issubclass(kind, PurePath) or kind is os.PathLike)


def _type_error(path: str, annotation: Any, value: Any) -> ConfigError:
    return ConfigError(f"{path!r} must be {_type_name(annotation)}, got {_show(value)}.")


def _type_name(annotation: Any) -> str:
    if annotation is type(None):
        return "null"
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is Literal:
        return "one of " + ", ".join(repr(c) for c in typing.get_args(annotation))
    if origin is tuple and typing.get_args(annotation):
        items = typing.get_args(annotation)
        if len(items) == 2 and items[1] is Ellipsis:
            return f"a list of {_type_name(items[0])}"
        return f"a list of {len(items)} ({', '.join(_type_name(t) for t in items)})"
    if origin in _SEQUENCES or annotation in _SEQUENCES:
        items = typing.get_args(annotation)
        return f"a list of {_type_name(items[0])}" if items else "a list"
    if origin in _MAPPINGS or annotation in _MAPPINGS:
        return "a mapping"
    if _is_path_type(annotation):
        return "a path (a string)"
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
    """Import ``spec``'s class and check ``init_args`` against its signature (nothing is built).

    Every name must be a parameter (or the class takes ``**kwargs``), every
    required parameter must be given, and every value must fit the parameter's
    type hint: ``int``, ``float``, ``bool``, ``str``, ``Optional``/unions,
    ``Literal``, ``list``/``tuple``/``dict`` of those, paths; a hint the config
    cannot express (a tensor, a module) is left to the class.

    Args:
        spec: the class and its arguments.
        where: the config key, for messages.
    """
    cls = import_class(spec.class_path, where)
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return cls  # no signature to check against (a builtin): the class decides
    parameters = signature.parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    accepted = [n for n, p in parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    try:
        signature.bind(**spec.init_args)
    except TypeError as error:
        unknown = [k for k in spec.init_args if k not in parameters]
        hint = did_you_mean(unknown[0], accepted) if unknown and not takes_any else ""
        missing = [
            n
            for n, p in parameters.items()
            if p.default is p.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and n not in spec.init_args
        ]
        fix = (
            f" Set {where}.init_args.{missing[0]}."
            if missing and not unknown
            else f" It takes: {', '.join(accepted) or 'no arguments'}."
        )
        raise ConfigError(
            f"{where}.init_args do not fit {cls.__name__}{signature}: {error}.{hint}{fix}"
        ) from error
    hints = _init_hints(cls)
    for name, value in spec.init_args.items():
        if name not in hints or name not in parameters:
            continue
        try:
            check_type(value, hints[name], f"{where}.init_args.{name}")
        except ConfigError as error:
            default = parameters[name].default
            example = "" if default is inspect.Parameter.empty else f", default {default!r}"
            raise ConfigError(
                f"{str(error).rstrip('.')} ({cls.__name__} declares {name}: "
                f"{_hint_text(hints[name])}{example}; give a value of that type)."
            ) from error
    return cls


def _init_hints(cls: type) -> dict[str, Any]:
    """The type hints of ``cls.__init__``'s parameters; those that cannot be resolved left out."""
    init = cls.__init__  # type: ignore[misc]
    try:
        return typing.get_type_hints(init)
    except Exception:  # a hint naming something imported only under TYPE_CHECKING
        pass
    namespace = vars(sys.modules[init.__module__]) if init.__module__ in sys.modules else {}
    hints: dict[str, Any] = {}
    for name, hint in getattr(init, "__annotations__", {}).items():
        if not isinstance(hint, str):
            hints[name] = hint
            continue
        try:
            hints[name] = eval(hint, dict(namespace))  # what typing.get_type_hints does
        except Exception:
            continue  # unresolvable: the class checks this argument itself
    return hints


def _hint_text(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "")


def with_defaults(spec: ClassSpec, where: str) -> ClassSpec:
    """``spec`` with every constructor default of its class filled into ``init_args``.

    Arguments come in the signature's order; defaults a YAML file cannot hold
    (objects, functions) and private (``_name``) parameters are left out, and
    the class applies them as before.

    Args:
        spec: the class and its arguments.
        where: the config key, for messages.

    Example:
        >>> with_defaults(ClassSpec("zipfile.ZipInfo", {"filename": "a.txt"}), "x").init_args
        {'filename': 'a.txt', 'date_time': [1980, 1, 1, 0, 0, 0]}
    """
    cls = import_class(spec.class_path, where)
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return spec
    args: dict[str, Any] = {}
    for name, parameter in parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if name in spec.init_args:
            args[name] = spec.init_args[name]
        elif (
            parameter.default is not parameter.empty
            and not name.startswith("_")
            and _plain(parameter.default)
        ):
            args[name] = _as_config_value(parameter.default)
    args.update({k: v for k, v in spec.init_args.items() if k not in args})
    return ClassSpec(spec.class_path, args)


def _plain(value: Any) -> bool:
    # Whether YAML can hold the value as it is (tuples become lists).
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _as_config_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_as_config_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_config_value(v) for k, v in value.items()}
    return value


def with_all_defaults(run: RunConfig) -> RunConfig:
    """``run`` with the constructor defaults of every class it names filled in.

    The model, the data, and each callback and logger entry: what
    ``--print-config`` shows and what a run saves as its ``config.yaml``.

    Args:
        run: a checked RunConfig whose classes import.
    """
    trainer: Any = run.trainer
    callbacks = [
        with_defaults(spec, f"trainer.callbacks[{i}]") for i, spec in enumerate(trainer.callbacks)
    ]
    logger = trainer.logger
    if isinstance(logger, list):
        logger = [with_defaults(spec, f"trainer.logger[{i}]") for i, spec in enumerate(logger)]
    return dataclasses.replace(
        run,
        trainer=dataclasses.replace(trainer, callbacks=callbacks, logger=logger),
        model=with_defaults(run.model, "model"),
        data=with_defaults(run.data, "data") if run.data is not None else None,
    )


def instantiate(spec: ClassSpec, where: str) -> Any:
    """Build the object ``spec`` describes.

    Args:
        spec: the class and its arguments.
        where: the config key, for messages.
    """
    return check_init_args(spec, where)(**spec.init_args)

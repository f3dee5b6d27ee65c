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
dataclasses of ``trainkit.options`` (hardware, loop, step and output options:
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
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from trainkit.messages import did_you_mean
from trainkit.options import HardwareOptions, LoopOptions, OutputOptions, StepOptions


class ConfigError(ValueError):
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
        str,
        "auto",
        "How the processes and devices share the work: 'auto' (single_device on one "
        "device, ddp on several), 'single_device', 'ddp', 'ddp_spawn', 'dp' or 'hybrid'.",
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
)


def trainer_config_class() -> type:
    """Build the ``trainer`` section's dataclass from the option classes and components.

    The fields are every field of the :data:`OPTION_GROUPS` dataclasses (their
    types, defaults and ``doc`` metadata), then the components ``strategy``,
    ``callbacks`` and ``logger`` in their config form. No docstring is read, so
    editing one never changes the command line.

    Example:
        >>> [f.name for f in dataclasses.fields(trainer_config_class())][-3:]
        ['strategy', 'callbacks', 'logger']
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
        ['strategy', 'callbacks', 'logger']
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


# ------------------------------------------------------------------ resuming
#: Keys whose change never alters what training computes: where it runs, what it
#: prints, how often it validates. A resume with other values only lists them.
_RESUME_HARMLESS = frozenset(
    {
        "trainer.accelerator",
        "trainer.devices",
        "trainer.num_nodes",
        "trainer.strategy",
        "trainer.process_group_timeout",
        "trainer.benchmark",
        "trainer.detect_anomaly",
        "trainer.inference_mode",
        "trainer.resume_mismatch",
        "trainer.limit_val_batches",
        "trainer.limit_test_batches",
        "trainer.limit_predict_batches",
        "trainer.val_check_interval",
        "trainer.check_val_every_n_epoch",
        "trainer.num_sanity_val_steps",
        "trainer.log_every_n_steps",
        "trainer.default_root_dir",
        "trainer.enable_progress_bar",
        "trainer.enable_model_summary",
        "trainer.enable_checkpointing",
        "trainer.callbacks",
        "trainer.logger",
        "data.init_args.num_workers",
        "data.init_args.pin_memory",
        "data.init_args.persistent_workers",
        "data.init_args.prefetch_factor",
        "data.init_args.data_dir",
    }
)
#: Keys that set how long training runs. Changing them is how a run is trained
#: longer, unless an LR schedule was built for the saved length (then it breaks).
_RESUME_LENGTH = frozenset(
    {
        "trainer.max_epochs",
        "trainer.min_epochs",
        "trainer.max_steps",
        "trainer.min_steps",
        "trainer.max_time",
        "trainer.limit_train_batches",
    }
)


def resume_differences(
    saved: dict[str, Any], current: dict[str, Any], has_schedule: bool
) -> tuple[list[str], list[str]]:
    """How the config stored in a checkpoint differs from the current one.

    Every other key (the model's and data's arguments, precision, accumulation,
    clipping, the seed, ...) changes shapes, the optimization or the step
    counts, so the resumed run would not continue the saved one: it blocks the
    resume. The run's length (``max_epochs``, ``max_steps``, ...) blocks it only
    when the checkpoint holds an LR scheduler, whose schedule was built for the
    saved length; without one, a longer run is what a user resumes for.
    Where and how the run prints, logs and validates never blocks.

    Args:
        saved: the checkpoint's ``config`` entry (what the ``trainkit`` command stored).
        current: this run's config, as plain containers.
        has_schedule: whether the checkpoint holds LR scheduler states.

    Returns:
        The blocking and the other differences, each as ``"key: saved -> current"``.

    Example:
        >>> resume_differences(
        ...     {"trainer": {"max_epochs": 1, "seed": 0}},
        ...     {"trainer": {"max_epochs": 3, "seed": 1}},
        ...     has_schedule=False,
        ... )
        (['trainer.seed: 0 -> 1'], ['trainer.max_epochs: 1 -> 3'])
    """
    blocking: list[str] = []
    other: list[str] = []
    old, new = _flatten(saved), _flatten(current)
    for key in sorted(set(old) | set(new)):
        if key == "ckpt_path":
            continue  # which checkpoint to resume is not part of the run
        missing = "(not set)"
        before, after = old.get(key, missing), new.get(key, missing)
        if before == after:
            continue
        line = f"{key}: {_short(before)} -> {_short(after)}"
        if key in _RESUME_HARMLESS or (key in _RESUME_LENGTH and not has_schedule):
            other.append(line)
        else:
            blocking.append(line)
    return blocking, other


def _flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    # Nested mappings as dotted keys; lists (callbacks, loggers) stay whole values.
    if not isinstance(config, dict):
        return {prefix: config}
    flat: dict[str, Any] = {}
    for key, value in config.items():
        flat.update(_flatten(value, _join(prefix, str(key))))
    return flat


def _short(value: Any, limit: int = 60) -> str:
    text = value if value == "(not set)" else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

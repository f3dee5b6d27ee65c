"""The ``trainkit`` command's config engine: LightningCLI's parser (jsonargparse).

The ``trainkit`` command and :class:`~trainkit.cli.lightning_cli.LightningCLI` read
a config the same way: :class:`TrainkitCLI` is a LightningCLI whose parsers use
``parser_mode="omegaconf+"`` (OmegaConf's ``${...}`` interpolations, resolved once
every file and override is merged, so ``trainer.max_epochs=5`` also changes a key
written as ``${trainer.max_epochs}``). jsonargparse reads and merges the files,
resolves ``class_path``/``init_args``, checks every type and fills in every default.

What jsonargparse has no form for stays here: a ``key=value`` override that
reaches into a list by index or by class name (``trainer.callbacks.0.monitor``,
``trainer.callbacks.ModelCheckpoint.monitor``) is applied to the list as parsed so
far and given back to the parser as the whole list; and jsonargparse's error
messages are turned into the command's one line that names the key and the fix.

The command then checks the values the Trainer would refuse
(``trainkit.cli.checks.check_parsed``) and builds the run with :meth:`TrainkitCLI.build`:
seed first (``trainer.seed``), then the callbacks, loggers and strategy, the Trainer,
the Module and the DataModule, in that order, so a config run repeats the same
Python run.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from trainkit.cli import config as cfg
from trainkit.cli.config import ConfigError, import_object
from trainkit.cli.lightning_cli import LightningCLI
from trainkit.cli.lightning_parser import PARSER_KEY, SUBCOMMAND_PREFIX, UNRECOGNIZED
from trainkit.core.hyperparameters import CLASS_PATH_KEY
from trainkit.trainer.options import trainer_groups
from trainkit.utilities.messages import did_you_mean

if TYPE_CHECKING:
    from jsonargparse import Namespace

    from trainkit.cli.lightning_parser import LightningArgumentParser

#: The parsers' keyword arguments: interpolations resolved after every override, and
#: no abbreviated flags (``trainer.max_epoch=3`` is an unknown key, not max_epochs).
PARSER_KWARGS: dict[str, Any] = {
    "parser_mode": "omegaconf+",
    "exit_on_error": False,
    "allow_abbrev": False,
    "prog": "trainkit",
}

TEST_AFTER_FIT_HELP = (
    "after fit, test the best checkpoint (or the final weights when no ModelCheckpoint "
    "monitors a metric) and print the test metrics"
)

#: ``ckpt_path``'s help for each command, in plain text (the Trainer's docstrings use markup).
CKPT_PATH_HELP = {
    "fit": (
        "resume from this checkpoint, exactly where it was saved; 'last': the newest run's "
        "last.ckpt under trainer.default_root_dir (a fresh start when there is none), so the "
        "same command serves the first start and every restart"
    ),
    "evaluate": (
        "load the weights of this checkpoint first ('last': the newest run's last.ckpt; "
        "null: the Module's weights as built)"
    ),
}

_ENTRY_KEYS = ("class_path", "init_args")

# A key part that can only address a list entry: an index, or a class name.
_LIST_PART = re.compile(r"^-?\d+$|^[A-Z]")


class TrainkitCLI(LightningCLI):
    """LightningCLI as the ``trainkit`` command reads a config.

    The config's top-level keys are the command's: ``trainer`` (``trainer.seed``,
    not LightningCLI's ``seed_everything``), ``model``, ``data``, the subcommand's
    ``ckpt_path``, and ``test_after_fit``; there is no ``--optimizer`` (a Module's
    ``configure_optimizers`` decides). Constructing it parses and checks the config
    and builds nothing: :attr:`run_config` is the parsed config as plain containers,
    every default filled in; :meth:`build` builds the run once the command has
    checked it.

    Args:
        command: fit, validate, test or predict.
        configs: the config files, merged in order.
        overrides: ``key=value`` overrides, applied in order after every file.
        parse: False builds the parsers only (for ``--help``: :meth:`keys_help`).
    """

    def __init__(
        self, command: str, configs: list[str], overrides: list[str], parse: bool = True
    ) -> None:
        self.command = command
        self.configs = list(configs)
        self.overrides = list(overrides)
        self.parse = parse
        self.run_config: dict[str, Any] = {}
        with _interpolations_relative_to_the_subcommand():
            every = {**PARSER_KWARGS, "formatter_class": _help_formatter()}
            super().__init__(
                # The main parser's, and each subcommand's (flat ones reach only the main).
                parser_kwargs={**every, **{name: every for name in self.subcommands()}},
                save_config_callback=None,
                seed_everything_default=False,
                auto_configure_optimizers=False,
                args=[],
            )

    def add_default_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """Add ``test_after_fit`` (the command seeds with ``trainer.seed``).

        Args:
            parser: a subcommand's parser.
        """
        parser.add_argument("--test_after_fit", type=bool, default=False, help=TEST_AFTER_FIT_HELP)

    def parse_arguments(
        self, parser: LightningArgumentParser, args: list[str] | dict[str, Any] | Namespace | None
    ) -> None:
        """Parse the command's files and overrides (``args`` is not used).

        Args:
            parser: the main parser.
            args: ignored; the files and overrides given to the constructor are parsed.
        """
        if not self.parse:  # the parsers only, for --help
            from jsonargparse import Namespace

            self.config = Namespace(subcommand=self.command)  # type: ignore[no-untyped-call]
            return
        for path in self.configs:
            if not Path(path).is_file():  # named as given (jsonargparse names it absolute)
                raise ConfigError(f"Config file {path} does not exist.")
        argv = [self.command, *(f"--config={path}" for path in self.configs)]
        for item in self.overrides:
            argv.extend(self._flags(parser, argv, item))
        config = _parse(parser, argv)
        self.config = config
        subparser = self._subcommand_parsers[self.command]
        self.run_config = _plain(subparser, config[self.command])

    def _flags(self, parser: LightningArgumentParser, argv: list[str], item: str) -> list[str]:
        """``key=value`` as the flags jsonargparse takes; a list entry's as its whole list.

        A list of ``class_path`` entries replaces the list as it was, as the command
        always did: jsonargparse would carry each old entry's ``init_args`` over to
        the new entry at its index where the new class takes them, so the list is
        emptied first.
        """
        key, sep, text = item.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            raise ConfigError(
                f"Override {item!r} is not of the form key=value (e.g. trainer.max_epochs=5)."
            )
        try:  # jsonargparse would take text that is not YAML as a string
            value = yaml.safe_load(text)
        except yaml.YAMLError as error:
            reason = str(error).splitlines()[0]
            raise ConfigError(
                f"Override {item!r}: the value is not valid YAML ({reason}); quote it, e.g. "
                f"key='{text}'."
            ) from error
        parts = key.split(".")
        if not any(_LIST_PART.match(part) for part in parts[1:]):
            return [*_emptied(key, value), f"--{item}"]
        current = _plain(self._subcommand_parsers[self.command], _parse(parser, argv)[self.command])
        found = _list_prefix(current, parts)
        if found is None:
            return [f"--{item}"]  # no list on the way: jsonargparse says what is wrong
        cfg.apply_override(current, item)
        node: Any = current
        for part in found:
            node = node[part]
        whole = ".".join(found)
        return [*_emptied(whole, node), f"--{whole}={json.dumps(node)}"]

    def _parse_ckpt_path(self) -> None:
        """Keep the config's model: the command builds what its config names, and
        ``fit`` refuses to resume a checkpoint saved under a config that changes the run
        (see ``trainkit.cli.main``), where LightningCLI takes the checkpoint's values."""

    def instantiate_classes(self) -> None:
        """Build nothing yet: the command checks the config before it builds anything."""

    def build(self) -> Built:
        """Build the run the config describes: seed, components, Trainer, Module, data.

        Every generator is seeded first (``trainer.seed``), before anything that may
        draw from one is built, and only then: the Trainer is given no seed of its own,
        so the Module is initialised from the same generator state as in a Python run
        that seeds first.

        Returns:
            The Trainer's keyword arguments (components built), the Module and the
            DataModule (None without a data section).
        """
        from trainkit.utilities.seed import seed_everything

        parsed = self.config[self.command]  # typed values (a timedelta, not "0:30:00")
        options = {key: parsed.trainer[key] for key in self.run_config["trainer"]}
        if options.get("seed") is not None:
            seed_everything(options["seed"])
        options["seed"] = None
        for key in ("callbacks", "logger", "strategy", "plugins", "profiler"):
            if key in options:
                options[key] = instantiate(options[key], f"trainer.{key}")
        if options.get("callbacks") is None:
            options["callbacks"] = []
        elif not isinstance(options["callbacks"], list):
            options["callbacks"] = [options["callbacks"]]
        data = parsed.get("data")
        return Built(
            trainer=options,
            model=lambda: instantiate(parsed.model, "model", record=self.run_config["model"]),
            data=(
                (lambda: instantiate(data, "data", record=self.run_config["data"]))
                if data is not None
                else None
            ),
        )

    def _run_subcommand(self, subcommand: str) -> None:
        """Run nothing: ``trainkit.cli.main`` runs the command once the config is checked."""

    def keys_help(self) -> str:
        """The help of every config key of the command: each section's arguments, with
        their type, default and documentation (what ``trainkit COMMAND --help`` ends with)."""
        import argparse

        parser = self._subcommand_parsers[self.command]
        # These parsers are built for this help only: hide what the command's own
        # usage already says (its usage line, --help, --config, --print_config).
        parser.usage, parser.description = argparse.SUPPRESS, None
        for action in parser._actions:
            if action.dest in ("help", "config", "print_config"):
                action.help = argparse.SUPPRESS
            if action.dest == "ckpt_path":
                action.help = CKPT_PATH_HELP.get(self.command, CKPT_PATH_HELP["evaluate"])
        titles = {
            "trainer": "trainer: the Trainer's options and components (trainer.NAME)",
            "model": "model: the Module, class_path + init_args (model.init_args.NAME)",
            "data": "data: the DataModule, class_path + init_args (data.init_args.NAME)",
            "ckpt_path": f"{self.command}: the arguments of Trainer.{self.command}",
            "test_after_fit": "run",
        }
        for group in parser._action_groups:
            keys = {a.dest.split(".")[0] for a in group._group_actions}
            found = [key for key in titles if key in keys]
            if found:
                group.title, group.description = titles[found[0]], None
        return str(parser.format_help()).lstrip("\n")


@dataclasses.dataclass
class Built:
    """What :meth:`TrainkitCLI.build` gives: the Trainer's keywords and the builders
    of the Module and DataModule (called after the Trainer is built)."""

    trainer: dict[str, Any]
    model: Callable[[], Any]
    data: Callable[[], Any] | None


def instantiate(value: Any, where: str, record: dict[str, Any] | None = None) -> Any:
    """``value`` as parsed, with every ``class_path`` entry built, innermost first.

    jsonargparse has checked each class and its ``init_args`` and filled in their
    defaults; what a trainkit class still refuses (a value out of range, a missing
    package) is the config's mistake and becomes a :class:`ConfigError` naming
    ``where``. An exception from a class of the user's own keeps its traceback.

    Args:
        value: a parsed value (a ``class_path`` namespace, a list, or a plain value).
        where: its config key, for messages.
        record: the same entry as plain containers: ``save_hyperparameters()`` in the
            class built records its ``init_args`` (``trainkit.cli.rebuild``).
    """
    from jsonargparse import Namespace

    if isinstance(value, list):
        return [instantiate(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if not isinstance(value, Namespace):
        return value
    if "class_path" not in value:
        return {key: instantiate(item, f"{where}.{key}") for key, item in vars(value).items()}
    cls = import_object(value.class_path)
    given = value.get("init_args")
    init_args = {
        key: instantiate(item, f"{where}.init_args.{key}")
        for key, item in (vars(given) if given is not None else {}).items()
    }
    if record is not None:
        from trainkit.cli.rebuild import build_recording

        # As LightningCLI records a Module the config names by class_path.
        given = {CLASS_PATH_KEY: record["class_path"], **(record.get("init_args") or {})}
        return build_recording(cls, given, lambda: _construct(cls, init_args, where))
    return _construct(cls, init_args, where)


def _construct(cls: Any, init_args: dict[str, Any], where: str) -> Any:
    # What a trainkit class refuses is the config's mistake; a user's class keeps its traceback.
    if not cls.__module__.startswith("trainkit."):
        return cls(**init_args)
    try:
        return cls(**init_args)
    except (ValueError, TypeError, ImportError) as error:
        raise ConfigError(f"{where} ({cls.__name__}): {error}") from error


def _help_formatter() -> type:
    """jsonargparse's help formatter, wrapping lines between words only.

    Option values such as '32-true', 'bf16-mixed' and 'multi-process' stay whole.
    """
    import textwrap

    from jsonargparse import DefaultHelpFormatter

    class HelpFormatter(DefaultHelpFormatter):
        def _split_lines(self, text: str, width: int) -> list[str]:
            words = " ".join(text.split())
            return textwrap.wrap(words, width, break_on_hyphens=False, break_long_words=False)

    return HelpFormatter


def _emptied(key: str, value: Any) -> list[str]:
    # The flag that empties a list before a list of class_path entries replaces it.
    if isinstance(value, list) and any(isinstance(v, dict) and "class_path" in v for v in value):
        return [f"--{key}=null"]
    return []


def _parse(parser: LightningArgumentParser, argv: list[str]) -> Namespace:
    from jsonargparse import ArgumentError

    try:
        return parser.parse_args(argv)
    except ArgumentError as error:
        raise ConfigError(explain(str(error))) from error
    except Exception as error:
        from omegaconf.errors import OmegaConfBaseException

        if isinstance(error, OmegaConfBaseException):
            reason = str(error).splitlines()[0]
            raise ConfigError(
                f"Cannot resolve the config: {reason} (check the ${{...}} interpolations)."
            ) from error
        raise


def _plain(parser: LightningArgumentParser, config: Namespace) -> dict[str, Any]:
    """A subcommand's parsed config as plain containers (what ``--print-config`` prints)."""
    text = parser.dump(config, skip_unset=False, skip_validation=True)
    loaded: dict[str, Any] = yaml.safe_load(text)
    loaded.pop("config", None)
    return loaded


def _list_prefix(config: dict[str, Any], parts: list[str]) -> list[str] | None:
    """The keys of the list ``parts`` reaches into, or None when it reaches no list."""
    node: Any = config
    for index, part in enumerate(parts):
        if isinstance(node, list):
            return parts[:index]
        if isinstance(node, dict) and "class_path" in node and part not in _ENTRY_KEYS:
            node = node.get("init_args") or {}  # the short form: model.lr is model.init_args.lr
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return None


@contextmanager
def _interpolations_relative_to_the_subcommand() -> Iterator[None]:
    """``${trainer.max_epochs}`` in a ``fit`` config means ``fit``'s trainer.

    With subcommands, jsonargparse resolves interpolations in the whole config
    (``fit.trainer.max_epochs``); this setting rewrites a file's absolute paths
    relative to where the file is read, so the recipes' configs mean what they say.
    It is a process-wide setting: it is restored afterwards.
    """
    from jsonargparse import set_parsing_settings
    from jsonargparse._common import get_parsing_setting

    before = get_parsing_setting("omegaconf_absolute_to_relative_paths")
    set_parsing_settings(omegaconf_absolute_to_relative_paths=True)
    try:
        yield
    finally:
        set_parsing_settings(omegaconf_absolute_to_relative_paths=before)


# ------------------------------------------------------------------ messages
_CLASS_PROBLEM = re.compile(
    r"^(?P<indent>\s*)- Problem with given class_path '(?P<path>[^']+)':\s*$"
)
_NOT_ACCEPTED = re.compile(r"Option '(?P<option>[^']+)' is not accepted")
_NO_ATTRIBUTE = re.compile(r"module '(?P<module>[^']+)' has no attribute '(?P<name>[^']+)'")
_NO_MODULE = re.compile(r"No module named '(?P<module>[^']+)'")
_MISSING = re.compile(r"the following arguments are required: (?P<names>.*)")
_NO_IMPORT_PATH = re.compile(r"Expected a dot import path string: (?P<path>.*)")
#: A short class name that more than one imported class has (one of them a subclass).
_AMBIGUOUS = re.compile(
    r"Multiple subclasses with name (?P<name>\w+)\. Give the full class path to avoid "
    r"ambiguity: (?P<paths>[\w., ]+?)\.?$",
    re.M,
)
_SUBTYPES = re.compile(r"^\s*Subtypes: \[(?P<types>.*)\]\s*$", re.M)
_SIMPLE = re.compile(r"Expected a (?P<type>.+?)\. Got value: (?P<value>.*)$", re.M)
_GIVEN = re.compile(r"^\s*Given value: (?P<value>.*)$", re.M)
_MODEL_MISSING = re.compile(r"arguments are required: (?:\w+\.)?model\s*$")
MODEL_REQUIRED = (
    "'model' is required (the Module to train or evaluate; add model: "
    "{class_path: package.module.Class} to the config)."
)
_REQUIRED = re.compile(r'Key "(?P<key>[^"]+)" is required')
_LINE = re.compile(r"line (?P<line>\d+), column (?P<column>\d+)")
_NO_FILE = re.compile(r"File does not exist: '(?P<path>[^']+)'")
_CLASS_PATH_IN_VALUE = re.compile(r"class_path['\"]?\s*[=:]\s*['\"](?P<path>[^'\"]+)")

_TYPE_WORDS = {
    "bool": "a boolean",
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "NoneType": "null",
    "list": "a list",
    "dict": "a mapping",
}


def explain(message: str) -> str:
    """jsonargparse's error as the command's one line: the key, what is wrong, the fix.

    Args:
        message: jsonargparse's message (several lines).

    Example:
        >>> explain('Parser key "fit.trainer.max_epochs": Expected a <class \\'int\\'>. '
        ...         'Got value: many')
        "'trainer.max_epochs' must be an integer, got 'many' (str)."
    """
    text = message.strip()
    if found := UNRECOGNIZED.search(text):
        return _unknown_key(found.group("args").split())
    if found := _NO_FILE.search(text):
        return f"Config file {found.group('path')} does not exist."
    if text.startswith("Problems parsing config"):
        reason = " ".join(text.split(":", 1)[1].split())
        where = _LINE.search(reason)
        at = f" at line {where.group('line')}, column {where.group('column')}" if where else ""
        problem = reason.split(' in "<unicode string>"')[0]
        return (
            f"Cannot read the config: invalid YAML{at}: {problem} (fix the syntax there; indent "
            "nested keys consistently and quote values that contain ': ' or '#')."
        )
    if text.rstrip(":") == "Unexpected config" or _MODEL_MISSING.search(text):
        return MODEL_REQUIRED  # an empty file, or one without a model section
    if text.startswith("Unexpected config"):
        return (
            "A config file must hold a mapping with trainer/model/data keys "
            "(see docs/configuration.md for the layout)."
        )
    if found := _REQUIRED.search(text):
        key = SUBCOMMAND_PREFIX.sub("", found.group("key"))
        example = "{class_path: package.module.Class}"
        return f"{key!r} is required (add {key}: {example} to the config)."
    found = PARSER_KEY.search(text)
    if found is None:
        return " ".join(text.split())
    return _key_problem(SUBCOMMAND_PREFIX.sub("", found.group("key")), found.group("rest"))


def _key_problem(key: str, rest: str) -> str:
    """What is wrong with ``key``: its class (when a class_path was given), or its type."""
    if found := _AMBIGUOUS.search(rest):
        paths = [path.strip() for path in found.group("paths").split(",")]
        return (
            f"{key}: class_path {found.group('name')!r} names more than one imported class "
            f"({', '.join(paths)}); write the full import path of the one you mean, e.g. "
            f"{paths[0]}."
        )
    given = _GIVEN.search(rest)
    given_value = given.group("value") if given else ""
    lines = rest.splitlines()
    for number, line in enumerate(lines):
        found = _CLASS_PROBLEM.match(line)
        if found is None:
            continue
        depth = len(found.group("indent"))
        inner = []
        for following in lines[number + 1 :]:
            if following.strip() and len(following) - len(following.lstrip()) <= depth:
                break
            inner.append(following)
        where = _entry(key, found.group("path"), given_value)
        return _class_problem(where, found.group("path"), _dedent(inner))
    found = _NO_IMPORT_PATH.search(rest)
    if found and ("class_path" in given_value or not _SUBTYPES.search(rest)):
        # Meant as a class (not one of the key's other types): say what a class_path is.
        path = found.group("path").strip()
        if "class_path" in given_value:
            found_path = _CLASS_PATH_IN_VALUE.search(given_value)
            path = found_path.group("path") if found_path else path
        where = _entry(key, path, given_value)
        if "." not in path:
            return (
                f"{where}: class_path {path!r} must be a full import path, e.g. "
                "recipes.mnist.model.MNISTClassifier."
            )
    return _type_problem(key, rest)


def _entry(key: str, class_path: str, given_value: str) -> str:
    # In a list, the entry with that class: trainer.callbacks[0].
    if not given_value.lstrip().startswith("["):
        return key
    paths = [m.group("path") for m in _CLASS_PATH_IN_VALUE.finditer(given_value)]
    return f"{key}[{paths.index(class_path)}]" if class_path in paths else key


def _dedent(lines: list[str]) -> str:
    kept = [line for line in lines if line.strip()]
    depth = min((len(line) - len(line.lstrip()) for line in kept), default=0)
    return "\n".join(line[depth:] for line in kept)


def _class_problem(where: str, class_path: str, rest: str) -> str:
    name = class_path.rpartition(".")[2]
    if found := _NOT_ACCEPTED.search(rest):
        option = found.group("option")
        parameters = _parameters(class_path)
        return (
            f"{where}.init_args do not fit {name}: it takes no argument {option!r}."
            f"{did_you_mean(option, parameters)} It takes: {', '.join(parameters) or 'none'}."
        )
    if found := _MISSING.search(rest):
        missing = found.group("names").split(",")[0].strip()
        return (
            f"{where}.init_args do not fit {name}: missing a required argument: {missing!r}. "
            f"Set {where}.init_args.{missing}."
        )
    if found := _NO_MODULE.search(rest):
        module_path = class_path.rpartition(".")[0]
        return (
            f"{where}: cannot import module {module_path!r} for class_path {class_path!r} "
            f"(no module named {found.group('module')!r}). Check the spelling, and run trainkit "
            "from the folder that contains the package (it is on the import path)."
        )
    if found := _NO_ATTRIBUTE.search(rest):
        module_path, _, class_name = class_path.rpartition(".")
        if module_path != found.group("module"):
            return (
                f"{where}: cannot import module {module_path!r} for class_path {class_path!r}. "
                "Check the spelling, and run trainkit from the folder that contains the package."
            )
        hint = _close_class(module_path, class_name)
        return f"{where}: module {module_path!r} has no class {class_name!r}.{hint}"
    if found := PARSER_KEY.search(rest.strip()):
        argument = found.group("key")
        problem = _type_problem(f"{where}.init_args.{argument}", found.group("rest"))
        return problem.rstrip(".") + _declared(class_path, argument) + "."
    return f"{where}: class_path {class_path!r}: {' '.join(rest.split())}"


def _type_problem(key: str, rest: str) -> str:
    subtypes = _SUBTYPES.search(rest)
    simple = _SIMPLE.search(rest)
    if subtypes:
        words = [_type_word(text) for text in _top_level(subtypes.group("types"))]
        given = _GIVEN.search(rest)
        shown = _shown(given.group("value") if given else "?")
    elif simple:
        words = [_type_word(simple.group("type"))]
        shown = _shown(simple.group("value"))
    else:
        return f"{key!r}: {' '.join(rest.split())}"
    return f"{key!r} must be {' or '.join(dict.fromkeys(words))}, got {shown}."


def _top_level(types: str) -> list[str]:
    """``"<class 'bool'>, dict[str, float]"`` -> its items, split at commas outside brackets."""
    items, depth, start = [], 0, 0
    for index, char in enumerate(types):
        if char in "[<":
            depth += 1
        elif char in "]>":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(types[start:index].strip())
            start = index + 1
    items.append(types[start:].strip())
    return [item for item in items if item]


def _type_word(text: str) -> str:
    """One type as a config's reader says it: a number, one of 'min', 'max', list[int]."""
    if found := re.fullmatch(r"<class '(?P<cls>[^']+)'>", text.strip()):
        name = found.group("cls")
        return _TYPE_WORDS.get(name, name.rpartition(".")[2])
    if found := re.fullmatch(r"(?:typing\.)?Literal\[(?P<lit>.*)\]", text.strip()):
        return f"one of {found.group('lit')}"
    if found := re.fullmatch(r"tuple with (?P<n>\d+) elements", text.strip()):
        return f"a list of {found.group('n')} items"
    # A generic (list[trainkit.loggers.base.Logger]): class names without their modules.
    return re.sub(r"\b(?:\w+\.)+(\w+)", r"\1", text.strip().removeprefix("typing."))


def _shown(raw: str) -> str:
    # The value as the config's YAML reads it, with its type: 'many' (str), 3 (int).
    try:
        value = yaml.safe_load(raw.strip())
    except yaml.YAMLError:
        value = raw.strip()
    return f"{value!r} ({type(value).__name__})"


def _unknown_key(given: list[str]) -> str:
    flag = next((a for a in given if a.startswith("--")), given[0] if given else "")
    parts = flag.lstrip("-").partition("=")[0].split(".")
    sections = {"": ["trainer", "model", "data", "ckpt_path", "test_after_fit"]}
    sections["trainer"] = sorted(name for names in trainer_groups().values() for name in names)
    if parts[0] not in sections[""]:
        key, parent, valid = parts[0], "the config", sections[""]
    elif parts[0] == "trainer" and len(parts) > 1:
        key, parent, valid = f"trainer.{parts[1]}", "trainer", sections["trainer"]
    else:
        return f"Unknown key {'.'.join(parts)!r}."
    hint = did_you_mean(key.rpartition(".")[2], valid)
    return f"Unknown key {key!r}.{hint} Valid keys of {parent}: {', '.join(sorted(valid))}."


def _parameters(class_path: str) -> list[str]:
    try:
        found: Callable[..., Any] = import_object(class_path)
        return [
            p.name
            for p in inspect.signature(found).parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and not p.name.startswith("_")
        ]
    except (ImportError, AttributeError, TypeError, ValueError):
        return []


def _declared(class_path: str, argument: str) -> str:
    """`` (Classifier declares lr: float, default 0.1; give a value of that type)``."""
    name = class_path.rpartition(".")[2]
    try:
        found = import_object(class_path)
        parameter = inspect.signature(found, eval_str=True).parameters[argument]
    except Exception:  # an unresolvable hint, or no such class: say no more
        return ""
    hint = parameter.annotation
    shown = hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")
    default = "" if parameter.default is parameter.empty else f", default {parameter.default!r}"
    return f" ({name} declares {argument}: {shown}{default}; give a value of that type)"


def _close_class(module: str, name: str) -> str:
    try:
        found = importlib.import_module(module)
    except ImportError:
        return ""
    names = [n for n, v in vars(found).items() if isinstance(v, type) and not n.startswith("_")]
    return did_you_mean(name, names)

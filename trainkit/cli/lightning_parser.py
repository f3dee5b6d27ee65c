"""LightningCLI's argument parser: jsonargparse's, plus Lightning's groups for classes,
optimizers and LR schedulers, and its errors condensed to one line.

jsonargparse is a dependency of trainkit. This module still imports without it (so that
``from trainkit.lightning.cli import LightningCLI`` works in an environment that lost it),
and constructing a parser then says what to install.
"""

from __future__ import annotations

import difflib
import inspect
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

import torch
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from trainkit.cli.config import import_object
from trainkit.core.data import DataModule
from trainkit.core.module import Module
from trainkit.trainer.trainer import Trainer

INSTALL_HINT = (
    "LightningCLI and the trainkit command's config engine need jsonargparse, a dependency "
    'of trainkit that is not installed here: pip install "trainkit[cli]" (or reinstall trainkit)'
)

try:
    from jsonargparse import ArgumentParser

    JSONARGPARSE_AVAILABLE = True
except ImportError:  # the class stays definable; constructing it raises INSTALL_HINT
    ArgumentParser = object  # type: ignore[misc,assignment]
    JSONARGPARSE_AVAILABLE = False


def require_jsonargparse() -> None:
    """Raise ModuleNotFoundError saying what to install when jsonargparse is missing."""
    if not JSONARGPARSE_AVAILABLE:
        raise ModuleNotFoundError(INSTALL_HINT)


class ReduceLROnPlateau(torch.optim.lr_scheduler.ReduceLROnPlateau):
    """torch's ReduceLROnPlateau with the metric it watches, as LightningCLI has it.

    ``--lr_scheduler ReduceLROnPlateau --lr_scheduler.monitor val/loss`` makes
    ``configure_optimizers`` return ``{"optimizer": ..., "lr_scheduler": {"scheduler":
    ..., "monitor": "val/loss"}}``.

    Args:
        optimizer: the optimizer whose learning rates are reduced.
        monitor: the logged metric to watch.
        *args: torch's ReduceLROnPlateau arguments.
        **kwargs: torch's ReduceLROnPlateau keyword arguments.
    """

    def __init__(self, optimizer: Optimizer, monitor: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(optimizer, *args, **kwargs)
        self.monitor = monitor


#: The scheduler classes ``--lr_scheduler`` accepts by default (and their subclasses).
LR_SCHEDULER_TYPES: tuple[type, ...] = (LRScheduler, ReduceLROnPlateau)

#: A model argument that builds its optimizer from parameters (Lightning's dependency
#: injection: ``def __init__(self, optimizer: OptimizerCallable = torch.optim.Adam)``).
OptimizerCallable = Callable[[Iterable[Any]], Optimizer]
#: A model argument that builds its LR scheduler from the optimizer.
LRSchedulerCallable = Callable[
    [Optimizer], LRScheduler | torch.optim.lr_scheduler.ReduceLROnPlateau
]

# What the parser keeps per optimizer/scheduler group: (accepted classes, link target).
Registered = dict[str, tuple[type | tuple[type, ...], str]]


class LightningArgumentParser(ArgumentParser):
    """jsonargparse's ArgumentParser with Lightning's argument groups.

    Args:
        *args: jsonargparse.ArgumentParser's arguments.
        description: the text ``--help`` starts with.
        env_prefix: the prefix of environment variables read with ``default_env``.
        default_env: read defaults from environment variables (``PL_TRAINER__MAX_EPOCHS``).
        **kwargs: jsonargparse.ArgumentParser's keyword arguments.
    """

    def __init__(
        self,
        *args: Any,
        description: str = "Lightning Trainer command line tool",
        env_prefix: str = "PL",
        default_env: bool = False,
        **kwargs: Any,
    ) -> None:
        require_jsonargparse()
        super().__init__(
            *args, description=description, env_prefix=env_prefix, default_env=default_env, **kwargs
        )
        self.callback_keys: list[str] = []
        self._optimizers: Registered = {}
        self._lr_schedulers: Registered = {}

    def add_lightning_class_args(
        self,
        lightning_class: type | Callable[..., Any],
        nested_key: str,
        subclass_mode: bool = False,
        required: bool = True,
    ) -> list[str]:
        """Add a Trainer, Module, DataModule or callback's arguments under ``nested_key``.

        A callback added this way (``parser.add_lightning_class_args(ModelCheckpoint,
        "checkpoint")``) is instantiated and appended to the Trainer's callbacks.

        Args:
            lightning_class: the class (or a function returning an instance).
            nested_key: where its arguments go (``--checkpoint.monitor``).
            subclass_mode: accept any subclass, given as ``class_path``/``init_args``.
            required: with ``subclass_mode``, whether a class must be given.

        Returns:
            The keys of the arguments added.
        """
        core = (Trainer, Module, DataModule)
        if isinstance(lightning_class, type) and not issubclass(lightning_class, core):
            # Lightning's rule: what is not a Trainer, Module or DataModule is a callback.
            self.callback_keys.append(nested_key)
        if subclass_mode and isinstance(lightning_class, type):
            added: list[str] = self.add_subclass_arguments(
                lightning_class, nested_key, fail_untyped=False, required=required
            )
            return added
        # The Trainer is built by LightningCLI (it adds callbacks first), not by the parser.
        instantiate = not (
            isinstance(lightning_class, type) and issubclass(lightning_class, Trainer)
        )
        added = self.add_class_arguments(
            lightning_class,
            nested_key,
            fail_untyped=False,
            instantiate=instantiate,
            sub_configs=True,
        )
        if not instantiate:
            self._document_trainer_arguments(nested_key)
        return added

    def _document_trainer_arguments(self, nested_key: str) -> None:
        """Give each ``--trainer.NAME`` the option's own documentation as its help.

        The Trainer documents its keywords on the option fields (``trainer/options.py``)
        in plain text; the help never comes from a docstring, so editing one never
        changes the command line. An argument a Trainer subclass adds keeps its help.
        """
        from trainkit.trainer.options import trainer_docs

        docs = trainer_docs()
        for action in self._actions:
            name = action.dest.removeprefix(f"{nested_key}.")
            if action.dest.startswith(f"{nested_key}.") and name in docs:
                action.help = docs[name]

    def add_optimizer_args(
        self,
        optimizer_class: type[Optimizer] | tuple[type[Optimizer], ...] = (Optimizer,),
        nested_key: str = "optimizer",
        link_to: str = "AUTOMATIC",
    ) -> None:
        """Add an optimizer's arguments: ``--optimizer AdamW --optimizer.lr 1e-3``.

        Args:
            optimizer_class: one class (its arguments directly) or a tuple of base
                classes (any subclass, by name or ``class_path``).
            nested_key: where its arguments go.
            link_to: ``"AUTOMATIC"`` (LightningCLI wires it into ``configure_optimizers``)
                or the key of a model argument it is passed to.
        """
        self._add_optim_group(optimizer_class, nested_key, "params")
        self._optimizers[nested_key] = (optimizer_class, link_to)

    def add_lr_scheduler_args(
        self,
        lr_scheduler_class: type | tuple[type, ...] = LR_SCHEDULER_TYPES,
        nested_key: str = "lr_scheduler",
        link_to: str = "AUTOMATIC",
    ) -> None:
        """Add an LR scheduler's arguments: ``--lr_scheduler StepLR --lr_scheduler.step_size 2``.

        Args:
            lr_scheduler_class: one class or a tuple of base classes, as for optimizers.
            nested_key: where its arguments go.
            link_to: ``"AUTOMATIC"`` or the key of a model argument it is passed to.
        """
        self._add_optim_group(lr_scheduler_class, nested_key, "optimizer")
        self._lr_schedulers[nested_key] = (lr_scheduler_class, link_to)

    def _add_optim_group(self, classes: type | tuple[type, ...], key: str, skip: str) -> None:
        # Not instantiated by the parser: the optimizer needs the model's parameters and
        # the scheduler the optimizer, which exist only after the model is built.
        if isinstance(classes, tuple):
            self.add_subclass_arguments(
                classes, key, fail_untyped=False, required=False, instantiate=False, skip={skip}
            )
        else:
            self.add_class_arguments(
                classes, key, fail_untyped=False, instantiate=False, sub_configs=True, skip={skip}
            )

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        """Print one line naming the problem and its fix, and exit with status 2.

        jsonargparse's message (several lines, with the usage) is condensed; with
        ``exit_on_error=False`` it is raised unchanged.

        Args:
            message: jsonargparse's error message.
            ex: the exception behind it.
        """
        if not self.exit_on_error:
            super().error(message, ex)
        parser = getattr(ex, "subcommand_parser", None) or self
        line = condense_error(message, option_names(parser))
        prog = parser.prog.replace(" [options]", "")
        sys.stderr.write(f"error: {line} (see: {prog} --help)\n")
        sys.exit(2)


def option_names(parser: Any) -> list[str]:
    """The ``--long`` options a parser and its subcommands accept, nested ones included."""
    names: set[str] = set()
    for action in parser._actions:
        names.update(s for s in action.option_strings if s.startswith("--"))
        if isinstance(action.choices, dict):  # the subcommands' parsers
            for subparser in action.choices.values():
                names.update(option_names(subparser))
    return sorted(names)


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _subclass_names(dotted: list[str]) -> set[str]:
    # The short names a class_path may use: the subclasses of the accepted base classes.
    names: set[str] = set()
    for path in dotted:
        try:
            base = import_object(path)
        except (ImportError, AttributeError, ValueError):  # ValueError: a builtin, e.g. "bool"
            continue
        stack = [base]
        while stack:
            cls = stack.pop()
            names.add(cls.__name__)
            stack.extend(cls.__subclasses__())
    return names


def _init_parameters(class_path: str) -> list[str]:
    try:
        cls = import_object(class_path)
        return list(inspect.signature(cls).parameters)
    except (ImportError, AttributeError, TypeError, ValueError):
        return []


# jsonargparse's phrasing, shared with the trainkit command's own error condensing (engine.py).
UNRECOGNIZED = re.compile(r"[Uu]nrecognized arguments: (?P<args>.*)")
PARSER_KEY = re.compile(r'^[Pp]arser key "(?P<key>[^"]+)":\s*(?P<rest>.*)$', re.S)
SUBCOMMAND_PREFIX = re.compile(r"^(fit|validate|test|predict)\.")
_REQUIRED = re.compile(r"arguments are required: (?P<keys>.*)")
_NOT_ACCEPTED = re.compile(r"does not accept option '(?P<key>[^']+)'")
_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<choices>.*)\)")
_OPTION = re.compile(r"Problem with given class_path '(?P<path>[^']+)':\s*Option '(?P<opt>[^']+)'")
_GIVEN = re.compile(r"Given value: (?P<value>.*)$", re.M)
_GOT = re.compile(r"Expected a <class '(?P<type>[^']+)'>\. Got value: (?P<value>.*)$", re.M)
_SUBTYPES = re.compile(r"Subtypes: \[(?P<types>.*)\]")
_TYPE_NAME = re.compile(r"<class '(?P<name>[^']+)'>|(?P<generic>[\w.]+\[[\w.]+\])")


def _type_names(message: str) -> list[str]:
    found = _SUBTYPES.search(message)
    if found is None:
        return []
    names = []
    for match in _TYPE_NAME.finditer(found.group("types")):
        name = match.group("name") or match.group("generic")
        names.append("None" if name == "NoneType" else name)
    return names


_LIGHTNING_PATH = re.compile(r"\b(?:lightning\.pytorch|pytorch_lightning)\.(?P<rest>[\w.]+)")


def _lightning_path_hint(message: str) -> str:
    # A class_path a Lightning config names (lightning.pytorch.callbacks.EarlyStopping):
    # under trainkit, the same name under trainkit.lightning.
    found = _LIGHTNING_PATH.search(message)
    if found is None:
        return ""
    ported = f"trainkit.lightning.{found.group('rest').rstrip('.')}"
    try:
        import_object(ported)
    except (ImportError, AttributeError, ValueError):
        return ""
    return (
        f" ({found.group(0).rstrip('.')!r} is Lightning's class: under trainkit, write "
        f"{ported!r}, the prefix changed as in the imports)"
    )


def condense_error(message: str, options: list[str]) -> str:
    """jsonargparse's multi-line error as one line that names the key and the fix.

    Args:
        message: jsonargparse's error message.
        options: the ``--long`` options accepted, for "did you mean".
    """
    return _condensed(message, options) + _lightning_path_hint(message)


def _condensed(message: str, options: list[str]) -> str:
    if found := UNRECOGNIZED.search(message):
        given = found.group("args").split()
        flag = next((a.split("=", 1)[0] for a in given if a.startswith("-")), "")
        return f"unrecognized arguments: {' '.join(given)}{_suggest(flag, options) if flag else ''}"
    if found := _REQUIRED.search(message):
        keys = [SUBCOMMAND_PREFIX.sub("", k.strip()) for k in found.group("keys").split(",")]
        flags = ", ".join(f"--{k}" for k in keys)
        return f"{flags} is required: give it on the command line or in a --config file"
    if found := _NOT_ACCEPTED.search(message):
        flag = f"--{found.group('key')}"
        return f"{flag} is not an option{_suggest(flag, options)}"
    if found := _CHOICE.search(message):
        choices = re.findall(r"'([^']*)'", found.group("choices"))
        return f"{message.strip()}{_suggest(found.group('given'), choices)}"
    key = PARSER_KEY.search(message.strip())
    if key is None:
        if message.startswith("Problems parsing config"):
            return f"--config: not valid YAML: {_tidy(message.split(':', 1)[1])}"
        return _tidy(message)
    name, rest = key.group("key"), key.group("rest")
    flag = f"--{SUBCOMMAND_PREFIX.sub('', name)}"
    if found := _OPTION.search(rest):
        option = found.group("opt")
        hint = _suggest(option, _init_parameters(found.group("path")))
        return f"{flag}.{option}: {found.group('path')} has no argument {option!r}{hint}"
    given = _GIVEN.search(rest)
    if "dot import path" in rest or "not accessible" in rest:
        value = given.group("value").strip() if given else "?"
        bases = list(dict.fromkeys(t.split("[")[-1].rstrip("]") for t in _type_names(rest)))
        bases = [b for b in bases if "." in b] or bases  # the classes, not bool or None
        hint = _suggest(value.rsplit(".", 1)[-1], _subclass_names(bases))
        return (
            f"{flag}: no class {value!r} among the subclasses of {' or '.join(bases)}: "
            f"give a class name or a full class_path{hint}"
        )
    types = _type_names(rest)
    if types and given:
        return f"{flag}: expected {' or '.join(types)}, got {given.group('value').strip()!r}"
    if found := _GOT.search(rest):
        return f"{flag}: expected {found.group('type')}, got {found.group('value').strip()!r}"
    return f"{flag}: {_tidy(rest)}"


def _tidy(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().rstrip(".")

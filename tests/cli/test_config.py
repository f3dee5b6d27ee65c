"""The config schema: the trainer section is the Trainer's keywords, documented by the
option fields, never by a docstring; a model's init_args are typed by its signature.

The ``trainkit`` command reads every config through its engine
(``trainkit.cli.engine.TrainkitCLI``, LightningCLI's parser): these tests look at
what that parser offers (keys, types, defaults, help) and what it makes of a file.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import os
import re
import typing
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml

import trainkit
from tests.helpers import NONE_FOR_THE_DEFAULT
from trainkit.cli import config as cfg
from trainkit.cli.config import ConfigError
from trainkit.cli.engine import TrainkitCLI
from trainkit.trainer.options import (
    COMPONENT_DOCS,
    HardwareOptions,
    LoopOptions,
    OutputOptions,
    StepOptions,
    trainer_docs,
    trainer_groups,
)

OPTION_CLASSES = (HardwareOptions, LoopOptions, StepOptions, OutputOptions)
COMPONENTS = ["strategy", "callbacks", "logger", "profiler", "plugins"]
PACKAGE = Path(cfg.__file__).parents[1]
ROOT = PACKAGE.parent

# The Trainer's keyword takes more than its option field declares: a timedelta
# (Python only, max_time_seconds reads it) and any path-like folder.
WIDER_THAN_THE_FIELD = {"max_time": timedelta, "default_root_dir": os.PathLike[str]}


@pytest.fixture(autouse=True)
def _at_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # class paths such as tests.helpers import from here


def _parser() -> Any:
    """The ``fit`` parser of the command's engine (built, nothing parsed)."""
    return TrainkitCLI("fit", [], [], parse=False)._subcommand_parsers["fit"]


def _schema(parser: Any = None) -> dict[str, tuple[Any, Any, str | None]]:
    """Everything the command line sees of the trainer section: name -> (type, default, help)."""
    parser = parser or _parser()
    defaults = parser.get_defaults().trainer
    return {
        action.dest.removeprefix("trainer."): (action._typehint, defaults[name], action.help)
        for action in parser._actions
        if action.dest.startswith("trainer.") and not action.dest.endswith(".help")
        for name in [action.dest.removeprefix("trainer.")]
    }


def _shown(default: Any) -> str:
    # A default as the help shows it.
    return "null" if default is None else str(default)


def test_trainer_section_is_the_option_fields_then_the_components() -> None:
    option_fields = [f for options in OPTION_CLASSES for f in dataclasses.fields(options)]
    parser = _parser()
    schema = _schema(parser)
    keys = list(schema)
    assert keys == [f.name for f in option_fields] + COMPONENTS
    trainer_hints = typing.get_type_hints(trainkit.Trainer.__init__)
    assert {name: kind for name, (kind, _, _) in schema.items()} == {
        name: trainer_hints[name] for name in keys
    }  # the engine types each key by the Trainer's keyword
    for options in OPTION_CLASSES:
        hints = typing.get_type_hints(options)
        for f in dataclasses.fields(options):
            kind = hints[f.name]
            if f.name in WIDER_THAN_THE_FIELD:
                kind = typing.Union[kind, WIDER_THAN_THE_FIELD[f.name]]  # noqa: UP007
            if f.name in NONE_FOR_THE_DEFAULT:
                kind = typing.Optional[kind]  # noqa: UP045
            assert schema[f.name] == (kind, f.default, f.metadata["doc"]), f.name
    for name in COMPONENTS:  # every component is documented, by its own doc
        assert schema[name][2] == COMPONENT_DOCS[name]
    assert [schema[name][1] for name in COMPONENTS] == ["auto", None, True, None, None]
    # In --help: each key's documentation, then the engine's type and default.
    text = " ".join(parser.format_help().split())
    for name, (_, default, doc) in schema.items():
        assert doc == trainer_docs()[name]
        pattern = re.escape(" ".join(doc.split())) + r" \(type: [^()]*, default: "
        assert re.search(pattern + re.escape(_shown(default)) + r"[,)]", text), name
    groups = trainer_groups()
    assert [name for names in groups.values() for name in names] == keys
    assert list(groups) == [
        "hardware options",
        "loop options",
        "step options",
        "output options",
        "components",
    ]


def test_trainer_section_is_exactly_the_trainer_keywords() -> None:
    keywords = set(inspect.signature(trainkit.Trainer.__init__).parameters) - {"self"}
    assert set(_schema()) == keywords


def _write(tmp_path: Path, config: dict[str, Any]) -> str:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path)


def test_component_defaults_and_config_forms(tmp_path: Path) -> None:
    path = _write(tmp_path, {"model": {"class_path": "tests.helpers.Classifier"}})
    first, second = TrainkitCLI("fit", [path], []), TrainkitCLI("fit", [path], [])
    trainer = first.run_config["trainer"]
    assert (trainer["strategy"], trainer["callbacks"], trainer["logger"]) == ("auto", None, True)
    callbacks = first.build().trainer["callbacks"], second.build().trainer["callbacks"]
    assert callbacks == ([], [])  # no callbacks: an empty list for the Trainer
    assert callbacks[0] is not callbacks[1]  # no shared default list
    save_dir = str(tmp_path / "logs")
    csv = f"{{class_path: trainkit.loggers.CSVLogger, init_args: {{save_dir: {save_dir}}}}}"
    logger = f"trainer.logger=[{csv}]"
    run = TrainkitCLI("fit", [path], [logger, "trainer.strategy=ddp"]).run_config
    assert run["trainer"]["logger"] == [
        {
            "class_path": "trainkit.loggers.CSVLogger",
            "init_args": {
                "save_dir": save_dir,
                "name": "logs",
                "version": None,
                "prefix": "",
                "flush_logs_every_n_steps": 100,
            },
        }
    ]
    assert run["trainer"]["strategy"] == "ddp"
    # A CSVLogger needs its save_dir: the engine says so at parse time.
    with pytest.raises(ConfigError) as info:
        TrainkitCLI("fit", [path], ["trainer.logger=[{class_path: trainkit.loggers.CSVLogger}]"])
    assert str(info.value) == (
        "trainer.logger[0].init_args do not fit CSVLogger: missing a required argument: "
        "'save_dir'. Set trainer.logger[0].init_args.save_dir."
    )


def test_a_logger_of_the_wrong_type_names_the_types_it_may_be(tmp_path: Path) -> None:
    path = _write(tmp_path, {"model": {"class_path": "tests.helpers.Classifier"}})
    with pytest.raises(ConfigError) as info:
        TrainkitCLI("fit", [path], ["trainer.logger=tensorboard"])
    assert str(info.value) == (
        "'trainer.logger' must be a boolean or Logger or list[Logger] or null, "
        "got 'tensorboard' (str)."
    )


def test_strategy_doc_names_every_registered_strategy() -> None:
    from trainkit.strategies import STRATEGY_NAMES

    doc = _schema()["strategy"][2]
    assert doc == trainer_docs()["strategy"]
    assert doc is not None and all(f"'{name}'" in doc for name in STRATEGY_NAMES)


def test_editing_a_docstring_does_not_change_the_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainkit.trainer.trainer import Trainer

    before = _schema()
    for owner in (Trainer, Trainer.__init__, *OPTION_CLASSES):
        monkeypatch.setattr(owner, "__doc__", "")
    after = _schema()
    assert after == before  # keys, types, defaults and help
    assert {name: doc for name, (_, _, doc) in after.items()} == trainer_docs()


def _trainkit_imports(file: str) -> list[tuple[str, str, str]]:
    """(module, imported name, enclosing function or "") of each trainkit import in ``file``."""
    tree = ast.parse((PACKAGE / file).read_text())
    enclosing = {
        id(node): function.name
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef)
        for node in ast.walk(function)
    }
    type_checking = {
        id(node)
        for block in tree.body
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for node in ast.walk(block)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in type_checking:
            continue
        if isinstance(node, ast.Import):
            names = [(alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        found += [
            (module, name, enclosing.get(id(node), ""))
            for module, name in names
            if module.split(".")[0] == "trainkit"
        ]
    return found


def test_config_and_cli_neither_read_docstrings_nor_import_the_trainer_for_the_schema() -> None:
    for file in ("cli/config.py", "cli/main.py", "cli/engine.py"):
        source = (PACKAGE / file).read_text()
        assert "getdoc" not in source and ".__doc__" not in source, file
    config_modules = {module for module, _, _ in _trainkit_imports("cli/config.py")}
    assert config_modules == {"trainkit.utilities.messages"}
    trainer_imports = [
        (module, name, function)
        for module, name, function in _trainkit_imports("cli/main.py")
        if module in ("trainkit", "trainkit.trainer.trainer") and name in ("", "Trainer", "trainer")
    ]
    assert trainer_imports == [("trainkit.trainer.trainer", "Trainer", "_run")]


class _Typed(trainkit.Module):
    """A Module whose constructor uses the hints a config can express."""

    def __init__(
        self,
        size: int,
        rate: float = 0.1,
        name: str | None = None,
        flag: bool = False,
        mode: Literal["min", "max"] = "min",
        sizes: list[int] | None = None,
        shape: tuple[int, int] = (1, 2),
        root: os.PathLike[str] | str = ".",
        table: dict[str, float] | None = None,
        anything: Any = None,
        _private: int = 0,
    ) -> None:
        super().__init__()


def _typed(tmp_path: Path, init_args: dict[str, Any]) -> dict[str, Any]:
    """The parsed model section of a config whose model is a ``_Typed``."""
    model = {"class_path": f"{__name__}._Typed", "init_args": init_args}
    run = TrainkitCLI("fit", [_write(tmp_path, {"model": model})], []).run_config
    assert run["model"]["class_path"] == f"{__name__}._Typed"
    return run["model"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("init_args", "message"),
    [
        ({"size": True}, "'model.init_args.size' must be an integer, got True (bool)"),
        ({"size": 1, "rate": "fast"}, "'model.init_args.rate' must be a number, got 'fast'"),
        ({"size": 1, "name": 5}, "'model.init_args.name' must be a string or null, got 5 (int)"),
        ({"size": 1, "mode": "maximum"}, "must be one of 'min', 'max', got 'maximum' (str)"),
        (
            {"size": 1, "sizes": [1, "x"]},  # reported for the whole list
            "'model.init_args.sizes' must be list[int] or null, got [1, 'x'] (list)",
        ),
        (
            {"size": 1, "shape": [1, 2, 3]},
            "'model.init_args.shape' must be a list of 2 items, got [1, 2, 3] (list)",
        ),
        (
            {"size": 1, "table": {"a": "b"}},  # reported for the whole mapping
            "'model.init_args.table' must be dict[str, float] or null, got {'a': 'b'} (dict)",
        ),
        ({}, "missing a required argument: 'size'. Set model.init_args.size."),
        ({"size": 1, "sise": 2}, "Did you mean 'size'?"),
    ],
)
def test_init_args_are_checked_against_the_type_hints(
    tmp_path: Path, init_args: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _typed(tmp_path, init_args)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    if "must be" in str(info.value):  # a wrong type: and the hint the class declares
        assert "(_Typed declares " in str(info.value)


@pytest.mark.parametrize(
    ("init_args", "key", "parsed"),
    [
        ({"size": "3"}, "size", 3),  # a string that parses as the type is accepted
        ({"size": 1, "flag": "yes"}, "flag", True),
        ({"size": 1, "root": 3}, "root", "3"),
    ],
)
def test_a_value_that_parses_as_the_hint_is_accepted(
    tmp_path: Path, init_args: dict[str, Any], key: str, parsed: Any
) -> None:
    got = _typed(tmp_path, init_args)["init_args"][key]
    assert got == parsed and type(got) is type(parsed)


def test_init_args_that_fit_the_hints_pass(tmp_path: Path) -> None:
    fits = {
        "size": 3,
        "rate": 1,  # an int is a number
        "name": None,
        "flag": True,
        "mode": "max",
        "sizes": [1, 2],
        "shape": [3, 4],  # YAML has lists, not tuples
        "root": "/data",
        "table": {"a": 1.5},
        "anything": {"class_path": "x"},
    }
    assert _typed(tmp_path, fits)["init_args"] == fits


def test_defaults_yaml_can_hold_are_filled_in_signature_order(tmp_path: Path) -> None:
    init_args = _typed(tmp_path, {"size": 2})["init_args"]
    assert list(init_args.items()) == [
        ("size", 2),
        ("rate", 0.1),
        ("name", None),
        ("flag", False),
        ("mode", "min"),
        ("sizes", None),
        ("shape", [1, 2]),
        ("root", "."),
        ("table", None),
        ("anything", None),
    ]  # and no _private

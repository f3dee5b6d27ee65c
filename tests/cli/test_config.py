"""The config schema: the trainer section comes from the option dataclasses, never a docstring."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import os
import typing
from pathlib import Path
from typing import Any, Literal

import pytest

import trainkit
from trainkit.cli import config as cfg
from trainkit.trainer.options import HardwareOptions, LoopOptions, OutputOptions, StepOptions

OPTION_CLASSES = (HardwareOptions, LoopOptions, StepOptions, OutputOptions)
COMPONENTS = ["strategy", "callbacks", "logger", "profiler"]
PACKAGE = Path(cfg.__file__).parents[1]


def _schema(kind: type) -> list[tuple[str, Any, Any, Any, str]]:
    """Everything the command line sees of a config dataclass: names, types, defaults, docs."""
    hints = typing.get_type_hints(kind)
    return [
        (
            f.name,
            hints[f.name],
            f.default,
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None,
            f.metadata["doc"],
        )
        for f in dataclasses.fields(kind)
    ]


def test_trainer_section_is_the_option_fields_then_the_components() -> None:
    option_fields = [f for options in OPTION_CLASSES for f in dataclasses.fields(options)]
    keys = [f.name for f in dataclasses.fields(cfg.TrainerConfig)]
    assert keys == [f.name for f in option_fields] + COMPONENTS
    schema = {name: rest for name, *rest in _schema(cfg.TrainerConfig)}
    for options in OPTION_CLASSES:
        hints = typing.get_type_hints(options)
        for f in dataclasses.fields(options):
            assert schema[f.name] == [hints[f.name], f.default, None, f.metadata["doc"]]
    assert all(schema[name][3] for name in COMPONENTS)  # every component is documented
    groups = cfg.trainer_groups()
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
    assert {f.name for f in dataclasses.fields(cfg.TrainerConfig)} == keywords


def test_component_defaults_and_config_forms(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("model: {class_path: tests.helpers.Classifier}\n")
    first, second = cfg.load_config(path), cfg.load_config(path)
    assert (first.trainer.strategy, first.trainer.callbacks, first.trainer.logger) == (
        "auto",
        [],
        True,
    )
    assert first.trainer.callbacks is not second.trainer.callbacks  # no shared default list
    logger = "trainer.logger=[{class_path: trainkit.loggers.CSVLogger}]"
    run = cfg.load_config(path, [logger, "trainer.strategy=ddp"])
    assert run.trainer.logger == [cfg.ClassSpec("trainkit.loggers.CSVLogger")]
    with pytest.raises(cfg.ConfigError, match=r"'trainer.logger' must be a boolean or a list"):
        cfg.load_config(path, ["trainer.logger=tensorboard"])


def test_strategy_doc_names_every_registered_strategy() -> None:
    from trainkit.strategies import STRATEGY_NAMES

    doc = {f.name: f.metadata["doc"] for f in dataclasses.fields(cfg.TrainerConfig)}["strategy"]
    assert all(f"'{name}'" in doc for name in STRATEGY_NAMES)


def test_editing_a_docstring_does_not_change_the_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainkit.trainer.trainer import Trainer

    before = _schema(cfg.trainer_config_class())
    for owner in (Trainer, Trainer.__init__, *OPTION_CLASSES):
        monkeypatch.setattr(owner, "__doc__", "")
    assert _schema(cfg.trainer_config_class()) == before == _schema(cfg.TrainerConfig)


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
    for file in ("cli/config.py", "cli/main.py"):
        source = (PACKAGE / file).read_text()
        assert "getdoc" not in source and ".__doc__" not in source, file
    config_modules = {module for module, _, _ in _trainkit_imports("cli/config.py")}
    assert config_modules == {"trainkit.trainer.options", "trainkit.utilities.messages"}
    trainer_imports = [
        (module, name, function)
        for module, name, function in _trainkit_imports("cli/main.py")
        if module in ("trainkit", "trainkit.trainer.trainer") and name in ("", "Trainer", "trainer")
    ]
    assert trainer_imports == [("trainkit.trainer.trainer", "Trainer", "_run")]


class _Typed:
    """A class whose constructor uses the hints a config can express."""

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
        pass


@pytest.mark.parametrize(
    ("init_args", "message"),
    [
        ({"size": "3"}, "'model.init_args.size' must be an integer, got '3' (str)"),
        ({"size": True}, "'model.init_args.size' must be an integer, got True (bool)"),
        ({"size": 1, "rate": "fast"}, "'model.init_args.rate' must be a number, got 'fast'"),
        ({"size": 1, "name": 5}, "'model.init_args.name' must be a string or null, got 5 (int)"),
        ({"size": 1, "flag": "yes"}, "'model.init_args.flag' must be a boolean, got 'yes'"),
        ({"size": 1, "mode": "maximum"}, "must be one of 'min', 'max', got 'maximum' (str)."),
        ({"size": 1, "sizes": [1, "x"]}, "'model.init_args.sizes[1]' must be an integer"),
        ({"size": 1, "shape": [1, 2, 3]}, "'model.init_args.shape' must be a list of 2"),
        ({"size": 1, "root": 3}, "'model.init_args.root' must be a path (a string) or a string"),
        ({"size": 1, "table": {"a": "b"}}, "'model.init_args.table.a' must be a number"),
        ({}, "missing a required argument: 'size'. Set model.init_args.size."),
        ({"size": 1, "sise": 2}, "Did you mean 'size'?"),
    ],
)
def test_init_args_are_checked_against_the_type_hints(
    init_args: dict[str, Any], message: str
) -> None:
    spec = cfg.ClassSpec(f"{__name__}._Typed", init_args)
    with pytest.raises(cfg.ConfigError) as info:
        cfg.check_init_args(spec, "model")
    assert message in str(info.value)
    if "declares" in str(info.value):
        assert "(_Typed declares " in str(info.value)  # and names the hint


def test_init_args_that_fit_the_hints_pass() -> None:
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
    assert cfg.check_init_args(cfg.ClassSpec(f"{__name__}._Typed", fits), "model") is _Typed


def test_defaults_yaml_can_hold_are_filled_in_signature_order() -> None:
    spec = cfg.with_defaults(cfg.ClassSpec(f"{__name__}._Typed", {"size": 2}), "model")
    assert spec.init_args == {
        "size": 2,
        "rate": 0.1,
        "name": None,
        "flag": False,
        "mode": "min",
        "sizes": None,
        "shape": [1, 2],
        "root": ".",
        "table": None,
        "anything": None,
    }  # and no _private

"""Every trainkit import path the documentation and the recipes show keeps working.

The paths are read from the files when the test runs, so a new page or recipe is
covered without touching this test:

- ``from trainkit.X import A, B`` and ``import trainkit.X`` (in Markdown, prose or
  code, and in the recipes' Python files);
- dotted names ``trainkit.X.Y`` in prose and code (``trainkit.Trainer.fit``);
- ``class_path:`` values that name trainkit or a bundled recipe (YAML in the recipes
  and in the pages' code blocks).

Each is imported (the longest importable module, then attributes). A path that
fails only because an optional extra of ``pyproject.toml`` is not installed is
skipped, naming the extra. ``trainkit.lightning.*`` paths are left to
tests/compat/test_import_paths.py, which checks them against Lightning's own.

The source files the pages name (``trainkit/loops/step.py``, ``tests/loops/test_hooks.py``,
``loops/fit.py`` alone in backquotes) must exist, so a move updates the pages.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "recipes").rglob("*.md")]
)
RECIPE_PYTHON = sorted((ROOT / "recipes").rglob("*.py"))
RECIPE_YAML = sorted((ROOT / "recipes").rglob("*.yaml"))

# Words that look like a dotted path and are not one.
NOT_PATHS = {
    "trainkit.ckpt": "the name of a sharded checkpoint's metadata file",
    "trainkit.lightning.X.Y": "porting.md's placeholder for any Lightning module path",
    "trainkit.callbacks_factory": "the name of an entry-point group (callbacks/defaults.py)",
}

DOTTED = re.compile(r"(?<![\w./-])trainkit(?:\.[A-Za-z_]\w*)+")
FROM_IMPORT = re.compile(r"\bfrom\s+(trainkit(?:\.\w+)*)\s+import\s+(\([^)]*\)|[^\n`]+)")
PLAIN_IMPORT = re.compile(r"(?<![\w.])import\s+(trainkit(?:\.\w+)*)")
CLASS_PATH = re.compile(r"class_path:\s*['\"]?((?:trainkit|recipes)(?:\.\w+)+)")


def _names(imported: str) -> list[str]:
    """``A, B as c  # note`` or ``(A,\\n B)`` -> ["A", "B"]."""
    text = imported.strip().strip("()")
    names = []
    for part in text.split(","):
        part = part.split("#")[0].strip().strip("()").strip()
        name = part.split(" as ")[0].strip()
        if name.isidentifier():
            names.append(name)
    return names


def paths_in_text(text: str) -> set[str]:
    """The trainkit (and recipes, in class_path) paths a Markdown or YAML text shows."""
    found = set(DOTTED.findall(text)) | set(PLAIN_IMPORT.findall(text))
    found |= set(CLASS_PATH.findall(text))
    for module, imported in FROM_IMPORT.findall(text):
        found |= {f"{module}.{name}" for name in _names(imported)}
    return found


def paths_in_python(source: str) -> set[str]:
    """The trainkit paths a Python file imports or names (``trainkit.Module``)."""
    found = set(DOTTED.findall(source))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "trainkit"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "trainkit":
            found |= {f"{node.module}.{a.name}" for a in node.names if a.name != "*"}
    return found


def documented_paths() -> dict[str, str]:
    """path -> the first file (relative to the repository) that shows it."""
    shown: dict[str, str] = {}
    sources = [(p, paths_in_text(p.read_text())) for p in [*PAGES, *RECIPE_YAML]]
    sources += [(p, paths_in_python(p.read_text())) for p in RECIPE_PYTHON]
    for path, found in sources:
        for dotted in sorted(found):
            shown.setdefault(dotted, path.relative_to(ROOT).as_posix())
    return {
        dotted: where
        for dotted, where in sorted(shown.items())
        if dotted not in NOT_PATHS and not dotted.startswith("trainkit.lightning.")
    }


def optional_modules() -> set[str]:
    """Import names of the packages behind pyproject's optional extras (mlflow-skinny -> mlflow).

    Read with a regex: tomllib is Python 3.11's, and trainkit supports 3.10.
    """
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    section = "\n".join(line.split("#")[0] for line in section.splitlines())
    requirements = re.findall(r"\"([A-Za-z0-9_.\-]+)[^\"]*\"", section)
    return {name.split("-")[0].replace(".", "_").lower() for name in requirements}


def resolve(dotted: str) -> object:
    """Import the longest importable prefix of ``dotted``, then read the rest as attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            value: object = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name is not None and module_name.startswith(error.name):
                continue  # this prefix is not a module: try a shorter one
            raise
        for attribute in parts[cut:]:
            value = getattr(value, attribute)
        return value
    raise ModuleNotFoundError(f"no module in {dotted!r}")


PATHS = documented_paths()


def test_paths_are_found() -> None:
    # The extraction itself: each form is read from the pages.
    text = (
        "Use `trainkit.Trainer.fit`; see last.trainkit.ckpt.\n"
        "```python\nfrom trainkit.callbacks import EarlyStopping, ModelCheckpoint as MC  # x\n"
        "from trainkit.loggers import (\n    CSVLogger,\n    Logger,\n)\n"
        "import trainkit.loops.state\n```\n"
        "  - class_path: trainkit.loggers.CSVLogger\n  class_path: recipes.mnist.model.M\n"
        "  class_path: my_models.Net\n"
    )
    # (the ``trainkit.ckpt`` of a file name is not a path: it follows a dot)
    assert paths_in_text(text) == {
        "trainkit.Trainer.fit",
        "trainkit.callbacks",
        "trainkit.callbacks.EarlyStopping",
        "trainkit.callbacks.ModelCheckpoint",
        "trainkit.loggers",
        "trainkit.loggers.CSVLogger",
        "trainkit.loggers.Logger",
        "trainkit.loops.state",
        "recipes.mnist.model.M",
    }
    python = "import trainkit\nfrom trainkit.utilities import messages as m\nx = trainkit.Module\n"
    assert paths_in_python(python) == {
        "trainkit",
        "trainkit.utilities",
        "trainkit.utilities.messages",
        "trainkit.Module",
    }
    # And the real pages show the forms.
    assert {"trainkit.Trainer", "trainkit.callbacks.ModelCheckpoint"} <= PATHS.keys()
    assert any(p.startswith("recipes.") for p in PATHS)
    assert "mlflow" in optional_modules()


@pytest.mark.parametrize("dotted", sorted(PATHS))
def test_documented_path_imports(dotted: str) -> None:
    try:
        resolve(dotted)
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        if missing and missing in optional_modules():
            pytest.skip(f"{dotted} needs the optional package {missing!r}, not installed")
        pytest.fail(f"{dotted} (shown in {PATHS[dotted]}) does not import: {error}", pytrace=False)
    except (ImportError, AttributeError) as error:
        pytest.fail(f"{dotted} (shown in {PATHS[dotted]}) does not import: {error}", pytrace=False)


# `trainkit/loops/fit.py` (or tests/, benchmarks/, recipes/) anywhere, and `loops/fit.py`
# or `fit.py`-style names alone in backquotes.
SOURCE_PATH = re.compile(
    r"(?<![\w./-])(?:trainkit|tests|benchmarks|recipes)/[\w/]+\.py|`([\w./-]+\.py)`"
)


def missing_source_paths(text: str, root: Path) -> list[str]:
    """The ``.py`` paths a page names that are neither under ``root`` nor ``root/trainkit``.

    A bare file name (``fit.py``) is found if some file of the repository has it.
    """
    missing = []
    for match in SOURCE_PATH.finditer(text):
        path = match.group(1) or match.group(0)
        if "/" not in path:
            found = any(root.rglob(path))
        else:
            found = (root / path).is_file() or (root / "trainkit" / path).is_file()
        if not found:
            missing.append(path)
    return sorted(set(missing))


def test_missing_source_paths_are_found(tmp_path: Path) -> None:
    (tmp_path / "trainkit" / "loops").mkdir(parents=True)
    (tmp_path / "trainkit" / "loops" / "fit.py").touch()
    text = (
        "`trainkit/loops/fit.py`, `loops/fit.py`, `fit.py`, trainkit/loop.py, `step.py`, "
        "`pytest tests/test_gone.py`, my/trainkit/x.py"
    )
    assert missing_source_paths(text, tmp_path) == [
        "step.py",
        "tests/test_gone.py",
        "trainkit/loop.py",
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_source_paths_in_docs_exist(page: Path) -> None:
    missing = missing_source_paths(page.read_text(), ROOT)
    if missing:
        pytest.fail(f"{page.relative_to(ROOT)} names files that do not exist: {missing}")

"""The package as a whole: its layers, import graph and ownership rules.

Each rule is a checker ``(package folder) -> list of violations``, read from
the source with :mod:`ast` (nothing of trainkit is imported, except by the
subprocess tests of what an import loads). The checkers run on trainkit and on
small synthetic packages written to ``tmp_path``, so that they are proven to
catch what they look for and to pass what complies.

1. No import cycle, counting imports inside functions; ``if TYPE_CHECKING:``
   imports are type-only and do not count.
2. ``import trainkit.loops.state`` and ``import trainkit.strategies.base`` do not load
   ``trainkit.trainer.trainer``; the public names still import from ``trainkit``;
   ``import trainkit.strategies`` loads no multi-process strategy and no launcher.
3. Outside ``trainkit/callbacks/`` nothing checks a callback's type: no
   ``isinstance``/``issubclass`` on a callback class, no ``hasattr``/``getattr``
   probe of a callback-only attribute or of a callback object.
4. Only ``trainkit/trainer.py`` assigns the Trainer's attributes (others may set
   ``trainer.should_stop``); only ``trainkit/strategies/`` sets a strategy's
   ``environment``.
5. Size limits: ``loop.py`` and each strategy file < 300 lines, ``trainer.py`` < 600.
6. Nothing injects into or reads from another object's ``__dict__``;
   ``module.py`` and the strategies do not use ``__dict__`` at all.
7. The CLI does not parse docstrings (``config.py``, ``cli.py``: no ``__doc__``,
   no ``inspect.getdoc``).
8. Layers: the bottom modules import only the bottom layer; strategies and
   launchers never import the Trainer or the loops; callbacks never import the
   Trainer or the loop at runtime.
"""

from __future__ import annotations

import ast
import functools
import itertools
import os
import subprocess
import sys
import textwrap
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "trainkit"


# --------------------------------------------------------------- reading source
@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


@functools.cache
def _lines(path: Path) -> tuple[str, ...]:
    return tuple(path.read_text().splitlines())


def python_files(package: Path) -> list[Path]:
    """Every ``.py`` file of the package, sorted."""
    return sorted(package.rglob("*.py"))


def module_name(path: Path, package: Path) -> str:
    """``pkg/a/b.py`` -> ``pkg.a.b``; ``pkg/a/__init__.py`` -> ``pkg.a``."""
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def where(path: Path, line: int, package: Path) -> str:
    """``pkg/a.py:12: <the source line>``."""
    text = _lines(path)[line - 1].strip() if line <= len(_lines(path)) else ""
    return f"{path.relative_to(package.parent)}:{line}: {text}"


def _report(hits: list[tuple[Path, int]], package: Path) -> list[str]:
    """Each (file, line) once, in file and line order, as :func:`where` writes it."""
    return [where(path, line, package) for path, line in sorted(set(hits))]


def _relative(path: Path, package: Path) -> str:
    return path.relative_to(package).as_posix()


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _name_of(node: ast.expr) -> str | None:
    """``x`` -> "x"; ``a.b.x`` -> "x"; anything else -> None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _call_name(node: ast.Call) -> str | None:
    return _name_of(node.func)


def _constant_str(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


# ----------------------------------------------------------------- import graph
@dataclass(frozen=True)
class Import:
    """One module importing another, at one statement."""

    source: str
    target: str
    path: Path
    line: int
    type_only: bool  # under `if TYPE_CHECKING:`
    in_function: bool
    name: str | None = None  # `from target import name` where name is not a module


def _is_type_checking(test: ast.expr) -> bool:
    return _name_of(test) == "TYPE_CHECKING"


def _import_statements(
    node: ast.AST, type_only: bool = False, in_function: bool = False
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node, type_only, in_function
        return
    if isinstance(node, ast.If) and _is_type_checking(node.test):
        for statement in node.body:
            yield from _import_statements(statement, True, in_function)
        for statement in node.orelse:
            yield from _import_statements(statement, type_only, in_function)
        return
    inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    for child in ast.iter_child_nodes(node):
        yield from _import_statements(child, type_only, inner)


def _resolve(dotted: str, modules: set[str]) -> str | None:
    """The longest prefix of ``dotted`` that is one of the package's modules."""
    parts = dotted.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


@functools.cache
def imports(package: Path) -> tuple[Import, ...]:
    """Every import of one of the package's modules by another, read from the source."""
    files = python_files(package)
    modules = {module_name(path, package) for path in files}
    found: list[Import] = []
    for path in files:
        source = module_name(path, package)
        # The package a relative import starts from: the module itself for __init__.py.
        here = source if path.name == "__init__.py" else source.rpartition(".")[0]
        for node, type_only, in_function in _import_statements(_tree(path)):
            targets: list[tuple[str | None, str | None]] = []
            if isinstance(node, ast.Import):
                targets = [(_resolve(alias.name, modules), None) for alias in node.names]
            else:
                if node.level:
                    parts = here.split(".")
                    if node.level - 1 >= len(parts):
                        continue  # beyond the top package
                    base = ".".join(parts[: len(parts) - (node.level - 1)])
                    origin = f"{base}.{node.module}" if node.module else base
                else:
                    origin = node.module or ""
                for alias in node.names:
                    submodule = f"{origin}.{alias.name}"
                    if submodule in modules:
                        targets.append((submodule, None))
                    else:
                        name = None if alias.name == "*" else alias.name
                        targets.append((_resolve(origin, modules), name))
            for target, name in targets:
                if target is not None and target != source:
                    found.append(
                        Import(source, target, path, node.lineno, type_only, in_function, name)
                    )
    return tuple(found)


def runtime_graph(package: Path) -> dict[str, dict[str, Import]]:
    """module -> imported module -> its first runtime import statement (type-only aside)."""
    graph: dict[str, dict[str, Import]] = {
        module_name(path, package): {} for path in python_files(package)
    }
    for edge in imports(package):
        if not edge.type_only:
            graph[edge.source].setdefault(edge.target, edge)
    return graph


def _cycle_through(start: str, graph: Mapping[str, Mapping[str, object]]) -> list[str] | None:
    """The shortest cycle ``[start, ..., start]``, breadth first, or None."""
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in sorted(graph.get(node, {})):
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if target not in parent:
                parent[target] = node
                queue.append(target)
    return None


def shortest_cycle(graph: Mapping[str, Mapping[str, object]]) -> list[str] | None:
    """The shortest import cycle (the first by module name among equals), or None."""
    cycles = [c for c in (_cycle_through(m, graph) for m in sorted(graph)) if c is not None]
    return min(cycles, key=len) if cycles else None


def import_cycle_report(package: Path) -> str | None:
    """None, or one cycle ``a -> b -> a`` with the statement behind each edge."""
    graph = runtime_graph(package)
    cycle = shortest_cycle(graph)
    if cycle is None:
        return None
    lines = [f"import cycle: {' -> '.join(cycle)}"]
    for source, target in itertools.pairwise(cycle):
        edge = graph[source][target]
        scope = " (inside a function)" if edge.in_function else ""
        lines.append(f"  {source} -> {target}{scope} at {where(edge.path, edge.line, package)}")
    on_cycles = [m for m in sorted(graph) if _cycle_through(m, graph) is not None]
    lines.append(f"modules on some cycle: {', '.join(on_cycles)}")
    return "\n".join(lines)


# ------------------------------------------------------------------- callbacks
def _classes(package: Path) -> dict[str, tuple[Path, ast.ClassDef]]:
    return {
        node.name: (path, node)
        for path in python_files(package)
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.ClassDef)
    }


def _subclasses_of(root: str, bases: Mapping[str, list[str]]) -> set[str]:
    """``root`` and every class that subclasses it directly or indirectly."""
    found = {root}
    grown = True
    while grown:
        more = {name for name, parents in bases.items() if found.intersection(parents)}
        grown = bool(more - found)
        found |= more
    return found


def _bases(classes: Mapping[str, tuple[Path, ast.ClassDef]]) -> dict[str, list[str]]:
    return {
        name: [b for b in (_name_of(base) for base in node.bases) if b is not None]
        for name, (_, node) in classes.items()
    }


def callback_classes(package: Path) -> set[str]:
    """``Callback`` and the classes of ``<package>/callbacks/`` that subclass it."""
    in_callbacks = _classes(package / "callbacks")
    return _subclasses_of("Callback", _bases(in_callbacks)) & (set(in_callbacks) | {"Callback"})


def _members(node: ast.ClassDef, instance: bool = True) -> set[str]:
    """Names a class defines in its body (methods, properties, class attributes) and,
    with ``instance``, the ``self.x = ...`` of its methods."""
    names: set[str] = set()
    for statement in node.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(statement.name)
            for inner in ast.walk(statement) if instance else ():
                if (
                    isinstance(inner, ast.Attribute)
                    and isinstance(inner.ctx, ast.Store)
                    and isinstance(inner.value, ast.Name)
                    and inner.value.id == "self"
                ):
                    names.add(inner.attr)
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def callback_only_members(package: Path) -> set[str]:
    """What the body of a subclass of Callback defines (methods, properties, class
    attributes) and neither Callback nor any other class of the package defines.

    Instance attributes are left out: many are generic names (``mode``, ``dtype``,
    ``text``) that tensors and other objects have too. A probe of one on a callback
    object is still caught by its receiver (see :func:`callback_type_checks`).
    """
    classes = _classes(package)
    callbacks = _subclasses_of("Callback", _bases(classes))
    specific: set[str] = set()
    elsewhere: set[str] = set()
    for name, (_, node) in classes.items():
        if name in callbacks and name != "Callback":
            specific |= _members(node, instance=False)
        else:
            elsewhere |= _members(node)
    return {n for n in specific - elsewhere if not n.startswith("__")}


def _is_callbacks(node: ast.expr) -> bool:
    """``callbacks``, ``x.callbacks``, or reversed/list/sorted/tuple of one."""
    if isinstance(node, ast.Call) and _call_name(node) in {"reversed", "list", "sorted", "tuple"}:
        return bool(node.args) and _is_callbacks(node.args[0])
    return _name_of(node) == "callbacks"


def _callback_variables(tree: ast.AST) -> set[str]:
    """``cb``, ``callback``, and the loop variables that run over a callbacks list."""
    names = {"cb", "callback"}
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            iterable, target = node.iter, node.target
            if (
                isinstance(iterable, ast.Call)
                and _call_name(iterable) == "enumerate"
                and iterable.args
                and isinstance(target, ast.Tuple)
                and len(target.elts) == 2
            ):
                iterable, target = iterable.args[0], target.elts[1]
            if _is_callbacks(iterable) and isinstance(target, ast.Name):
                names.add(target.id)
    return names


#: Outside callbacks/, the one module that reads callbacks as plain objects: Lightning
#: accepts any object with hook methods as a callback, so saving and loading a callback's
#: state must probe for ``state_key`` / ``state_dict`` / ``load_state_dict`` / a hook.
CALLBACK_PROTOCOL = ("checkpoint/callback_state.py",)


def callback_type_checks(package: Path) -> list[str]:
    """isinstance/issubclass on callback classes, hasattr/getattr probes of callbacks."""
    classes = callback_classes(package)
    members = callback_only_members(package)
    found: list[tuple[Path, int]] = []
    for path in python_files(package):
        relative = _relative(path, package)
        if relative.startswith("callbacks/") or relative in CALLBACK_PROTOCOL:
            continue
        tree = _tree(path)
        aliases = {  # `from ... import ModelCheckpoint as MC`
            alias.asname: alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
            if alias.asname
        }
        variables = _callback_variables(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            function = _call_name(node)
            if function in {"isinstance", "issubclass"} and len(node.args) == 2:
                kinds = node.args[1]
                options = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
                names = {_name_of(option) for option in options}
                if {aliases.get(n, n) for n in names if n is not None} & classes:
                    found.append((path, node.lineno))
            elif function == "hasattr" or (function == "getattr" and len(node.args) == 3):
                subject, attribute = node.args[0], node.args[1:2]
                on_callback = (isinstance(subject, ast.Name) and subject.id in variables) or (
                    isinstance(subject, ast.Subscript) and _is_callbacks(subject.value)
                )
                specific = bool(attribute) and _constant_str(attribute[0]) in members
                if on_callback or specific:
                    found.append((path, node.lineno))
    return _report(found, package)


# --------------------------------------------------------------- trainer writes
_TRAINER_NAMES = {"trainer", "_trainer"}
_STRATEGY_NAMES = {"strategy", "_strategy"}


def _writes(tree: ast.AST) -> Iterator[tuple[ast.expr, str, int]]:
    """(object, attribute, line) for each attribute store, delete or ``setattr``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            yield node.value, node.attr, node.lineno
        elif (
            isinstance(node, ast.Call)
            and len(node.args) >= 2
            and _call_name(node) in {"setattr", "__setattr__", "delattr", "__delattr__"}
        ):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr.startswith("__")
                and _name_of(func.value) != "object"
            ):
                # `obj.__setattr__("x", v)`; `object.__setattr__(obj, "x", v)` is setattr's form.
                yield func.value, _constant_str(node.args[0]) or "?", node.lineno
            else:
                yield node.args[0], _constant_str(node.args[1]) or "?", node.lineno


def _chain(node: ast.expr) -> Iterator[str]:
    """The names an object expression goes through: ``module.trainer.state`` ->
    state, trainer, module; ``trainer.results["x"]`` -> results, trainer."""
    while True:
        if isinstance(node, ast.Attribute):
            yield node.attr
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Name):
            yield node.id
            return
        else:
            return


def _in_trainer_package(relative: str) -> bool:
    return relative.startswith("trainer/")


def trainer_attribute_writes(
    package: Path, owner: Callable[[str], bool] = _in_trainer_package
) -> list[str]:
    """Writes to the Trainer or to anything reached through it, outside the files
    ``owner`` selects: ``trainer.x = ...``, ``trainer.preemption.stopped_by = ...``,
    ``module.trainer.state.x = ...``, ``trainer.results["k"] = ...``, ``setattr``/``del``
    of the same; Lightning's public ``trainer.should_stop = ...`` aside. Also
    ``x.strategy.environment = ...`` outside the strategies.

    Args:
        package: the package folder.
        owner: which files (relative to ``package``) may write the Trainer's attributes.
    """
    found: list[tuple[Path, int]] = []
    for path in python_files(package):
        relative = _relative(path, package)
        tree = _tree(path)
        stores = [
            (node.value, node.lineno)
            for node in ast.walk(tree)
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del))
        ]
        for subject, attribute, line in _writes(tree):
            on_trainer = not owner(relative) and bool(_TRAINER_NAMES.intersection(_chain(subject)))
            if on_trainer and attribute == "should_stop" and _name_of(subject) in _TRAINER_NAMES:
                on_trainer = False  # Lightning's documented way for a callback to stop a run
            on_environment = _name_of(subject) in _STRATEGY_NAMES and attribute == "environment"
            if on_trainer or (on_environment and not relative.startswith("strategies/")):
                found.append((path, line))
        if not owner(relative):
            found.extend(
                (path, line)
                for subject, line in stores
                if _TRAINER_NAMES.intersection(_chain(subject))
            )
    return _report(found, package)


# --------------------------------------------------------------------- __dict__
def _dict_of(node: ast.AST) -> ast.expr | None:
    """The object whose dict ``node`` is: ``obj.__dict__`` or ``vars(obj)``."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return node.value
    if isinstance(node, ast.Call) and _call_name(node) == "vars" and len(node.args) == 1:
        return node.args[0]
    return None


def _in_method(node: ast.AST, parents: Mapping[ast.AST, ast.AST]) -> bool:
    while node in parents:
        parent = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and isinstance(
            parent, ast.ClassDef
        ):
            return True
        node = parent
    return False


def dict_injections(package: Path) -> list[str]:
    """``obj.__dict__[k]`` (set, read or deleted), ``obj.__dict__.pop/get/setdefault/update``,
    the same through ``vars(obj)``, except on ``self`` inside its class's methods."""
    found: list[tuple[Path, int]] = []
    for path in python_files(package):
        tree = _tree(path)
        parents = _parents(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Attribute, ast.Call)):
                continue
            owner = _dict_of(node)
            if owner is None or node not in parents:
                continue
            parent = parents[node]
            subscript = isinstance(parent, ast.Subscript) and parent.value is node
            method = (
                isinstance(parent, ast.Attribute)
                and parent.attr in {"pop", "get", "setdefault", "update"}
                and isinstance(parents.get(parent), ast.Call)
            )
            own = isinstance(owner, ast.Name) and owner.id == "self" and _in_method(node, parents)
            if (subscript or method) and not own:
                found.append((path, node.lineno))
    return _report(found, package)


def dict_uses(package: Path, relatives: Callable[[str], bool]) -> list[str]:
    """Any ``x.__dict__`` or ``vars(x)`` in the files ``relatives`` selects."""
    hits = [
        (path, node.lineno)
        for path in python_files(package)
        if relatives(_relative(path, package))
        for node in ast.walk(_tree(path))
        if isinstance(node, (ast.Attribute, ast.Call)) and _dict_of(node) is not None
    ]
    return _report(hits, package)


def _module_or_strategy(relative: str) -> bool:
    return relative == "core/module.py" or relative.startswith("strategies/")


# ------------------------------------------------------------------- docstrings
def docstring_reads(path: Path, package: Path) -> list[str]:
    """``x.__doc__``, ``__doc__``, ``getattr(x, "__doc__")``, ``inspect.getdoc``/``getdoc``."""
    tree = _tree(path)
    getdoc = {  # `from inspect import getdoc [as name]`
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in {"inspect", "pydoc"}
        for alias in node.names
        if alias.name == "getdoc"
    }
    lines: list[int] = []
    for node in ast.walk(tree):
        attribute = isinstance(node, ast.Attribute) and node.attr in {"__doc__", "getdoc"}
        name = isinstance(node, ast.Name) and node.id in {"__doc__", *getdoc}
        if (isinstance(node, (ast.Attribute, ast.Name)) and (attribute or name)) or (
            isinstance(node, ast.Call)
            and _call_name(node) in {"getattr", "hasattr"}
            and len(node.args) >= 2
            and _constant_str(node.args[1]) == "__doc__"
        ):
            lines.append(node.lineno)
    return _report([(path, line) for line in lines], package)


# --------------------------------------------------------------------- layering
def forbidden_imports(
    package: Path,
    files: Callable[[str], bool],
    allowed: Callable[[str], bool],
    lazy_names: Mapping[str, str] | None = None,
) -> list[str]:
    """Runtime imports, in the files ``files`` selects, of modules ``allowed`` refuses.

    ``lazy_names`` maps a name imported from the top package to the module that
    defines it (``from trainkit import Trainer`` loads ``trainkit.trainer.trainer``).
    """
    found: list[str] = []
    for edge in imports(package):
        if edge.type_only or not files(_relative(edge.path, package)):
            continue
        target = edge.target
        if edge.name is not None and lazy_names and edge.name in lazy_names:
            target = lazy_names[edge.name] if target == package.name else target
        if not allowed(target):
            found.append(f"{where(edge.path, edge.line, package)}  [imports {target}]")
    return found


def _none_of(*modules: str) -> Callable[[str], bool]:
    return lambda target: not any(target == m or target.startswith(f"{m}.") for m in modules)


def lazy_public_names(package: Path) -> dict[str, str]:
    """The top package's ``_PUBLIC`` table (name -> defining module), read from its source:
    ``from trainkit import Trainer`` loads ``trainkit.trainer.trainer``."""
    for node in ast.walk(_tree(package / "__init__.py")):
        if (
            isinstance(node, (ast.Assign, ast.AnnAssign))
            and _name_of(node.targets[0] if isinstance(node, ast.Assign) else node.target)
            == "_PUBLIC"
            and node.value is not None
        ):
            table = ast.literal_eval(node.value)
            assert isinstance(table, dict)
            return {str(k): str(v) for k, v in table.items()}
    return {}


LAZY_PUBLIC_NAMES = lazy_public_names(PACKAGE)


def _runtime_target(edge: Import, package: Path, lazy_names: Mapping[str, str]) -> str:
    """The module an import loads: a lazy public name of the top package is its module."""
    if edge.target == package.name and edge.name is not None and edge.name in lazy_names:
        return lazy_names[edge.name]
    return edge.target


# ----------------------------------------------------------------------- layers
Layers = tuple[tuple[str, tuple[str, ...]], ...]


def _covers(entry: str, module: str) -> bool:
    """An entry names a module and what is under it; the bare top package only itself."""
    return module == entry or ("." in entry and module.startswith(f"{entry}."))


def layer_of(module: str, layers: Layers) -> int | None:
    """The index (0 = bottom) of the layer whose longest entry covers ``module``."""
    best: tuple[int, int] | None = None  # (entry length, layer)
    for index, (_, entries) in enumerate(layers):
        for entry in entries:
            if _covers(entry, module) and (best is None or len(entry) > best[0]):
                best = (len(entry), index)
    return None if best is None else best[1]


def unplaced_modules(package: Path, layers: Layers) -> list[str]:
    """The package's modules no layer entry covers."""
    return [
        name
        for name in (module_name(path, package) for path in python_files(package))
        if layer_of(name, layers) is None
    ]


def layer_violations(
    package: Path,
    layers: Layers,
    allowed: Mapping[tuple[str, str], str] | None = None,
    lazy_names: Mapping[str, str] | None = None,
) -> list[str]:
    """Runtime imports (inside functions too) of a module in a higher layer.

    Args:
        package: the package folder.
        layers: (layer name, module entries), bottom first.
        allowed: ``(file relative to package, imported module) -> reason`` exceptions.
        lazy_names: the top package's lazily imported names -> their modules.
    """
    found: list[str] = []
    for edge in imports(package):
        if edge.type_only:
            continue
        target = _runtime_target(edge, package, lazy_names or {})
        source_layer, target_layer = layer_of(edge.source, layers), layer_of(target, layers)
        if source_layer is None or target_layer is None or target_layer <= source_layer:
            continue
        if (_relative(edge.path, package), target) in (allowed or {}):
            continue
        found.append(
            f"{where(edge.path, edge.line, package)}  [{layers[source_layer][0]} imports "
            f"{target} ({layers[target_layer][0]})]"
        )
    return list(dict.fromkeys(found))  # `from m import a, b` is one finding


# Bottom first. A module belongs to the layer of its longest entry, and imports at run
# time (inside functions too; `if TYPE_CHECKING:` aside) only from its layer or below.
# Every module must be covered (test_every_module_has_a_layer), so a new package is placed.
LAYERS: Layers = (
    (
        "foundation",
        (
            "trainkit.utilities",
            "trainkit.version",
            # The validated option dataclasses every layer reads (DESIGN.md puts
            # options.py beside io.py and seed.py at the bottom); filed beside the
            # Trainer that is built from them.
            "trainkit.trainer.options",
            # The cluster as torchrun/SLURM variables describe it (rank, world, master):
            # read by distributed/rendezvous.py, the strategies and the launchers.
            "trainkit.launch.environment",
        ),
    ),
    ("checkpoint", ("trainkit.checkpoint",)),  # the file format: save, load, digests
    ("core", ("trainkit.core",)),  # what the user writes against: Module, DataModule
    ("distributed", ("trainkit.distributed", "trainkit.pipelining")),  # what strategies share
    ("strategies", ("trainkit.strategies",)),
    ("launch", ("trainkit.launch",)),  # starting processes, chosen apart from strategies
    (
        "loops",
        ("trainkit.loops", "trainkit.callbacks", "trainkit.loggers", "trainkit.profilers"),
    ),
    ("tuner", ("trainkit.tuner",)),  # trial fits on the loops; the Trainer asks it
    ("trainer", ("trainkit.trainer",)),
    (
        "entry points",
        (
            "trainkit",  # the top package: public names, imported lazily
            "trainkit.__main__",
            "trainkit.cli",
            "trainkit.lightning",
            # Documented import paths kept by re-export; trainkit's own modules
            # import the real module.
            "trainkit.messages",
            "trainkit.options",
            "trainkit.io",
            "trainkit.compile",
            "trainkit.throughput",
        ),
    ),
)

# (file, imported module) -> why this upward import is needed. Keep it short.
LAYER_EXCEPTIONS = {
    (
        "callbacks/batch_size_finder.py",
        "trainkit.tuner.batch_size_scaling",
    ): "Lightning's BatchSizeFinder is a callback that runs the tuner's search from its "
    "hook; imported inside the hook",
    (
        "callbacks/lr_finder.py",
        "trainkit.tuner.lr_finder",
    ): "Lightning's LearningRateFinder is a callback that runs the tuner's search from its "
    "hook; imported inside the hook",
    **dict.fromkeys(
        [
            ("trainer/lightning_parts.py", "trainkit.lightning.plugins.precision"),
            ("trainer/lightning_parts.py", "trainkit.lightning.plugins.io"),
        ],
        "Lightning's trainer.precision_plugin and strategy.checkpoint_io are objects of "
        "Lightning's plugin classes; imported when a property is read",
    ),
    (
        "trainer/lightning_parts.py",
        "trainkit.lightning.plugins.environments",
    ): "Lightning's strategy.cluster_environment is an object of Lightning's environment "
    "plugin classes; imported when the property is read",
}

# Below the Trainer's package, the Trainer is imported only for types (`if TYPE_CHECKING:`),
# and only here.
TRAINER_TYPE_IMPORTS = {
    "callbacks/": "Lightning's hook signatures take (trainer, pl_module)",
    "core/module.py": "Module.trainer, Lightning's public property",
    "tuner/": "Lightning's Tuner(trainer) and its searches take the Trainer",
}


def trainer_imports(
    package: Path,
    trainer: str,
    above: Callable[[str], bool],
    type_only_allowed: Mapping[str, str],
    lazy_names: Mapping[str, str] | None = None,
) -> list[str]:
    """Imports of the module ``trainer`` from modules ``above`` does not select: any at run
    time, and type-only ones outside the files or folders (ending in "/") listed."""
    found: list[str] = []
    for edge in imports(package):
        relative = _relative(edge.path, package)
        if above(edge.source) or _runtime_target(edge, package, lazy_names or {}) != trainer:
            continue
        if not edge.type_only:
            found.append(f"{where(edge.path, edge.line, package)}  [at run time]")
        elif not any(
            relative == entry or (entry.endswith("/") and relative.startswith(entry))
            for entry in type_only_allowed
        ):
            found.append(f"{where(edge.path, edge.line, package)}  [type-only, not listed]")
    return list(dict.fromkeys(found))


def _at_or_above_trainer(module: str) -> bool:
    trainer = layer_of("trainkit.trainer.trainer", LAYERS)
    layer = layer_of(module, LAYERS)
    return trainer is not None and layer is not None and layer >= trainer


# ====================================================================== the rules
def _expect_none(title: str, findings: list[str]) -> None:
    """Fail with the title and one finding a line (file:line: source), if any."""
    if findings:
        lines = "\n".join(f"  {finding}" for finding in findings)
        pytest.fail(f"{title} ({len(findings)}):\n{lines}", pytrace=False)


def test_no_import_cycle() -> None:
    report = import_cycle_report(PACKAGE)
    if report is not None:
        pytest.fail(report, pytrace=False)


# Rule 2: in subprocesses, started together (each pays for importing torch).
_LOADED = (
    "import {module}, sys, trainkit\n"
    "print(trainkit.__file__)\n"
    "print(sorted(m for m in sys.modules if m.startswith('trainkit')))\n"
)
_PUBLIC_API = """
import trainkit
assert trainkit.Trainer.__name__ == "Trainer", trainkit.Trainer
from trainkit import Trainer, Module, Callback, DataModule, seed_everything, rank_zero_only
assert trainkit.Trainer is Trainer
for name in trainkit.__all__:
    getattr(trainkit, name)
assert all(isinstance(c, type) for c in (Trainer, Module, Callback, DataModule))
assert callable(seed_everything) and callable(rank_zero_only)
# Subpackages read as attributes after a plain `import trainkit`, as before.
assert trainkit.loggers.CSVLogger.__name__ == "CSVLogger"
assert trainkit.callbacks.ModelCheckpoint.__name__ == "ModelCheckpoint"
assert trainkit.strategies.SingleDeviceStrategy.__name__ == "SingleDeviceStrategy"
assert not hasattr(trainkit, "no_such_name")
print(trainkit.__file__)
"""
_PROBES = {
    "trainkit.loops.state": _LOADED.format(module="trainkit.loops.state"),
    "trainkit.strategies.base": _LOADED.format(module="trainkit.strategies.base"),
    "trainkit.strategies": _LOADED.format(module="trainkit.strategies"),
    "public API": _PUBLIC_API,
}


@pytest.fixture(scope="module")
def probes() -> Iterator[dict[str, subprocess.Popen[str]]]:
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    running = {
        name: subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, code in _PROBES.items()
    }
    yield running
    for process in running.values():
        if process.poll() is None:
            process.kill()
        process.communicate()


def _finish(process: subprocess.Popen[str]) -> list[str]:
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0, f"the subprocess failed:\n{err}"
    lines = out.splitlines()
    assert Path(lines[0]).is_relative_to(PACKAGE), f"imported trainkit from {lines[0]}"
    return lines


@pytest.mark.parametrize("module", ["trainkit.loops.state", "trainkit.strategies.base"])
def test_low_layer_does_not_load_trainer(
    module: str, probes: dict[str, subprocess.Popen[str]]
) -> None:
    loaded: list[str] = ast.literal_eval(_finish(probes[module])[-1])
    if "trainkit.trainer.trainer" in loaded:
        pytest.fail(
            f"`import {module}` loads trainkit.trainer.trainer; the trainkit modules it loads:\n  "
            + "\n  ".join(loaded),
            pytrace=False,
        )


def test_strategies_load_heavy_strategies_and_launchers_on_use(
    probes: dict[str, subprocess.Popen[str]],
) -> None:
    # The registry names every strategy without importing it; choosing a launcher
    # is trainkit.launch's business, which the strategies package does not load.
    loaded: list[str] = ast.literal_eval(_finish(probes["trainkit.strategies"])[-1])
    heavy = ("fsdp", "hybrid", "dp", "ddp", "pipeline", "pipe")
    unwanted = {f"trainkit.strategies.{name}" for name in heavy} | {"trainkit.launch"}
    found = sorted(unwanted.intersection(loaded))
    if found:
        pytest.fail(f"`import trainkit.strategies` loads {found}", pytrace=False)


def test_public_api_is_kept(probes: dict[str, subprocess.Popen[str]]) -> None:
    _finish(probes["public API"])


def test_no_callback_type_checks_outside_callbacks() -> None:
    findings = callback_type_checks(PACKAGE)
    _expect_none("type checks on callbacks outside trainkit/callbacks/", findings)


def test_only_trainer_assigns_trainer_attributes() -> None:
    findings = trainer_attribute_writes(PACKAGE)
    _expect_none(
        "the Trainer's attributes (or strategy.environment) set outside trainkit/trainer/",
        findings,
    )


# Any module of trainkit/ stays under this many lines; some have lower limits below.
MODULE_LINE_LIMIT = 900
SIZE_LIMITS = [
    ("loops/fit.py", 300),
    # The public API (four documented entry points, ~30 documented properties) and
    # the set-up of a run; it was 973 lines when other modules also kept its state.
    ("trainer/trainer.py", 650),
    *((_relative(p, PACKAGE), 300) for p in python_files(PACKAGE / "strategies")),
]


def oversized(package: Path, limit: int) -> list[str]:
    """``relative path: N lines`` for each module of ``limit`` lines or more."""
    return [
        f"{_relative(path, package)}: {len(_lines(path))} lines"
        for path in python_files(package)
        if len(_lines(path)) >= limit
    ]


def test_no_module_over_the_line_limit() -> None:
    findings = oversized(PACKAGE, MODULE_LINE_LIMIT)
    _expect_none(f"modules of trainkit/ with {MODULE_LINE_LIMIT} lines or more", findings)


@pytest.mark.parametrize(("relative", "limit"), SIZE_LIMITS, ids=[r for r, _ in SIZE_LIMITS])
def test_file_size(relative: str, limit: int) -> None:
    path = PACKAGE / relative
    assert path.is_file(), f"trainkit/{relative} is gone: update this test's limits"
    count = len(_lines(path))
    if count >= limit:
        pytest.fail(f"trainkit/{relative} has {count} lines; the limit is < {limit}", pytrace=False)


def test_no_dict_injection() -> None:
    findings = dict_injections(PACKAGE)
    _expect_none("__dict__ used to inject or read state", findings)


def test_module_and_strategies_do_not_use_dict() -> None:
    findings = dict_uses(PACKAGE, _module_or_strategy)
    _expect_none("__dict__ used in core/module.py or trainkit/strategies/", findings)


@pytest.mark.parametrize("relative", ["cli/config.py", "cli/main.py"])
def test_cli_does_not_read_docstrings(relative: str) -> None:
    path = PACKAGE / relative
    assert path.is_file(), f"trainkit/{relative} is gone: update this test"
    findings = docstring_reads(path, PACKAGE)
    _expect_none(f"trainkit/{relative} reads docstrings", findings)


def test_every_module_has_a_layer() -> None:
    _expect_none("modules no entry of LAYERS covers", unplaced_modules(PACKAGE, LAYERS))


def test_layer_exceptions_exist() -> None:
    # An exception whose import is gone is removed, so the list stays the real one.
    present = {(_relative(e.path, PACKAGE), e.target) for e in imports(PACKAGE)}
    stale = [
        f"{file} -> {target}" for file, target in LAYER_EXCEPTIONS if (file, target) not in present
    ]
    _expect_none("LAYER_EXCEPTIONS entries with no such import", stale)


def test_layers() -> None:
    findings = layer_violations(PACKAGE, LAYERS, LAYER_EXCEPTIONS, LAZY_PUBLIC_NAMES)
    _expect_none("imports of a higher layer (see LAYERS)", findings)


def test_trainer_not_imported_below_its_package() -> None:
    findings = trainer_imports(
        PACKAGE,
        "trainkit.trainer.trainer",
        _at_or_above_trainer,
        TRAINER_TYPE_IMPORTS,
        LAZY_PUBLIC_NAMES,
    )
    _expect_none("the Trainer imported below trainkit/trainer/", findings)


@pytest.mark.parametrize("folder", ["strategies", "launch"])
def test_strategies_and_launchers_do_not_import_loops(folder: str) -> None:
    forbidden = (
        "trainkit.trainer.trainer",
        "trainkit.loops.fit",
        "trainkit.loops.evaluate",
        "trainkit.loops.step",
    )
    findings = forbidden_imports(
        PACKAGE,
        lambda r: r.startswith(f"{folder}/"),
        _none_of(*forbidden),
        LAZY_PUBLIC_NAMES,
    )
    _expect_none(f"trainkit/{folder}/ imports {forbidden}", findings)


def test_callbacks_do_not_import_trainer_or_loop() -> None:
    findings = forbidden_imports(
        PACKAGE,
        lambda r: r.startswith("callbacks/"),
        _none_of("trainkit.trainer.trainer", "trainkit.loops.fit"),
        LAZY_PUBLIC_NAMES,
    )
    _expect_none("trainkit/callbacks/ imports trainer/loop at runtime", findings)


# ============================================ the checkers on synthetic packages
def make_package(root: Path, files: Mapping[str, str], name: str = "pkg") -> Path:
    """Write ``{relative path: source}`` under ``root/name`` (with __init__.py files)."""
    package = root / name
    for relative, source in files.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    for folder in [package, *(p for p in package.rglob("*") if p.is_dir())]:
        (folder / "__init__.py").touch()
    return package


def _edges(package: Path) -> set[tuple[str, str]]:
    return {(e.source, e.target) for e in imports(package) if not e.type_only}


def test_graph_resolves_each_import_form(tmp_path: Path) -> None:
    package = make_package(
        tmp_path,
        {
            "a.py": "import pkg.sub.b\nimport os, torch.nn\n",
            "c.py": "from pkg.sub import b\nfrom pkg.sub.b import thing\n",
            "d.py": "from pkg import a, missing\nimport pkg.sub.nothing\n",
            "sub/b.py": "from . import x\nfrom .. import a\nfrom ..c import y\n",
            "sub/__init__.py": "from .b import thing\nfrom . import b\n",
            "sub/deep/e.py": "from ...d import z\nfrom .... import too_far\n",
            "x.py": "",
        },
    )
    assert _edges(package) == {
        ("pkg.a", "pkg.sub.b"),
        ("pkg.c", "pkg.sub.b"),
        ("pkg.d", "pkg.a"),
        ("pkg.d", "pkg"),  # `missing` is not a module: the package
        ("pkg.d", "pkg.sub"),  # pkg.sub.nothing does not exist
        ("pkg.sub.b", "pkg.sub"),  # `from . import x`: no pkg/sub/x.py
        ("pkg.sub.b", "pkg.a"),
        ("pkg.sub.b", "pkg.c"),
        ("pkg.sub", "pkg.sub.b"),
        ("pkg.sub.deep.e", "pkg.d"),
    }
    lazy = [e for e in imports(package) if e.source == "pkg.d" and e.target == "pkg"]
    assert [(e.name, e.line) for e in lazy] == [("missing", 1)]


def test_graph_counts_function_imports_not_type_only(tmp_path: Path) -> None:
    package = make_package(
        tmp_path,
        {
            "a.py": """
                import importlib
                import typing
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from pkg import b
                else:
                    from pkg import c
                if typing.TYPE_CHECKING:
                    import pkg.d
                def f():
                    from pkg import e
                    if TYPE_CHECKING:
                        from pkg import d
                    return importlib.import_module("pkg.d")
                class K:
                    def g(self):
                        import pkg.f
                """,
            **{f"{n}.py": "" for n in "bcdef"},
        },
    )
    found = {(e.target, e.type_only, e.in_function) for e in imports(package)}
    assert found == {
        ("pkg.b", True, False),
        ("pkg.c", False, False),
        ("pkg.d", True, False),
        ("pkg.e", False, True),
        ("pkg.d", True, True),
        ("pkg.f", False, True),
    }
    # No implicit edges to parent packages; type-only edges are not in the graph.
    assert runtime_graph(package)["pkg.a"].keys() == {"pkg.c", "pkg.e", "pkg.f"}
    assert runtime_graph(package)["pkg"] == {}


def test_cycle_finder() -> None:
    assert shortest_cycle({"a": {"b": 1}, "b": {"c": 1}, "c": {}}) is None
    assert shortest_cycle({"a": {"a": 1}}) == ["a", "a"]
    graph = {"a": {"b": 1}, "b": {"c": 1, "d": 1}, "c": {"a": 1}, "d": {"b": 1}, "e": {"a": 1}}
    assert shortest_cycle(graph) == ["b", "d", "b"]
    assert _cycle_through("a", graph) == ["a", "b", "c", "a"]
    assert _cycle_through("e", graph) is None


def test_cycle_report_names_each_statement(tmp_path: Path) -> None:
    package = make_package(
        tmp_path,
        {
            "a.py": "import os\nfrom pkg import b\n",
            "b.py": "def f():\n    from pkg.c import x\n",
            "c.py": "from typing import TYPE_CHECKING\nimport pkg.a\n",
            "d.py": "from pkg import a\n",
        },
    )
    assert import_cycle_report(package) == (
        "import cycle: pkg.a -> pkg.b -> pkg.c -> pkg.a\n"
        "  pkg.a -> pkg.b at pkg/a.py:2: from pkg import b\n"
        "  pkg.b -> pkg.c (inside a function) at pkg/b.py:2: from pkg.c import x\n"
        "  pkg.c -> pkg.a at pkg/c.py:2: import pkg.a\n"
        "modules on some cycle: pkg.a, pkg.b, pkg.c"
    )
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n import pkg.a\n"
    )
    for cache in (_tree, _lines, imports):
        cache.cache_clear()
    assert import_cycle_report(package) is None


CALLBACK_PACKAGE = {
    "callbacks/base.py": """
        class Callback:
            def on_fit_start(self, trainer): ...
            def state_dict(self): return {}
        """,
    "callbacks/accumulation.py": """
        from pkg.callbacks.base import Callback
        class GradientAccumulation(Callback):
            def steps_in_epoch(self, epoch): ...
            def state_dict(self): return {}
        class Deeper(GradientAccumulation):
            def __init__(self):
                self.window = 2  # an instance attribute: not probed by name

            @property
            def batches_for_epoch(self): ...
        class NotACallback:
            def steps_in_epoch(self): ...
        def helper(cb):
            return isinstance(cb, GradientAccumulation)  # inside callbacks/: allowed
        """,
    "callbacks/checkpoint.py": """
        from pkg.callbacks import base
        class ModelCheckpoint(base.Callback):
            last_checkpoint_path = None
            dirpath = None
        """,
    "trainer.py": """
        from pkg.callbacks import ModelCheckpoint as MC
        from pkg.callbacks.accumulation import Deeper, NotACallback
        class Trainer:
            dirpath = None
            def run(self, callbacks, items, other):
                isinstance(items[0], MC)
                isinstance(items[0], (int, callbacks_mod.Deeper))
                issubclass(type(other), Callback)
                isinstance(other, NotACallback)
                isinstance(other, dict)
                [cb.steps_in_epoch for cb in self.callbacks if hasattr(cb, "steps_in_epoch")]
                getattr(other, "last_checkpoint_path", None)
                getattr(other, "window", None)
                hasattr(other, "batches_for_epoch")
                hasattr(other, "state_dict")
                getattr(other, "dirpath", None)
                getattr(other, "steps_in_epoch")
                for i, c in enumerate(reversed(self.callbacks)):
                    hasattr(c, "anything")
                for c2 in items:
                    hasattr(c2, "anything")
                hasattr(callbacks[0], "x")
                getattr(callback, "y", None)
        """,
}


def test_callback_classes_are_collected(tmp_path: Path) -> None:
    package = make_package(tmp_path, CALLBACK_PACKAGE)
    assert callback_classes(package) == {
        "Callback",
        "GradientAccumulation",
        "Deeper",
        "ModelCheckpoint",
    }
    # dirpath is also the Trainer's; state_dict is Callback's; steps_in_epoch NotACallback's.
    assert callback_only_members(package) == {"last_checkpoint_path", "batches_for_epoch"}


def test_callback_type_checks_are_found(tmp_path: Path) -> None:
    package = make_package(tmp_path, CALLBACK_PACKAGE)
    found = [f.split(": ", 1)[1] for f in callback_type_checks(package)]
    assert found == [
        "isinstance(items[0], MC)",
        "isinstance(items[0], (int, callbacks_mod.Deeper))",
        "issubclass(type(other), Callback)",
        '[cb.steps_in_epoch for cb in self.callbacks if hasattr(cb, "steps_in_epoch")]',
        'getattr(other, "last_checkpoint_path", None)',
        'hasattr(other, "batches_for_epoch")',
        'hasattr(c, "anything")',
        'hasattr(callbacks[0], "x")',
        'getattr(callback, "y", None)',
    ]
    assert all(f.startswith("pkg/trainer.py:") for f in callback_type_checks(package))


def test_trainer_attribute_writes_are_found(tmp_path: Path) -> None:
    writes = """
        def run(trainer, module, self):
            trainer.logging_mode = "eval"
            trainer.batches_seen += 1
            self.trainer.current_batch: object = None
            self._trainer.x, other = 1, 2
            module.trainer.y = 3
            setattr(trainer, "z", 4)
            object.__setattr__(self.trainer, "w", 5)
            del trainer.v
            trainer.should_stop = True
            trainer.state.epoch = 1
            trainer.preemption.stopped_by = "SIGTERM"
            module.trainer.state.status = "done"
            trainer.results["loss"] = 0.5
            setattr(trainer.state, "epoch", 2)
            del self.trainer.state.flag
            trainer.callbacks[0].best = 1
            trainer.state.should_stop = True
            trainer.callbacks.append(1)
            other.attribute = trainer.value
            self._trainer = trainer
            trainer_options.x = 1
            self.strategy.environment = None
            strategy.environment = None
            setattr(trainer.strategy, "environment", None)
        """
    package = make_package(
        tmp_path,
        {"loops/fit.py": writes, "trainer/trainer.py": writes, "strategies/ddp.py": writes},
    )
    found = trainer_attribute_writes(package)
    on_trainer = [
        'trainer.logging_mode = "eval"',
        "trainer.batches_seen += 1",
        "self.trainer.current_batch: object = None",
        "self._trainer.x, other = 1, 2",
        "module.trainer.y = 3",
        'setattr(trainer, "z", 4)',
        'object.__setattr__(self.trainer, "w", 5)',
        "del trainer.v",
        "trainer.state.epoch = 1",
        'trainer.preemption.stopped_by = "SIGTERM"',
        'module.trainer.state.status = "done"',
        'trainer.results["loss"] = 0.5',
        'setattr(trainer.state, "epoch", 2)',
        "del self.trainer.state.flag",
        "trainer.callbacks[0].best = 1",
        "trainer.state.should_stop = True",  # only trainer.should_stop itself is public
    ]
    environment = [
        "self.strategy.environment = None",
        "strategy.environment = None",
        'setattr(trainer.strategy, "environment", None)',
    ]
    assert [f.split(": ", 1)[1] for f in found if f.startswith("pkg/loops/")] == [
        *on_trainer,
        *environment,
    ]
    assert [f.split(": ", 1)[1] for f in found if f.startswith("pkg/trainer/")] == environment
    assert [f.split(": ", 1)[1] for f in found if f.startswith("pkg/strategies/")] == [
        *on_trainer,
        'setattr(trainer.strategy, "environment", None)',  # written through the Trainer
    ]
    # Another owner: only the files it selects may write.
    owned = trainer_attribute_writes(package, lambda r: r.startswith("loops/"))
    assert not [f for f in owned if f.startswith("pkg/loops/") and "environment" not in f]


def test_dict_injections_are_found(tmp_path: Path) -> None:
    package = make_package(
        tmp_path,
        {
            "stages.py": """
                def attach(module, split):
                    module.__dict__["_stage_runner"] = split
                    module.__dict__.pop("_stage_runner", None)
                    module.__dict__.get("_stage_runner")
                    vars(module)["x"] = 1
                    del module.__dict__["x"]
                    self.__dict__["not_a_method"] = 1
                    names = list(module.__dict__)
                    module.__dict__.items()
                    return vars(module).keys()
                class Module:
                    def forward(self):
                        runner = self.__dict__.get("_stage_runner")
                        def inner():
                            return self.__dict__["y"]
                        other.__dict__.update(a=1)
                """,
            "core/module.py": "class M:\n    def f(self):\n        return self.__dict__.get('a')\n",
        },
    )
    found = [f.split(": ", 1)[1] for f in dict_injections(package)]
    assert found == [
        'module.__dict__["_stage_runner"] = split',
        'module.__dict__.pop("_stage_runner", None)',
        'module.__dict__.get("_stage_runner")',
        'vars(module)["x"] = 1',
        'del module.__dict__["x"]',
        'self.__dict__["not_a_method"] = 1',
        "other.__dict__.update(a=1)",
    ]
    assert dict_uses(package, _module_or_strategy) == [
        "pkg/core/module.py:3: return self.__dict__.get('a')"
    ]


def test_docstring_reads_are_found(tmp_path: Path) -> None:
    package = make_package(
        tmp_path,
        {
            "config.py": """
                import inspect
                from inspect import getdoc as gd
                text = Trainer.__doc__
                text = inspect.getdoc(Trainer)
                text = gd(Trainer)
                text = getattr(Trainer, "__doc__", "")
                make(namespace={"__doc__": "Set, not read."})
                doc = field(metadata={"doc": "the field's own help"})
                """,
            "cli.py": "import re\nHELP = {'doc': re.compile('x')}\n",
        },
    )
    found = [f.split(": ", 1)[1] for f in docstring_reads(package / "config.py", package)]
    assert found == [
        "text = Trainer.__doc__",
        "text = inspect.getdoc(Trainer)",
        "text = gd(Trainer)",
        'text = getattr(Trainer, "__doc__", "")',
    ]
    assert docstring_reads(package / "cli.py", package) == []


def test_forbidden_imports_are_found(tmp_path: Path) -> None:
    package = make_package(
        tmp_path,
        {
            "state.py": """
                from typing import TYPE_CHECKING
                from pkg import messages
                if TYPE_CHECKING:
                    from pkg.trainer import Trainer
                def f():
                    from pkg.rank_zero import rank
                """,
            "strategies/ddp.py": """
                import pkg.loop.inner
                from pkg import Trainer, messages
                from pkg.steps import thing
                """,
            "loop/inner.py": "",
            "messages.py": "",
            "rank_zero.py": "",
            "steps.py": "",
            "trainer.py": "",
        },
    )
    bottom = forbidden_imports(package, lambda r: r == "state.py", lambda t: t == "pkg.messages")
    assert bottom == ["pkg/state.py:7: from pkg.rank_zero import rank  [imports pkg.rank_zero]"]
    found = forbidden_imports(
        package,
        lambda r: r.startswith("strategies/"),
        _none_of("pkg.trainer", "pkg.loop", "pkg.step"),
        {"Trainer": "pkg.trainer"},
    )
    assert found == [
        "pkg/strategies/ddp.py:2: import pkg.loop.inner  [imports pkg.loop.inner]",
        "pkg/strategies/ddp.py:3: from pkg import Trainer, messages  [imports pkg.trainer]",
    ]


def test_size_limits_cover_the_strategies() -> None:
    listed = {relative for relative, _ in SIZE_LIMITS}
    assert {
        "loops/fit.py",
        "trainer/trainer.py",
        "strategies/__init__.py",
        "strategies/ddp.py",
    } <= listed


def test_oversized_modules_are_found(tmp_path: Path) -> None:
    package = make_package(
        tmp_path, {"a.py": "x = 1\n" * 3, "sub/b.py": "x = 1\n" * 5, "c.py": "x = 1\n" * 2}
    )
    assert oversized(package, 3) == ["a.py: 3 lines", "sub/b.py: 5 lines"]
    assert oversized(package, 6) == []


def test_lazy_public_names_are_read(tmp_path: Path) -> None:
    package = make_package(
        tmp_path,
        {
            "__init__.py": """
                _PUBLIC = {"Trainer": "pkg.trainer.trainer", "Module": "pkg.core.module"}
                def __getattr__(name): ...
                """
        },
    )
    assert lazy_public_names(package) == {
        "Trainer": "pkg.trainer.trainer",
        "Module": "pkg.core.module",
    }
    assert LAZY_PUBLIC_NAMES["Trainer"] == "trainkit.trainer.trainer"


LAYERED_PACKAGE = {
    "utilities/io.py": "",
    "trainer/options.py": "from pkg.utilities import io\n",
    "core/module.py": """
        from typing import TYPE_CHECKING
        from pkg.trainer.options import Options  # the bottom, by its own entry
        from pkg.utilities.io import save
        if TYPE_CHECKING:
            from pkg.trainer.trainer import Trainer  # type-only: not a layer import
        def log():
            from pkg.loops.results import store  # up, inside a function
        """,
    "loops/results.py": "from pkg.core.module import Module\n",
    "loops/fit.py": """
        from pkg import Trainer  # lazily the Trainer: up
        from pkg import Module  # lazily core.module: down
        from pkg.tuner.search import run  # allowed below
        """,
    "tuner/search.py": "from pkg.loops import fit\n",
    "trainer/trainer.py": "from pkg.loops.fit import run\nfrom pkg.tuner import search\n",
    "cli.py": "import pkg.trainer.trainer\n",
    "extra/new.py": "",
}
SYNTHETIC_LAYERS: Layers = (
    ("bottom", ("pkg.utilities", "pkg.trainer.options")),
    ("core", ("pkg.core",)),
    ("loops", ("pkg.loops",)),
    ("tuner", ("pkg.tuner",)),
    ("trainer", ("pkg.trainer",)),
    ("top", ("pkg", "pkg.cli")),
)
SYNTHETIC_LAZY = {"Trainer": "pkg.trainer.trainer", "Module": "pkg.core.module"}


def test_layer_of_takes_the_longest_entry() -> None:
    assert layer_of("pkg.trainer.options", SYNTHETIC_LAYERS) == 0
    assert layer_of("pkg.trainer", SYNTHETIC_LAYERS) == 4
    assert layer_of("pkg.trainer.trainer", SYNTHETIC_LAYERS) == 4
    assert layer_of("pkg", SYNTHETIC_LAYERS) == 5
    assert layer_of("pkg.cli", SYNTHETIC_LAYERS) == 5
    # The bare top package covers itself only, so a new package must be placed.
    assert layer_of("pkg.extra.new", SYNTHETIC_LAYERS) is None
    assert layer_of("pkg.trainerx", SYNTHETIC_LAYERS) is None


def test_unplaced_modules_are_found(tmp_path: Path) -> None:
    package = make_package(tmp_path, LAYERED_PACKAGE)
    assert unplaced_modules(package, SYNTHETIC_LAYERS) == ["pkg.extra", "pkg.extra.new"]


def test_layer_violations_are_found(tmp_path: Path) -> None:
    package = make_package(tmp_path, LAYERED_PACKAGE)
    found = layer_violations(package, SYNTHETIC_LAYERS, None, SYNTHETIC_LAZY)
    assert found == [
        "pkg/core/module.py:8: from pkg.loops.results import store  # up, inside a function"
        "  [core imports pkg.loops.results (loops)]",
        "pkg/loops/fit.py:2: from pkg import Trainer  # lazily the Trainer: up"
        "  [loops imports pkg.trainer.trainer (trainer)]",
        "pkg/loops/fit.py:4: from pkg.tuner.search import run  # allowed below"
        "  [loops imports pkg.tuner.search (tuner)]",
    ]
    allowed = {("loops/fit.py", "pkg.tuner.search"): "why"}
    assert layer_violations(package, SYNTHETIC_LAYERS, allowed, SYNTHETIC_LAZY) == found[:2]
    # Compliant: the upward imports made type-only or removed.
    (package / "core" / "module.py").write_text("from pkg.utilities.io import save\n")
    (package / "loops" / "fit.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import Trainer\n"
    )
    for cache in (_tree, _lines, imports):
        cache.cache_clear()
    assert layer_violations(package, SYNTHETIC_LAYERS, None, SYNTHETIC_LAZY) == []


def test_trainer_imports_are_found(tmp_path: Path) -> None:
    package = make_package(
        tmp_path,
        {
            "callbacks/base.py": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from pkg.trainer.trainer import Trainer
                """,
            "loops/fit.py": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from pkg import Trainer
                def run():
                    from pkg.trainer import trainer
                """,
            "checkpoint/files.py": "from pkg import Trainer, Module\n",
            "trainer/trainer.py": "",
            "trainer/properties.py": "from pkg.trainer.trainer import Trainer\n",
            "cli.py": "from pkg.trainer.trainer import Trainer\n",
        },
    )

    def above(module: str) -> bool:
        return module.startswith("pkg.trainer") or module == "pkg.cli"

    found = trainer_imports(
        package, "pkg.trainer.trainer", above, {"callbacks/": "hooks"}, SYNTHETIC_LAZY
    )
    assert found == [
        "pkg/checkpoint/files.py:1: from pkg import Trainer, Module  [at run time]",
        "pkg/loops/fit.py:4: from pkg import Trainer  [type-only, not listed]",
        "pkg/loops/fit.py:6: from pkg.trainer import trainer  [at run time]",
    ]
    listed = {"callbacks/": "hooks", "loops/fit.py": "hands it to hooks"}
    assert trainer_imports(package, "pkg.trainer.trainer", above, listed, SYNTHETIC_LAZY) == [
        "pkg/checkpoint/files.py:1: from pkg import Trainer, Module  [at run time]",
        "pkg/loops/fit.py:6: from pkg.trainer import trainer  [at run time]",
    ]

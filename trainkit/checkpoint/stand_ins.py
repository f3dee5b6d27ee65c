"""Safe loads of checkpoints whose hyperparameters hold objects.

A Module's hyperparameters may hold objects (a class, a loss, a ``Namespace``).
Lightning pickles them into its checkpoints as they are, and so does trainkit,
so that a project reading ``torch.load(path, weights_only=False)["hyper_parameters"]``
gets its objects back. A safe load (``weights_only=True``, trainkit's default)
runs no code from the file, so it cannot build them: :func:`load_with_stand_ins`
reads such a file with an inert stand-in in place of each object. Only the
hyperparameter entries may hold stand-ins (everything a resume needs is tensors
and plain values); a stand-in anywhere else is an error, as before.

What the stand-ins keep:

- a dict subclass Lightning or trainkit pickles hyperparameters in
  (``AttributeDict``) becomes a plain dict, with its items;
- a few harmless classes are built for real (``argparse.Namespace``, paths,
  dates, ``frozenset``);
- any other class is a :class:`StandIn` subclass named after it, and an object
  of it a :class:`StandIn` holding its pickled state; nothing of the class runs.

A caller that reads only a file's plain entries (its lineage and step) uses
:func:`plain_entries`, which reads the file's pickle with every stored class and
function, anywhere in it, replaced by an inert placeholder, and no tensor data.
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import pickle
import zipfile
from collections.abc import Iterable, Mapping
from typing import IO, Any, ClassVar

import torch

#: The entries of a checkpoint that may hold stand-ins: the hyperparameters of the
#: Module and DataModule, and the types they were saved as.
HPARAMS_ENTRIES = frozenset(
    prefix + key
    for prefix in ("", "datamodule_")
    for key in ("hyper_parameters", "hparams_type", "hparams_name")
)

#: Dict subclasses hyperparameters are pickled in: read back as plain dicts.
_DICT_CLASSES = frozenset(
    {
        "trainkit.core.hyperparameters.AttributeDict",
        "lightning.fabric.utilities.data.AttributeDict",
        "lightning_fabric.utilities.data.AttributeDict",
        "pytorch_lightning.utilities.parsing.AttributeDict",
        "lightning.pytorch.utilities.parsing.AttributeDict",
    }
)

#: Classes whose construction from pickled data runs nothing of the file's: built for real.
_HARMLESS: dict[str, Any] = {
    "argparse.Namespace": argparse.Namespace,
    "pathlib.PosixPath": pathlib.PosixPath,
    "pathlib.PurePosixPath": pathlib.PurePosixPath,
    "pathlib._local.PosixPath": pathlib.PosixPath,
    "pathlib._local.PurePosixPath": pathlib.PurePosixPath,
    "builtins.frozenset": frozenset,
    "datetime.date": datetime.date,
    "datetime.datetime": datetime.datetime,
    "datetime.timedelta": datetime.timedelta,
}


#: The harmless classes, as a set.
_BUILT = frozenset(_HARMLESS.values())


class _StandInType(type):
    def __repr__(cls) -> str:
        name = getattr(cls, "stored_name", "") or cls.__qualname__
        return f"<class {name} (not loaded: weights_only=True)>"


class StandIn(metaclass=_StandInType):
    """What a safe load puts in place of an object of a class it does not build.

    Its class is named after the stored one (``stored_name``), and it keeps the
    arguments and state the file stored, as data: nothing of the class runs.
    """

    #: The stored class, as ``module.QualifiedName``.
    stored_name: ClassVar[str] = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.arguments = args
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"<{type(self).stored_name} object (not loaded: weights_only=True)>"


class _DictMaker:
    # Stands for a dict subclass: unpickling makes a plain dict and fills it.
    def __new__(cls, *args: Any) -> dict[str, Any]:  # type: ignore[misc]
        return {}


def _stand_in(name: str) -> Any:
    if name in _HARMLESS:
        return _HARMLESS[name]
    if name in _DICT_CLASSES:
        return type("AttributeDict", (_DictMaker,), {})
    return _StandInType(name.rsplit(".", 1)[-1], (StandIn,), {"stored_name": name})


def holds_stand_in(value: Any, kinds: tuple[type, ...] = (StandIn, _StandInType)) -> bool:
    """Whether ``value`` is, or contains, a stand-in (or a stand-in class).

    Args:
        value: a loaded value.
        kinds: what counts: an object of one of these types (or of a subclass).

    Example:
        >>> holds_stand_in({"a": [1, {"b": _stand_in("x.Y")}]}), holds_stand_in({"a": 1})
        (True, False)
    """
    if isinstance(value, kinds):
        return True
    if isinstance(value, torch.Tensor):
        return False
    if isinstance(value, Mapping):
        return any(holds_stand_in(item, kinds) for item in value.values())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(holds_stand_in(item, kinds) for item in value)
    return False


def load_with_stand_ins(
    source: str | os.PathLike[str] | IO[bytes],
    map_location: Any,
    **kwargs: Any,
) -> Any:
    """``torch.load(source, weights_only=True)``, with stand-ins for stored objects.

    Args:
        source: a checkpoint file, or a binary file object open on one (read from
            its current position).
        map_location: as for ``torch.load``.
        **kwargs: passed to ``torch.load`` (``mmap``).

    Returns:
        What ``torch.load`` returns; a dict whose only stand-ins are in its
        hyperparameter entries.

    Raises:
        pickle.UnpicklingError: the file stores objects this cannot stand in for
            (a dict subclass other than those above), or stores them outside the
            hyperparameters; ``torch.load``'s own error, raised again.
    """
    opened = not isinstance(source, (str, os.PathLike))
    start = source.tell() if opened else 0  # type: ignore[union-attr]
    try:
        return torch.load(source, map_location=map_location, weights_only=True, **kwargs)
    except Exception as error:
        if "WeightsUnpickler error" not in str(error):
            raise
        first = error
    find = getattr(torch.serialization, "get_unsafe_globals_in_checkpoint", None)
    if find is None:  # an older torch cannot say which objects a file holds
        raise first
    if opened:
        source.seek(start)  # type: ignore[union-attr]
    names: Iterable[str] = find(source)
    allowed: list[tuple[Any, str]] = [(_stand_in(name), name) for name in names]
    if opened:
        source.seek(start)  # type: ignore[union-attr]
    try:
        with torch.serialization.safe_globals(allowed):  # type: ignore[arg-type]
            loaded = torch.load(source, map_location=map_location, weights_only=True, **kwargs)
    except Exception:
        raise first from None
    # Only the hyperparameters may hold what the stand-ins admitted (harmless classes
    # included): a resume reads the rest, which a trainkit file holds as plain data.
    admitted = (StandIn, _StandInType, *(kind for kind, _ in allowed if kind in _BUILT))
    if not isinstance(loaded, dict) or any(
        holds_stand_in(value, admitted)
        for key, value in loaded.items()
        if key not in HPARAMS_ENTRIES
    ):
        raise first
    return loaded


class _Inert(dict):  # type: ignore[type-arg]
    # What every stored class and function becomes in plain_entries: calling it,
    # building it and filling it (items, list items, state) keep nothing.
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def __setstate__(self, state: Any) -> None:
        pass

    def append(self, item: Any) -> None:
        pass

    def extend(self, items: Any) -> None:
        pass


class _InertUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return _Inert  # nothing is imported, so nothing of the file's runs

    def persistent_load(self, pid: Any) -> None:
        return None  # tensor data is not read


def plain_entries(path: str | os.PathLike[str]) -> Any:
    """What a checkpoint file stores, for a caller that reads only its plain entries.

    Reads the file's pickle alone (none of its tensor data) with every stored class
    and function, anywhere in the file (a Module's ``on_save_checkpoint`` may store
    objects of its own, numpy values among them), replaced by an empty placeholder:
    nothing is imported and nothing of the file runs. Dicts, lists, tuples, strings
    and numbers come back as stored; tensors and other objects as placeholders.

    Args:
        path: a file ``torch.save`` wrote (its zip format, torch's default).

    Returns:
        The stored value, with placeholders.

    Raises:
        zipfile.BadZipFile: the file is not in ``torch.save``'s zip format.
        pickle.UnpicklingError: its pickle is damaged.

    Example:
        >>> import tempfile
        >>> target = os.path.join(tempfile.mkdtemp(), "state.ckpt")
        >>> torch.save({"step": 3, "weights": torch.ones(2), "when": datetime.date.today()}, target)
        >>> entries = plain_entries(target)
        >>> entries["step"], type(entries["weights"]).__name__, type(entries["when"]).__name__
        (3, '_Inert', '_Inert')
    """
    with zipfile.ZipFile(path) as archive:
        name = next(
            (item for item in archive.namelist() if item.partition("/")[2] == "data.pkl"), None
        )
        if name is None:
            raise zipfile.BadZipFile(f"{os.fspath(path)} holds no data.pkl: not a torch.save file")
        with archive.open(name) as stored:
            return _InertUnpickler(stored).load()

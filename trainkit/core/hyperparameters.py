"""Hyperparameters: what ``save_hyperparameters`` records and how ``hparams`` reads it.

Shared by the Module and the DataModule. Checkpoints keep the recorded values,
so ``Module.load_from_checkpoint`` can rebuild the module from them.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import FrameType
from typing import Any

from torch import nn
from torch.utils.data import Dataset

#: The hyperparameter a config entry point records for a class given by its import
#: path (LightningCLI's name): ``load_from_checkpoint`` on a base class builds that class.
CLASS_PATH_KEY = "_class_path"

# While a config entry point builds a class: the class and the hyperparameters its
# config gave (see given_hyperparameters).
_GIVEN: ContextVar[tuple[type, dict[str, Any]] | None] = ContextVar(
    "trainkit_given_hyperparameters", default=None
)


@contextmanager
def given_hyperparameters(cls: type, values: dict[str, Any]) -> Iterator[None]:
    """While ``cls`` is built, ``save_hyperparameters()`` records ``values`` instead.

    LightningCLI (``load_from_checkpoint_support``) and the ``trainkit`` command build
    a Module from a config whose arguments may be classes given as ``class_path``
    entries; the objects ``__init__`` receives cannot be saved, the entries can.
    ``values`` are those config arguments and ``_instantiator`` (the import path of
    the function that rebuilds them), so ``load_from_checkpoint`` rebuilds the same
    classes. Only an instance of ``cls`` itself records them, once: a Module built
    inside its ``__init__`` records its own arguments.

    Args:
        cls: the class being built.
        values: the hyperparameters to record.
    """
    token = _GIVEN.set((cls, values))
    try:
        yield
    finally:
        _GIVEN.reset(token)


class AttributeDict(dict[str, Any]):
    """A dict whose keys read as attributes: ``hparams.lr`` and ``hparams["lr"]``.

    Kept for Lightning compatibility: ported code reads ``self.hparams.lr``.
    """

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError as error:
            raise AttributeError(
                f"hparams has no {key!r}; saved hyperparameters are {sorted(self)}."
            ) from error

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value


class HyperparametersMixin:
    """``save_hyperparameters``, ``hparams`` and ``hparams_initial`` (Module and DataModule).

    The values are created on first use, so a subclass that skips
    ``super().__init__()`` still works.
    """

    _hparams: AttributeDict | None = None
    _hparams_initial: AttributeDict | None = None
    _log_hyperparams: bool = True
    #: The ``__init__`` argument the hyperparameters came in as one dict ("kwargs": none).
    _hparams_name: str = "kwargs"
    #: The type of that one object (``DictConfig``, ``Namespace``, ...; None: none).
    _hparams_type: str | None = None

    @property
    def hparams(self) -> AttributeDict:
        """Hyperparameters recorded by :meth:`save_hyperparameters`."""
        found: AttributeDict | None = getattr(self, "_hparams", None)
        if found is None:
            found = AttributeDict()
            self._hparams = found
        return found

    @property
    def logs_hyperparams(self) -> bool:
        """Whether a run writes the hyperparameters to the loggers: some were recorded (by
        :meth:`save_hyperparameters`, even none, or set in ``hparams``) and its ``logger=``
        was not False."""
        recorded = getattr(self, "_hparams_initial", None) is not None or bool(self.hparams)
        return self._log_hyperparams and recorded

    @property
    def hparams_initial(self) -> AttributeDict:
        """The hyperparameters as :meth:`save_hyperparameters` recorded them (a copy)."""
        return _copied(getattr(self, "_hparams_initial", None) or {})

    def remove_ignored_hparams(self, ignore_list: list[str]) -> None:
        """Drop hyperparameters an earlier ``save_hyperparameters`` (a base class's) recorded.

        They leave ``hparams`` (what checkpoints keep, so ``load_from_checkpoint``
        no longer passes them) and ``hparams_initial`` (what loggers are given).

        Args:
            ignore_list: the names to drop; a name not recorded is skipped.
        """
        for name in ignore_list:
            self.hparams.pop(name, None)
            initial = getattr(self, "_hparams_initial", None)
            if initial is not None:
                initial.pop(name, None)

    def save_hyperparameters(
        self,
        *names: Any,
        ignore: list[str] | str | None = None,
        frame: FrameType | None = None,
        logger: bool = True,
    ) -> None:
        """Record the arguments of ``__init__`` as ``self.hparams``.

        Call it from your ``__init__`` (a dataclass Module: from ``__post_init__``; its
        ``init`` fields are recorded). The values are written to the loggers and
        saved in checkpoints, so a run can be rebuilt from them.

        Args:
            *names: record only these arguments (default: all of them); or one dict
                (or ``argparse.Namespace``) to record as it is.
            ignore: arguments not to record (for example a large model passed in); a
                base class's call that recorded them is undone for these names.
            frame: the ``__init__``'s frame to read the arguments from (default: the
                caller's), for a helper that ``__init__`` calls to record them.
            logger: write them to the loggers when fit starts.
        """
        self._log_hyperparams = logger
        ignored = {ignore} if isinstance(ignore, str) else set(ignore or ())
        if frame is None:
            here = inspect.currentframe()
            caller = here.f_back if here is not None else None
        else:
            caller = frame
        if any(not isinstance(name, str) for name in names):
            given = names[0]
            values = given if isinstance(given, Mapping) else getattr(given, "__dict__", given)
            if len(names) > 1 or not isinstance(values, Mapping):
                raise ValueError(  # Lightning's error type
                    "save_hyperparameters() takes argument names, or one dict or Namespace; "
                    f"got {', '.join(f'{name!r} ({type(name).__name__})' for name in names)}."
                )
            self.hparams.update(values)
            self.remove_ignored_hparams(sorted(ignored))
            self._hparams_initial = _copied(self.hparams)
            self._hparams_type = type(given).__name__
            # The __init__ argument that held them: load_from_checkpoint passes them back so.
            if caller is not None:
                held = [k for k, v in caller.f_locals.items() if v is given and k != "self"]
                if held:
                    self._hparams_name = held[0]
            return
        if dataclasses.is_dataclass(self):
            # A dataclass Module calls it from __post_init__: its fields are the arguments.
            arguments = {
                field.name: getattr(self, field.name)
                for field in dataclasses.fields(self)
                if field.init
            }
        elif caller is None or caller.f_code.co_name != "__init__":
            raise RuntimeError(
                "save_hyperparameters() must be called from your class's __init__ (or be given "
                "frame=, the frame of that __init__)."
            )
        else:
            # The arguments of the __init__ that called us and of the subclasses' __init__s
            # that called it through super().__init__ (not type(self).__init__'s signature:
            # a subclass may take other arguments, or none).
            arguments = chained_init_arguments(caller, self)
        recorded = {
            k: v for k, v in arguments.items() if k not in ignored and (not names or k in names)
        }
        given = _GIVEN.get()
        if given is not None and type(self) is given[0]:
            _GIVEN.set(None)  # once: not again for a Module built inside this __init__
            recorded = {
                k: v
                for k, v in given[1].items()
                if k.startswith("_") or (k not in ignored and (not names or k in names))
            }
        self.hparams.update(recorded)
        # A subclass's call drops what a base class's call recorded and it ignores.
        self.remove_ignored_hparams(sorted(ignored))
        self._hparams_initial = _copied(self.hparams)
        _warn_about_weights(recorded)


def _warn_about_weights(recorded: Mapping[str, Any]) -> None:
    # A network passed to __init__ is usually a submodule too: its weights are in the
    # state_dict already, and as a hyperparameter every checkpoint pickles it again. A
    # dataset would be pickled into every checkpoint too.
    for name, value in recorded.items():
        if isinstance(value, nn.Module) and any(True for _ in value.state_dict()):
            what = f"a {type(value).__name__} with weights: every checkpoint will store it a "
            what += "second time, pickled beside the state_dict. If it is a submodule, leave"
        elif isinstance(value, Dataset):
            what = f"a dataset ({type(value).__name__}): every checkpoint will store it, "
            what += "pickled. Leave"
        else:
            continue
        warnings.warn(
            f"save_hyperparameters() records {name!r}, {what} it out with "
            f"save_hyperparameters(ignore=[{name!r}]) and pass it to load_from_checkpoint.",
            stacklevel=3,
        )


def chained_init_arguments(frame: FrameType, obj: object) -> dict[str, Any]:
    """The arguments of the ``__init__`` running in ``frame`` and of those that called it.

    A subclass's ``__init__`` calling ``super().__init__(...)`` runs in the frame
    outside: its arguments (``hidden_size`` of a model whose base class records the
    hyperparameters) are collected too, frame by frame while they are ``__init__``
    methods of ``obj`` itself (a Module built inside another's ``__init__`` takes
    none of the outer one's). Where a name appears twice, the outermost ``__init__``
    (the most derived class, whose value the user passed) wins.

    Args:
        frame: the frame of the ``__init__`` that records them.
        obj: the object being built.

    Returns:
        The named parameters and the keywords ``**kwargs`` caught, of every level.
    """
    levels: list[dict[str, Any]] = []
    current: FrameType | None = frame
    while current is not None and (current is frame or constructed_object(current) is obj):
        named, extra = init_call_arguments(current)
        levels.append({**named, **extra})
        current = current.f_back
    arguments: dict[str, Any] = {}
    for level in levels:  # innermost first: the outer levels' values replace its own
        arguments.update(level)
    return arguments


def constructed_object(frame: FrameType) -> Any:
    """The object whose ``__init__`` runs in ``frame``; None if it is no class's ``__init__``."""
    code = frame.f_code
    if code.co_name != "__init__" or code.co_argcount == 0:
        return None
    local_vars = frame.f_locals
    self_name = code.co_varnames[0]
    if self_name not in local_vars:
        return None
    obj = local_vars[self_name]
    # The code must be the __init__ of a class of the object (decorated ones unwrapped),
    # so a function that merely has that name does not count.
    for cls in type(obj).__mro__:
        init = getattr(cls, "__init__", None)  # each class's own, or the one it inherits
        if init is not None and getattr(inspect.unwrap(init), "__code__", None) is code:
            return obj
    return None


def init_call_arguments(frame: FrameType) -> tuple[dict[str, Any], dict[str, Any]]:
    """The arguments of the ``__init__`` running in ``frame``, as its variables hold them now.

    Args:
        frame: the frame of a method whose first parameter is ``self``.

    Returns:
        The named parameters (``self`` and ``*args`` left out; one ``del``-ed in the
        body is missing), and the keyword arguments ``**kwargs`` caught.
    """
    code, local_vars = frame.f_code, frame.f_locals
    count = code.co_argcount + code.co_kwonlyargcount
    named = {name: local_vars[name] for name in code.co_varnames[1:count] if name in local_vars}
    extra: dict[str, Any] = {}
    if code.co_flags & inspect.CO_VARKEYWORDS:
        var_keyword = code.co_varnames[count + bool(code.co_flags & inspect.CO_VARARGS)]
        caught = local_vars.get(var_keyword)
        if isinstance(caught, Mapping):
            extra = dict(caught)
    return named, extra


def _copied(hparams: Mapping[str, Any]) -> AttributeDict:
    # A deep copy where the values allow one (a module passed in may not).
    try:
        return AttributeDict(copy.deepcopy(dict(hparams)))
    except Exception:
        return AttributeDict(hparams)

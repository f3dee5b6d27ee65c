"""Lightning's ``lightning.pytorch.utilities.parsing`` names, served by trainkit.

Helpers around hyperparameters and constructor arguments: whether a value can be
pickled (checkpoints pickle the hyperparameters), the arguments an ``__init__`` was
called with, read from its stack frame, and Lightning's attribute lookup that a
tuner uses for values such as ``batch_size`` or ``lr``: an attribute of the model,
a key of ``model.hparams``, or an attribute (or ``hparams`` key) of the DataModule
of the model's Trainer.

``save_hyperparameters`` is a method of trainkit's Module and DataModule, not a
function here.
"""

from __future__ import annotations

import inspect
import pickle
from argparse import Namespace
from collections.abc import MutableMapping
from types import FrameType
from typing import TYPE_CHECKING, Any

from trainkit.core.hyperparameters import AttributeDict, constructed_object, init_call_arguments
from trainkit.lightning.utilities.rank_zero import rank_zero_warn
from trainkit.tuner import values

if TYPE_CHECKING:
    from trainkit.core.module import Module

__all__ = [
    "AttributeDict",
    "clean_namespace",
    "collect_init_args",
    "get_init_args",
    "is_picklable",
    "lightning_getattr",
    "lightning_hasattr",
    "lightning_setattr",
    "parse_class_init_keys",
]


def is_picklable(obj: object) -> bool:
    """Whether ``pickle.dumps(obj)`` succeeds.

    Any exception raised while pickling means "no" (a lambda, a lock, a generator,
    an object whose ``__reduce__`` refuses).

    Args:
        obj: the object to try.

    Example:
        >>> import threading
        >>> is_picklable({"lr": 0.1}), is_picklable(lambda x: x), is_picklable(threading.Lock())
        (True, False, False)
    """
    try:
        pickle.dumps(obj)
    except Exception:
        return False
    return True


def clean_namespace(hparams: MutableMapping[str, Any] | Namespace) -> None:
    """Remove, in place, the entries of ``hparams`` that cannot be pickled, with a warning each.

    Checkpoints pickle the hyperparameters, so one such value would make saving fail.

    Args:
        hparams: a dict of hyperparameters (``AttributeDict``, say) or an
            ``argparse.Namespace`` (its attributes are removed).

    Example:
        >>> import warnings
        >>> hparams = {"lr": 0.1, "activation": lambda x: x}
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     clean_namespace(hparams)
        >>> hparams
        {'lr': 0.1}
        >>> print(caught[0].message)  # doctest: +NORMALIZE_WHITESPACE
        hparams: removed 'activation', its value cannot be pickled (checkpoints pickle the
        hyperparameters). Leave it out with save_hyperparameters(ignore=['activation'])
        to silence this warning.
    """
    # A Namespace keeps its attributes in __dict__, which vars() hands out as it is.
    entries = hparams if isinstance(hparams, MutableMapping) else vars(hparams)
    for name in [name for name, value in entries.items() if not is_picklable(value)]:
        rank_zero_warn(
            f"hparams: removed {name!r}, its value cannot be pickled (checkpoints pickle the "
            f"hyperparameters). Leave it out with save_hyperparameters(ignore=[{name!r}]) to "
            "silence this warning.",
            stacklevel=5,  # the line that called clean_namespace
        )
        del entries[name]


def parse_class_init_keys(cls: type) -> tuple[str, str | None, str | None]:
    """The names ``cls.__init__`` gives ``self``, ``*args`` and ``**kwargs``.

    Args:
        cls: the class.

    Returns:
        The first parameter's name, then the names of the ``*`` and ``**``
        parameters (None where there is none).

    Example:
        >>> class Net:
        ...     def __init__(this, width, *layers, depth=2, **options): ...
        >>> parse_class_init_keys(Net)
        ('this', 'layers', 'options')
        >>> class Plain:
        ...     def __init__(self, width): ...
        >>> parse_class_init_keys(Plain)
        ('self', None, None)
    """
    parameters = list(inspect.signature(cls.__init__).parameters.values())  # type: ignore[misc]
    if not parameters:
        raise ValueError(
            f"parse_class_init_keys({cls.__name__}): its __init__ takes no parameters, not even "
            "self; define it as a method, def __init__(self, ...)."
        )

    def first_of(kind: inspect._ParameterKind) -> str | None:
        return next((p.name for p in parameters if p.kind == kind), None)

    return (
        parameters[0].name,
        first_of(inspect.Parameter.VAR_POSITIONAL),
        first_of(inspect.Parameter.VAR_KEYWORD),
    )


def get_init_args(frame: FrameType | None) -> dict[str, Any]:
    """The arguments of the ``__init__`` running in ``frame``, by name.

    Keyword arguments caught by ``**kwargs`` are included by their own names;
    ``self`` and ``*args`` are left out. The values are what the variables hold
    now, so an argument ``__init__`` reassigned before this call reads as changed.

    Args:
        frame: the frame of a class's ``__init__``, usually ``inspect.currentframe()``
            inside it.

    Returns:
        The arguments; empty if ``frame`` is None or not the frame of an ``__init__``.

    Example:
        >>> import inspect
        >>> class Net:
        ...     def __init__(self, width, *layers, depth=2, **options):
        ...         self.init_args = get_init_args(inspect.currentframe())
        >>> Net(4, "conv", "pool", activation="relu").init_args
        {'width': 4, 'depth': 2, 'activation': 'relu'}
    """
    if frame is None or constructed_object(frame) is None:
        return {}
    named, extra = init_call_arguments(frame)
    return {**named, **extra}


def collect_init_args(
    frame: FrameType | None,
    path_args: list[dict[str, Any]],
    inside: bool = False,
    classes: tuple[type, ...] = (),
) -> list[dict[str, Any]]:
    """The arguments of each ``__init__`` of one object's class hierarchy on the stack.

    From ``frame`` outwards, frames are skipped up to the first ``__init__`` (of an
    instance of ``classes``, when given); from there the arguments of every
    ``__init__`` running for that same object are collected, a subclass's after its
    base class's, until a frame that is not one.

    Args:
        frame: where to start, usually ``inspect.currentframe()`` in an ``__init__``.
        path_args: the list the arguments are appended to (and returned).
        inside: already inside the chain: stop at the first frame that is not an
            ``__init__`` instead of skipping it.
        classes: only the ``__init__`` of instances of these classes count (all, if empty).

    Returns:
        ``path_args``, with one dict per ``__init__`` (see :func:`get_init_args`); the last
        is the most derived class's.

    Example:
        >>> import inspect
        >>> class Base:
        ...     def __init__(self, width, **options):
        ...         self.chain = collect_init_args(inspect.currentframe(), [])
        >>> class Net(Base):
        ...     def __init__(self, depth, width=8):
        ...         super().__init__(width * 2, activation="relu")
        >>> Net(3).chain
        [{'width': 16, 'activation': 'relu'}, {'depth': 3, 'width': 8}]
    """
    owner: Any = None  # the object whose constructors are being collected
    while frame is not None:
        constructed = constructed_object(frame)
        counts = constructed is not None and (not classes or isinstance(constructed, classes))
        # Only the same object's constructors belong to the chain: a Module built inside
        # another object's __init__ does not take that object's arguments.
        if counts and (owner is None or constructed is owner):
            owner = constructed
            path_args.append(get_init_args(frame))
            inside = True
        elif inside:
            break
        frame = frame.f_back
    return path_args


def _datamodule(model: Module) -> Any:
    # The tuner's rule (trainkit.tuner.values) looks at the DataModule of the Trainer
    # the model is attached to, if any.
    trainer = getattr(model, "_trainer", None)  # not model.trainer: that raises without one
    return getattr(trainer, "datamodule", None)


def lightning_hasattr(model: Module, attribute: str) -> bool:
    """Whether ``attribute`` is on the model, in ``model.hparams``, or on the DataModule.

    The DataModule (or its ``hparams``) counts while the model is attached to a
    Trainer that runs one (during and after ``fit(model, datamodule=...)``).

    Args:
        model: the Module.
        attribute: the name to look for.

    Example:
        >>> import trainkit
        >>> class Net(trainkit.Module):
        ...     def __init__(self, lr=0.1):
        ...         super().__init__()
        ...         self.save_hyperparameters()
        >>> lightning_hasattr(Net(), "lr"), lightning_hasattr(Net(), "batch_size")
        (True, False)
    """
    return bool(values.holders(model, _datamodule(model), attribute))


def lightning_getattr(model: Module, attribute: str) -> Any:
    """The value of ``attribute`` from the model, ``model.hparams`` or the DataModule.

    The places are looked at in that order (the DataModule's attribute before its
    ``hparams``); when several hold it, the last one's value is returned, as
    Lightning does: the DataModule's, which is what builds the dataloaders.

    Args:
        model: the Module.
        attribute: the name to read.

    Raises:
        AttributeError: none of those places holds ``attribute``.

    Example:
        >>> import trainkit
        >>> class Net(trainkit.Module):
        ...     def __init__(self, lr=0.1):
        ...         super().__init__()
        ...         self.save_hyperparameters()
        >>> lightning_getattr(Net(lr=0.02), "lr")
        0.02
    """
    places = values.held(model, _datamodule(model), attribute, type(model).__name__)
    return values.read(places, attribute)


def lightning_setattr(model: Module, attribute: str, value: Any) -> None:
    """Set ``attribute`` to ``value`` in every place :func:`lightning_getattr` finds it.

    The model, ``model.hparams``, the DataModule and its ``hparams`` all get the
    new value where they have the attribute, so they agree afterwards; no place
    that lacks it gains it.

    Args:
        model: the Module.
        attribute: the name to set.
        value: the new value.

    Raises:
        AttributeError: none of those places holds ``attribute``.

    Example:
        >>> import trainkit
        >>> class Net(trainkit.Module):
        ...     def __init__(self, lr=0.1):
        ...         super().__init__()
        ...         self.save_hyperparameters()
        ...         self.lr = lr
        >>> net = Net()
        >>> lightning_setattr(net, "lr", 0.5)
        >>> net.lr, net.hparams.lr
        (0.5, 0.5)
    """
    places = values.held(model, _datamodule(model), attribute, type(model).__name__)
    values.write(places, attribute, value)

"""Lightning's ``lightning.pytorch.trainer.trainer``: the Trainer ported code builds.

``trainkit.lightning.Trainer`` is trainkit's :class:`~trainkit.Trainer` with
Lightning's defaults where the two differ: its default logger writes to
``lightning_logs/version_N`` under ``default_root_dir`` (``trainkit.Trainer``
writes to ``logs/version_N``), so a ported project finds its logs and
checkpoints where its code and tests look; it reads Lightning's entry-point
groups for callbacks; and a NaN or infinite training loss trains on, as under
Lightning, with one warning naming the step (``NonFiniteLoss("warn")``, where
``trainkit.Trainer`` stops); and, as Lightning's, it takes the arguments not given
to it from ``PL_TRAINER_<NAME>`` environment variables. Everything else is the same
class.
"""

from __future__ import annotations

import ast
import inspect
import os
import typing
from typing import TYPE_CHECKING, Any, Union

from trainkit.callbacks.defaults import CALLBACKS_FACTORY
from trainkit.lightning.loggers._folder import _LightningLogs
from trainkit.lightning.loggers.tensorboard import TensorBoardLogger
from trainkit.lightning.strategies._ported import _LightningStrategy
from trainkit.trainer.trainer import Trainer as _Trainer

__all__ = ["Trainer"]


class Trainer(_Trainer):
    """trainkit's Trainer, logging by default to ``lightning_logs/`` as Lightning's does.

    Example:
        >>> import tempfile, trainkit.lightning as L
        >>> root = tempfile.mkdtemp()
        >>> L.Trainer(default_root_dir=root).logger.log_dir == f"{root}/lightning_logs/version_0"
        True
    """

    # The ported class: a project's isinstance(trainer.logger, TensorBoardLogger) holds.
    _default_logger = (TensorBoardLogger, "lightning_logs")
    # Lightning trains on through a non-finite loss; the ported Trainer says so once.
    _nonfinite_action = "warn"
    # Lightning's groups too (and the older package's): a ported project's callbacks.
    _callback_groups = (
        CALLBACKS_FACTORY,
        "lightning.pytorch.callbacks_factory",
        "pytorch_lightning.callbacks_factory",
    )

    if not TYPE_CHECKING:  # type checkers see trainkit's Trainer's own, typed __init__

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**_from_environment(len(args)), **kwargs})


#: Lightning's names for the Trainer's arguments set in the environment.
ENV_PREFIX = "PL_TRAINER_"


def _from_environment(given_positionally: int) -> dict[str, Any]:
    """The Trainer arguments set as ``PL_TRAINER_<NAME>`` variables, as Lightning reads
    them (``PL_TRAINER_MAX_EPOCHS=3``; Python literals, else the text): defaults that
    arguments given to ``Trainer(...)`` override.

    Args:
        given_positionally: how many arguments the call gave by position.
    """
    names = [
        name
        for name in list(inspect.signature(_Trainer.__init__).parameters)[1 + given_positionally :]
        if name not in TRAINKIT_ONLY
    ]
    found: dict[str, Any] = {}
    for name in names:
        text = os.environ.get(ENV_PREFIX + name.upper())
        if text is not None:
            try:
                found[name] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                found[name] = text
    return found


#: trainkit's own Trainer arguments, which Lightning's Trainer does not take: accepted
#: by the ported Trainer, but not in the signature it shows. Projects that build the
#: Trainer's arguments from that signature (pytorch_tabular filters its config, which
#: has a ``seed``, through it) then pass what they would pass to Lightning's.
TRAINKIT_ONLY = frozenset({"seed", "compile", "process_group_timeout", "resume_mismatch"})


def _ported_signature() -> inspect.Signature | None:
    """trainkit's Trainer signature without :data:`TRAINKIT_ONLY`, with the loggers
    ported to ``lightning_logs`` first among ``logger``'s types: a config's ``logger:
    CSVLogger`` (or ``TensorBoardLogger``) then means the ported class, as in
    Lightning, where trainkit's own has the same name. The same for ``strategy:
    DDPStrategy`` (or ``FSDPStrategy``).
    """
    try:
        hints = typing.get_type_hints(_Trainer.__init__)
    except Exception:  # an annotation that cannot be resolved: keep the inherited one
        return None

    first = {"logger": _LightningLogs, "strategy": _LightningStrategy}

    def annotation(parameter: inspect.Parameter) -> Any:
        hint = hints.get(parameter.name, parameter.annotation)
        ported = first.get(parameter.name)
        return hint if ported is None else typing.cast(Any, Union)[ported, hint]

    signature = inspect.signature(_Trainer.__init__)
    parameters = [
        p.replace(annotation=annotation(p))
        for p in signature.parameters.values()
        if p.name not in TRAINKIT_ONLY
    ]
    return signature.replace(parameters=parameters, return_annotation=None)


if not TYPE_CHECKING:
    Trainer.__init__.__signature__ = _ported_signature()

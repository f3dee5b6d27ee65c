"""What the strategies ported under Lightning's names share.

``trainkit.lightning.strategies.DDPStrategy`` (and ``FSDPStrategy``) extend
trainkit's classes of the same name with Lightning's constructor arguments.
Lightning's Trainer builds its own ``DDPStrategy`` for ``strategy="ddp"``, and
projects ask ``isinstance(trainer.strategy, DDPStrategy)`` to know they run DDP;
trainkit's Trainer builds trainkit's class. So each ported class stands for the
class it extends: ``isinstance`` and ``issubclass`` hold for it (the ported class
adds only its constructor); trainkit's subclasses of that class do not (trainkit's
FSDPStrategy extends its DDPStrategy; Lightning's FSDPStrategy is no DDPStrategy),
nor does a project's subclass of the ported class stand for more than itself.

They also derive from :class:`_LightningStrategy`, which the ported Trainer's
signature lists first among ``strategy``'s types, so that a config's short name
``DDPStrategy`` means the ported class, as ``lightning.pytorch`` has one; a full
class path picks either.
"""

from __future__ import annotations

from abc import ABCMeta
from typing import Any

from trainkit.strategies.base import Strategy


class _StandsForExtended(ABCMeta):
    """The metaclass of a ported strategy: the class it extends (trainkit's class of the
    same name, not that class's subclasses) counts as the ported class in ``isinstance``
    and ``issubclass``."""

    def __instancecheck__(cls, instance: Any) -> bool:
        return cls.__subclasscheck__(type(instance))

    def __subclasscheck__(cls, subclass: Any) -> bool:
        # The extended class itself: trainkit's FSDPStrategy extends its DDPStrategy,
        # where Lightning's FSDPStrategy is no DDPStrategy.
        if subclass is not None and subclass is _EXTENDED.get(cls):
            return True
        return super().__subclasscheck__(subclass)


#: Each ported class -> trainkit's class it extends and stands for.
_EXTENDED: dict[type, type] = {}


class _LightningStrategy(Strategy, metaclass=_StandsForExtended):
    """A strategy under Lightning's name (see the module's docstring).

    A subclass names trainkit's class it stands for as a class argument:
    ``class DDPStrategy(_DDPStrategy, _LightningStrategy, extends=_DDPStrategy)``.
    """

    def __init_subclass__(cls, extends: type[Strategy] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if extends is not None:
            _EXTENDED[cls] = extends

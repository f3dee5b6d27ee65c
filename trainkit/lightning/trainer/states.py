"""Lightning's ``lightning.pytorch.trainer.states`` names, served by trainkit.

``TrainerState`` is the class of ``trainer.state`` (trainkit's run state), whose
``fn``, ``stage`` and ``status`` equal these enums' members.
"""

from __future__ import annotations

from trainkit.loops.state import RunningStage, TrainerFn, TrainerStatus
from trainkit.loops.state import RunState as TrainerState

__all__ = ["RunningStage", "TrainerFn", "TrainerState", "TrainerStatus"]

"""Lightning's ``lightning.pytorch.trainer.states`` names, served by trainkit."""

from __future__ import annotations

from trainkit.loops.state import RunningStage, TrainerFn, TrainerStatus

__all__ = ["RunningStage", "TrainerFn", "TrainerStatus"]

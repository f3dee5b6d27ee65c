"""TrainState: the loop's counters, everything a resumed run needs to continue."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

STAGES = ("fit", "validate", "test", "predict")


@dataclass
class TrainState:
    """Where the run is.

    Attributes:
        stage: "fit", "validate", "test" or "predict" while running, else None.
        epoch: the current epoch, counted from 0.
        global_step: optimizer steps taken so far.
        batch_idx: batches consumed in the current epoch.
        should_stop: set (by a callback or the module) to stop at the next check.
        sanity_checking: True while the pre-fit validation sanity check runs.
        epoch_start_rng: the random states the current epoch's data order was drawn
            from (see ``trainkit.loop.capture_data_rng``); a mid-epoch resume needs it.
    """

    stage: str | None = None
    epoch: int = 0
    global_step: int = 0
    batch_idx: int = 0
    should_stop: bool = False
    sanity_checking: bool = False
    epoch_start_rng: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, Any]:
        """The counters to save in a checkpoint."""
        state = asdict(self)
        del state["stage"], state["sanity_checking"]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore counters saved by :meth:`state_dict`.

        Args:
            state: the saved counters.
        """
        self.epoch = int(state["epoch"])
        self.global_step = int(state["global_step"])
        self.batch_idx = int(state["batch_idx"])
        self.should_stop = bool(state.get("should_stop", False))
        self.epoch_start_rng = state.get("epoch_start_rng")

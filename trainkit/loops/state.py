"""RunState: where a run is. Everything a resume restores, and the run's status.

The loop, the evaluation and the checkpoint code receive this object and write
to it; the Trainer's read-only properties (``current_epoch``, ``global_step``,
``sanity_checking``, ...) read it. Adding a counter that a resume must restore
is adding a field here: :meth:`RunState.state_dict` saves every field not
marked ``resume=False``.

The names follow Lightning's: ``fn`` is the entry point that runs
(``TrainerFn``: fit, validate, test, predict), ``stage`` what runs right now
(``RunningStage``: train, sanity_check, validate, test, predict), ``status`` how
the run stands (``TrainerStatus``: initializing, running, finished, interrupted).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

#: The entry points (Lightning's TrainerFn).
FNS = ("fit", "validate", "test", "predict")
#: What runs right now (Lightning's RunningStage).
STAGES = ("train", "sanity_check", "validate", "test", "predict")
#: How the run stands (Lightning's TrainerStatus).
STATUSES = ("initializing", "running", "finished", "interrupted")


class TrainerFn(str, Enum):
    """The entry points, as Lightning names them; equal to the strings ``RunState.fn`` holds.

    The ``stage`` the ``setup``/``teardown`` hooks get, as Lightning passes it: it
    equals its string, and prints as Lightning's does (``.value`` is the string):

    Example:
        >>> stage = TrainerFn("fit")
        >>> stage == "fit", stage.value, f"{stage}"
        (True, 'fit', 'TrainerFn.FITTING')
    """

    FITTING = "fit"
    VALIDATING = "validate"
    TESTING = "test"
    PREDICTING = "predict"


class RunningStage(str, Enum):
    """What runs now, as Lightning names it; equal to the strings ``RunState.stage`` holds.

    Example:
        >>> RunningStage.SANITY_CHECKING.evaluating, RunningStage.SANITY_CHECKING.dataloader_prefix
        (True, 'val')
    """

    TRAINING = "train"
    SANITY_CHECKING = "sanity_check"
    VALIDATING = "validate"
    TESTING = "test"
    PREDICTING = "predict"

    @property
    def evaluating(self) -> bool:
        """Whether the stage runs an evaluation loop (the sanity check, validation, test)."""
        return self in (RunningStage.VALIDATING, RunningStage.TESTING, RunningStage.SANITY_CHECKING)

    @property
    def dataloader_prefix(self) -> str:
        """The prefix of the stage's dataloader hook: ``"val"`` for the sanity check and
        validation (``val_dataloader``), else the stage's value."""
        if self in (RunningStage.VALIDATING, RunningStage.SANITY_CHECKING):
            return "val"
        return str(self.value)


class TrainerStatus(str, Enum):
    """How the run stands, as Lightning names it; equal to ``RunState.status``'s strings."""

    INITIALIZING = "initializing"
    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"


def _status(default: Any) -> Any:
    # A field that describes the run now, not its progress: a resume does not restore it.
    return field(default=default, metadata={"resume": False})


@dataclass
class RunState:
    """Where the run is.

    Example:
        >>> state = RunState(epoch=2, global_step=40)
        >>> restored = RunState()
        >>> restored.load_state_dict(state.state_dict())
        >>> restored.epoch, restored.global_step, restored.fn
        (2, 40, None)
    """

    # ------------------------------------------------ status (not restored)
    #: The entry point running (or the last one run): "fit", "validate", "test", "predict".
    fn: str | None = _status(None)
    #: What runs now: "train", "sanity_check", "validate", "test" or "predict".
    stage: str | None = _status(None)
    #: "initializing", "running", "finished" or "interrupted" (ended by an error or Ctrl-C).
    status: str = _status(TrainerStatus.INITIALIZING)
    #: True after fit stopped for a preemption signal (a checkpoint was saved first).
    preempted: bool = _status(False)
    #: Set in on_fit_start by a tuner that changed the batch size: fit builds the
    #: dataloaders again before training (BatchSizeFinder).
    reload_dataloaders: bool = _status(False)
    #: Whether the training batch running now is the epoch's last.
    is_last_batch: bool = _status(False)
    #: Batches per training epoch (after limit_train_batches; inf when unknown).
    num_training_batches: float = _status(0.0)
    #: Batches run from each validation dataloader in the current validation run.
    num_val_batches: list[float] = field(default_factory=list, metadata={"resume": False})
    #: Batches run from each test dataloader.
    num_test_batches: list[float] = field(default_factory=list, metadata={"resume": False})
    #: Batches run from each prediction dataloader.
    num_predict_batches: list[float] = field(default_factory=list, metadata={"resume": False})
    #: Where the training epoch stands: 0 none running, 1 its batches run, 2 its end
    #: hooks run (``trainer.fit_loop.epoch_progress`` reads it).
    epoch_phase: int = _status(0)
    #: ``batches_seen`` when the running epoch started (its batches are counted from it).
    epoch_first_batch: int = _status(0)
    #: Whether a fit of this Trainer ended normally: the next fit continues from its
    #: progress, as Lightning's does (see :meth:`start_fit`).
    fit_ended: bool = _status(False)
    #: The epoch a fit resumed in the middle of (None: it started at an epoch's
    #: beginning); ``trainer.fit_loop.restarting`` holds until that epoch ends.
    restarted_epoch: int | None = _status(None)
    #: The positions of the training loaders that keep their own: the saved ones, for
    #: the epoch a fit resumed inside; while an epoch of such loaders without a length
    #: runs, theirs as of the running batch (``trainkit.core.epoch_position.epoch_batches``).
    loader_states: list[Any] = field(default_factory=list, metadata={"resume": False})

    # ------------------------------------------------ progress (restored)
    #: The current epoch, counted from 0.
    epoch: int = 0
    #: Optimizer steps taken so far.
    global_step: int = 0
    #: Batches consumed in the current epoch.
    batch_idx: int = 0
    #: Set by a callback or the module to stop at the next check.
    should_stop: bool = False
    #: Training batches started across epochs and fits (``trainer.fit_loop.total_batch_idx``
    #: + 1; a val_check_interval counted across epochs reads it).
    batches_seen: int = 0
    #: Samples all processes take per batch (None when the loader has no batch size):
    #: lets a resume under another number of processes or batch size continue the epoch.
    samples_per_step: int | None = None
    #: The random states the current epoch's data order was drawn from; a
    #: mid-epoch resume needs them (see ``trainkit.core.epoch_position.epoch_batches``).
    epoch_start_rng: dict[str, Any] | None = None
    #: Identifies a training run across its resumes (saved in its checkpoints).
    lineage: str | None = None

    @property
    def finished(self) -> bool:
        """Whether the last run ended normally."""
        return self.status == "finished"

    @property
    def stopped(self) -> bool:
        """Whether the last run was interrupted (an error, Ctrl-C or a signal's stop)."""
        return self.status == "interrupted"

    @property
    def sanity_checking(self) -> bool:
        """Whether the pre-fit validation sanity check runs."""
        return self.stage == "sanity_check"

    def start_fit(self, lineage: str, resuming: bool = False) -> None:
        """Set the progress up for a fit.

        After a fit of this Trainer that ended normally, the progress (epoch,
        steps, counted batches) is kept: the new fit continues from it, as a
        second ``fit`` of a Lightning Trainer does (with ``max_epochs`` raised it
        trains the epochs in between; without, it trains nothing). Otherwise, or
        when a checkpoint is about to be restored, the progress starts at zero.

        Args:
            lineage: the new run's identity (a continued fit keeps its own).
            resuming: a checkpoint's state will be restored.
        """
        self.preempted, self.epoch_phase = False, 0
        self.restarted_epoch, self.loader_states = None, []
        if self.fit_ended and not resuming:
            self.fit_ended = False
            return  # it ended at an epoch's end: batch_idx is 0, no epoch is running
        self.fit_ended = False
        for name, default in _resume_defaults(type(self)).items():
            setattr(self, name, default)
        self.lineage = lineage
        self.epoch_first_batch = 0

    def state_dict(self) -> dict[str, Any]:
        """Every field a resume restores."""
        return {name: getattr(self, name) for name in _resume_defaults(type(self))}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved; fields an older checkpoint lacks keep their value.

        Args:
            state: the saved fields.
        """
        for name in _resume_defaults(type(self)):
            if name in state:
                setattr(self, name, state[name])


def _resume_defaults(kind: type[RunState]) -> dict[str, Any]:
    # Every field not marked resume=False, with its default.
    return {f.name: f.default for f in fields(kind) if f.metadata.get("resume", True)}

"""``trainer.fit_loop``: Lightning's loop objects, as a view of trainkit's run state.

trainkit's fit loop is a function over a run state (``trainkit/loops/fit.py``),
not a tree of loop objects. Ported code still reads and sets the loop's limits
and progress under Lightning's names::

    trainer.fit_loop.max_epochs += 5          # then trainer.fit(...) trains 5 more epochs
    trainer.fit_loop.epoch_loop.max_steps = 1000
    step = trainer.fit_loop.total_batch_idx   # the batch running, counted across epochs
    trainer.fit_loop.epoch_progress.current.completed   # epochs done

:class:`FitLoop` gives those names; each reads or changes the Trainer's options
and run state, so nothing here holds a value of its own. A limit set while
``fit`` runs is checked at the next batch (``max_steps``) or epoch
(``max_epochs``, ``min_epochs``, ``min_steps``), and holds for later fits of
the Trainer. The progress counters are read-only (``current`` and ``total``
count the same batches and epochs: trainkit restores them exactly on a resume).
Each loop's ``_data_source`` says where its dataloaders come from
(``fit_loop.epoch_loop.val_loop._data_source.is_defined()``: whether fit has
validation data; see ``trainkit/trainer/data_source.py``). What Lightning's
loops do beyond this (``connect``, ``run``, ``advance``, their other private
methods) is not provided: docs/porting.md says what to use instead.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from trainkit.loops.dataloaders import fit_validates
from trainkit.loops.schedule import limits_reached, max_steps_reached, minimums_reached
from trainkit.trainer.data_source import DataSource
from trainkit.trainer.evaluation_loops import FitValidationLoop
from trainkit.utilities.combined_loader import CombinedBatches, CombinedLoader

if TYPE_CHECKING:
    from collections.abc import Callable

    from trainkit.loops.state import RunState

__all__ = ["EpochLoop", "FitLoop", "Progress", "Tracker"]


class Tracker:
    """Counts of one kind of item (epochs or batches): ``ready``, ``started``,
    ``processed`` and ``completed``, as Lightning's progress trackers name them.

    Read-only: the loop owns the counts.
    """

    __slots__ = ("completed", "processed", "ready", "started")
    _ORDER = ("ready", "started", "processed", "completed")

    ready: int
    started: int
    processed: int
    completed: int

    def __init__(self, ready: int, started: int, processed: int, completed: int) -> None:
        for name, value in zip(self._ORDER, (ready, started, processed, completed), strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"trainer.fit_loop's progress is read-only in trainkit (setting {name!r}): the run "
            "state owns it. To train a number of epochs more, raise trainer.fit_loop.max_epochs "
            "and call fit again; to continue a saved run, pass fit(ckpt_path=...)."
        )

    def __repr__(self) -> str:
        counts = ", ".join(f"{name}={getattr(self, name)}" for name in self._ORDER)
        return f"Tracker({counts})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tracker):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    __hash__ = None  # type: ignore[assignment]


class Progress:
    """``current`` and ``total`` counts, read from the run state when asked.

    Args:
        current: the counts of the epoch running (for batches) or of the run (for epochs).
        total: the counts of the whole run, across epochs and fits (None: ``current``'s).
    """

    def __init__(
        self, current: Callable[[], Tracker], total: Callable[[], Tracker] | None = None
    ) -> None:
        self._current, self._total = current, total or current

    @property
    def current(self) -> Tracker:
        """The counts of the epoch running (batches), or of the run (epochs)."""
        return self._current()

    @property
    def total(self) -> Tracker:
        """The counts of the whole run (epochs: the same as ``current``: trainkit restores
        progress exactly, so nothing starts it again)."""
        return self._total()

    def __repr__(self) -> str:
        return f"Progress(current={self.current!r})"


def _batch_counts(state: RunState) -> tuple[int, int]:
    """Training batches (started, completed) in the epoch running or last run."""
    started = state.batches_seen - state.epoch_first_batch
    # While its batches run, state.batch_idx is the count completed (inside a batch
    # that batch's index, after it the next one's); after the epoch, all started.
    return started, (state.batch_idx if state.epoch_phase == 1 else started)


class EpochLoop:
    """Lightning's ``fit_loop.epoch_loop``: one epoch's batches, and ``max_steps``."""

    def __init__(self, loop: FitLoop) -> None:
        self._loop = loop
        #: Batches of the epoch running (or last run): ``current``; of the whole run: ``total``.
        self.batch_progress = Progress(self._batches, self._all_batches)
        #: The validation inside fit: where its dataloaders come from (``_data_source``).
        self.val_loop = FitValidationLoop(loop.trainer)

    @property
    def restarting(self) -> bool:
        """The fit loop's :attr:`FitLoop.restarting`: the epoch running resumed in its middle."""
        return self._loop.restarting

    def _batches(self) -> Tracker:
        started, completed = _batch_counts(self._loop.state)
        return Tracker(started, started, completed, completed)

    def _all_batches(self) -> Tracker:
        state = self._loop.state
        started, completed = _batch_counts(state)
        done = state.batches_seen - (started - completed)
        return Tracker(state.batches_seen, state.batches_seen, done, done)

    @property
    def max_steps(self) -> int:
        """Stop after this many optimizer steps (-1: no limit); settable."""
        return self._loop.trainer.options.max_steps  # type: ignore[no-any-return]

    @max_steps.setter
    def max_steps(self, value: int) -> None:
        self._loop.set_limits(max_steps=value)

    @property
    def min_steps(self) -> int | None:
        """Train at least this many optimizer steps before a stop request holds; settable."""
        return self._loop.min_steps

    @min_steps.setter
    def min_steps(self, value: int | None) -> None:
        self._loop.min_steps = value

    @property
    def global_step(self) -> int:
        """Optimizer steps taken so far (``trainer.global_step``)."""
        return self._loop.state.global_step

    @property
    def _batches_that_stepped(self) -> int:
        """Lightning's private count that projects log at: the optimizer steps taken (as
        checkpoints in Lightning's layout record it). In a batch's ``on_train_batch_end``
        it already counts that batch's step, which Lightning's counts after the hook."""
        return self._loop.state.global_step

    @property
    def batch_idx(self) -> int:
        """The index of the batch running (or last run) in its epoch; -1 before the first."""
        return _batch_counts(self._loop.state)[0] - 1

    @property
    def total_batch_idx(self) -> int:
        """The index of the batch running (or last run), counted across epochs and fits."""
        return self._loop.total_batch_idx

    @property
    def done(self) -> bool:
        """Whether ``max_steps`` is reached."""
        return max_steps_reached(self.global_step, self._loop.trainer.options)


def change_options(trainer: Any, **changes: Any) -> None:
    """Change the Trainer's loop options, for the fit running now (if any) and later runs.

    Lightning keeps these options as plain Trainer attributes that code assigns
    (``trainer.limit_val_batches = 0``, ``trainer.fit_loop.max_epochs = 5``). A
    running fit reads ``max_steps`` at the next batch; ``max_epochs``,
    ``min_epochs``, ``min_steps``, ``check_val_every_n_epoch`` and
    ``val_check_interval`` at the next epoch; ``log_every_n_steps`` at the next
    step; and ``limit_val_batches=0`` ends its validation at once (with
    ``should_stop``, the epoch then stops without validating, as in Lightning).
    The others (the other limits, ``num_sanity_val_steps``,
    ``reload_dataloaders_every_n_epochs``) hold from the next run; the training and
    validation limits also from the running fit's next reload of its dataloaders.

    Args:
        trainer: the Trainer.
        changes: the options' new values.

    Raises:
        ValueError, TypeError: a value ``Trainer(...)`` would refuse for that option.
    """
    trainer.options = replace(trainer.options, **changes)  # checked as Trainer(...) checks
    run = getattr(trainer, "_current", None)
    if run is None:
        return
    run.options = replace(run.options, **changes)
    fit = run.fit
    if fit is not None:
        fit.set_limits(**changes)
        if "limit_val_batches" in changes:  # 0: no more validation in this fit
            fit.validates = changes["limit_val_batches"] != 0 and fit_validates(run)
        if "log_every_n_steps" in changes:
            fit.optimization.log_every_n_steps = changes["log_every_n_steps"]


class FitLoop:
    """Lightning's ``trainer.fit_loop``: the fit's limits (settable) and its progress.

    Args:
        trainer: the Trainer whose options and run state this reads.

    Example:
        >>> import trainkit
        >>> trainer = trainkit.Trainer(max_epochs=2, logger=False)
        >>> trainer.fit_loop.max_epochs += 3
        >>> trainer.max_epochs, trainer.fit_loop.total_batch_idx
        (5, -1)
    """

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        #: The epoch's batches, and ``max_steps``.
        self.epoch_loop = EpochLoop(self)
        #: Training epochs: started (``ready``, ``started``), their batches done
        #: (``processed``), ended (``completed``: ``trainer.current_epoch``).
        self.epoch_progress = Progress(self._epochs)

    @property
    def _data_source(self) -> DataSource:
        """Where the training dataloader comes from (Lightning's private name)."""
        return DataSource(self.trainer, "train")

    @property
    def state(self) -> RunState:
        """The Trainer's run state."""
        return self.trainer.state  # type: ignore[no-any-return]

    def _epochs(self) -> Tracker:
        state = self.state
        epoch, phase = state.epoch, state.epoch_phase
        started = epoch + (phase > 0)
        return Tracker(started, started, epoch + (phase == 2), epoch)

    def set_limits(self, **limits: int | None) -> None:
        """Change loop limits, for the running fit (if any) and for later fits.

        Raises:
            ValueError: a value the Trainer would refuse for that option.
        """
        change_options(self.trainer, **limits)

    @property
    def max_epochs(self) -> int | None:
        """Stop after this many epochs (-1: no limit); settable.

        Reads as ``trainer.max_epochs``; a fit that ended at ``max_epochs`` trains
        on from there when it is raised and ``fit`` is called again.
        """
        return self.trainer.max_epochs  # type: ignore[no-any-return]

    @max_epochs.setter
    def max_epochs(self, value: int | None) -> None:
        self.set_limits(max_epochs=value)

    @property
    def min_epochs(self) -> int | None:
        """Train at least this many epochs before a stop request holds; settable."""
        return self.trainer.options.min_epochs  # type: ignore[no-any-return]

    @min_epochs.setter
    def min_epochs(self, value: int | None) -> None:
        self.set_limits(min_epochs=value)

    @property
    def max_steps(self) -> int:
        """``epoch_loop.max_steps`` (set it there, as in Lightning)."""
        return self.epoch_loop.max_steps

    @property
    def min_steps(self) -> int | None:
        """Train at least this many optimizer steps before a stop request holds; settable."""
        return self.trainer.options.min_steps  # type: ignore[no-any-return]

    @min_steps.setter
    def min_steps(self, value: int | None) -> None:
        self.set_limits(min_steps=value)

    @property
    def total_batch_idx(self) -> int:
        """The index of the batch running (or last run), counted across epochs and fits;
        -1 before the first."""
        return self.state.batches_seen - 1

    @property
    def batch_idx(self) -> int:
        """The index of the batch running (or last run) in its epoch; -1 before the first."""
        return self.epoch_loop.batch_idx

    @property
    def done(self) -> bool:
        """Whether training is over: ``max_epochs`` or ``max_steps`` reached (counting an
        epoch whose batches are done), or a stop was requested and the minimums allow it."""
        state, options = self.state, self.trainer.options
        epochs = state.epoch + (state.epoch_phase == 2)  # an epoch whose batches are done
        if limits_reached(epochs, state.global_step, options):
            return True
        return state.should_stop and minimums_reached(epochs, state.global_step, options)

    @property
    def restarting(self) -> bool:
        """Whether the running fit resumed in the middle of an epoch that has not ended yet.

        True from the restore (``fit(ckpt_path=...)`` of a checkpoint saved inside an
        epoch) until that epoch's end hooks have run. A checkpoint saved at an epoch's
        end resumes at the next epoch's start, so that fit does not restart: trainkit
        runs no epoch hooks again for it (see docs/porting.md).
        """
        state = self.state
        return (
            state.restarted_epoch == state.epoch and state.fn == "fit" and state.status == "running"
        )

    @property
    def _combined_loader(self) -> CombinedLoader | None:
        """The running (or last) fit's training data as a CombinedLoader (Lightning's
        private name, read by projects: ``.flattened`` is its dataloaders); None before."""
        run = getattr(self.trainer, "_current", None)
        fit = run.fit if run is not None else None
        if fit is None:
            return None
        loader = fit.train_loader
        return loader.combined if isinstance(loader, CombinedBatches) else CombinedLoader(loader)

    def setup_data(self) -> None:
        """Set the training dataloader up.

        trainkit sets it up when ``fit`` starts, before ``configure_optimizers``, so
        during ``fit`` there is nothing left to do (``trainer.num_training_batches``
        and ``trainer.estimated_stepping_batches`` are known there).

        Raises:
            RuntimeError: called outside ``fit``.
        """
        state = self.state
        if state.fn != "fit" or state.status != "running":
            raise RuntimeError(
                "trainer.fit_loop.setup_data() works while fit runs (from a hook or "
                "configure_optimizers), where trainkit has already set the training dataloader "
                "up; outside fit there is none to set up. Read trainer.num_training_batches or "
                "trainer.estimated_stepping_batches from configure_optimizers instead."
            )

    def __repr__(self) -> str:
        return (
            f"FitLoop(max_epochs={self.max_epochs}, max_steps={self.max_steps}, "
            f"epoch_progress={self.epoch_progress!r})"
        )

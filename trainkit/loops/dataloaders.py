"""The dataloaders a run uses: found through the hooks, prepared by the strategy, counted.

:func:`stage_loaders` finds a stage's loaders (given ones, the DataModule's or the
Module's ``*_dataloader`` hooks) and has the strategy prepare them (its sampler),
each seeding its workers; :func:`fit_loaders` does it for fit's training and
validation loaders and records how many batches of each the run takes;
:class:`Reload` says when fit loads them again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainkit.core.data import (
    NamedLoaders,
    batch_totals,
    each_loader,
    find_dataloaders,
    recording_batches,
    training_batches,
    unshuffled,
    with_worker_seeding,
)
from trainkit.core.module import overrides
from trainkit.loops.state import RunningStage

if TYPE_CHECKING:
    from trainkit.loops.run import Run
    from trainkit.trainer.options import LoopOptions

__all__ = [
    "Reload",
    "fit_loaders",
    "fit_train_loader",
    "fit_val_loaders",
    "fit_validates",
    "stage_loaders",
]


def stage_loaders(run: Run, kind: str, given: Any, required: bool) -> list[Iterable[Any]]:
    """The loaders of stage ``kind`` ("train", "val", "test" or "predict"), prepared.

    Args:
        run: the run: its strategy prepares the loaders (unless the user splits the
            data), its DataModule's or Module's ``*_dataloader`` hooks give them when
            none are passed.
        kind: the stage.
        given: the loaders the user passed (None: from the DataModule or the Module).
        required: whether no loader at all is an error.
    """
    state = run.state
    outer, state.stage = state.stage, _reading_stage(run, kind)
    try:  # the hooks see the stage that will read their loaders, as under Lightning
        found = find_dataloaders(kind, given, run.module, run.datamodule, required=required)
    finally:
        state.stage = outer
    training = kind == "train"

    def prepared(loader: Any) -> Any:
        if run.hardware.use_distributed_sampler:  # else the loaders split the data
            loader = run.strategy.prepare_dataloader(loader, training=training)
        return with_worker_seeding(run.strategy.process_dataloader(loader))

    # Combined training loaders: each one prepared; a dict's keys kept.
    loaders = [each_loader(dl, prepared) for dl in found]
    if kind == "predict":  # prediction writers' batch_indices, as Lightning records them
        loaders = [recording_batches(loader) for loader in loaders]
    return NamedLoaders(loaders, found.names) if isinstance(found, NamedLoaders) else loaders


def _reading_stage(run: Run, kind: str) -> RunningStage:
    # Fit's validation loaders are first read by the sanity check, when one runs (a
    # reload, inside training, is read by validation).
    first = kind == "val" and run.fn == "fit" and run.state.stage is None
    if first and run.options.num_sanity_val_steps != 0:
        return RunningStage.SANITY_CHECKING
    return _READING[kind]


#: The stage that reads each kind of loader.
_READING = {
    "train": RunningStage.TRAINING,
    "val": RunningStage.VALIDATING,
    "test": RunningStage.TESTING,
    "predict": RunningStage.PREDICTING,
}


def fit_loaders(
    run: Run, train_given: Any, val_given: Any
) -> tuple[Iterable[Any], list[Iterable[Any]]]:
    """Fit's training and validation loaders (:func:`fit_val_loaders`, then
    :func:`fit_train_loader`: the sanity check reads validation's first).

    Args:
        run: the run being fitted.
        train_given: the training loader the user passed (None: from the hooks).
        val_given: the validation loader(s) the user passed (None: from the hooks).
    """
    val = fit_val_loaders(run, val_given)
    return fit_train_loader(run, train_given), val


def fit_train_loader(run: Run, given: Any) -> Iterable[Any]:
    """Fit's training loader; the run's state records its batch count (and the samples
    a step takes, when the loader has one batch size).

    Args:
        run: the run being fitted.
        given: the training loader the user passed (None: from the hooks).
    """
    options, state = run.options, run.state
    (train,) = stage_loaders(run, "train", given, True)
    if options.overfit_batches:  # the same batches every epoch
        train = each_loader(train, lambda one: unshuffled(one, run.warn))
    state.num_training_batches = training_batches(train, options.limit_train_batches)
    size = getattr(train, "batch_size", None)  # any iterable's: a list, say, or None
    fixed = size if isinstance(size, int) and size > 0 else 0
    state.samples_per_step = fixed * run.strategy.data_parallel_size or None
    return train


def fit_val_loaders(run: Run, given: Any) -> list[Iterable[Any]]:
    """Fit's validation loaders; the run's state records their batch counts.

    With ``limit_val_batches=0`` or no ``validation_step`` none is asked for (nor is
    ``val_dataloader`` called), as in Lightning.

    Args:
        run: the run being fitted.
        given: the validation loader(s) the user passed (None: from the hooks).
    """
    options, state = run.options, run.state
    validating = options.limit_val_batches != 0 and overrides(run.module, "validation_step")
    val = stage_loaders(run, "val", given, False) if validating else []
    if options.overfit_batches:  # the same batches as training, in order
        val[:] = [unshuffled(one, run.warn, "val") for one in val]
    state.num_val_batches = batch_totals(val, options.limit_val_batches, "limit_val_batches")
    return val


@dataclass
class Reload:
    """When fit loads its dataloaders again (``reload_dataloaders_every_n_epochs=n``).

    As in Lightning: the training loader at the start of each epoch ``n`` or more
    epochs after it was last loaded (a resumed fit counts from the epoch it resumed
    at); the validation loaders when a validation is due ``n`` or more epochs after
    they were last loaded. The validation loaders fit loads at its start count as
    loaded at its first epoch only if that epoch validates: otherwise the first
    validation loads them again, so that each validation reads the loaders
    ``val_dataloader()`` gives at the epoch Lightning would call it.

    Args:
        load_train: loads the training loader (and records it on the Trainer).
        load_val: loads the validation loaders (and records them on the Trainer).
        train_epoch: the epoch the training loader was loaded for.
        val_epoch: the epoch the validation loaders were loaded for (``-inf``: none).
    """

    load_train: Callable[[], Iterable[Any]]
    load_val: Callable[[], list[Iterable[Any]]]
    train_epoch: float
    val_epoch: float

    def train(self, loader: Iterable[Any], epoch: int, options: LoopOptions) -> Iterable[Any]:
        """The training loader for ``epoch``: ``loader``, or a new one when one is due."""
        every = options.reload_dataloaders_every_n_epochs
        if not every or epoch - self.train_epoch < every:
            return loader
        self.train_epoch = epoch
        return self.load_train()

    def val(
        self, loaders: list[Iterable[Any]], epoch: int, options: LoopOptions
    ) -> list[Iterable[Any]]:
        """The validation loaders for a validation at ``epoch``: ``loaders``, or new ones
        when they are due."""
        every = options.reload_dataloaders_every_n_epochs
        if not every or epoch - self.val_epoch < every:
            return loaders
        self.val_epoch = epoch
        return self.load_val()


def fit_validates(run: Run) -> bool:
    """Whether fit validates: the loaders :func:`fit_loaders` prepared have batches to
    run (after ``limit_val_batches``), and the Module has a ``validation_step``."""
    totals = run.state.num_val_batches
    return any(total > 0 for total in totals) and overrides(run.module, "validation_step")

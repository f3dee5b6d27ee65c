"""The dataloaders a run uses: found through the hooks, prepared by the strategy, counted.

:func:`stage_loaders` finds a stage's loaders (given ones, the DataModule's or the
Module's ``*_dataloader`` hooks) and has the strategy prepare them (its sampler),
each seeding its workers; :func:`fit_loaders` does it for fit's training and
validation loaders and records how many batches of each the run takes.
"""

from __future__ import annotations

from collections.abc import Iterable
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

__all__ = ["fit_loaders", "fit_validates", "stage_loaders"]


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
    """Fit's training and validation loaders; the run's state records their batch counts
    (and the samples a step takes, when the training loader has one batch size).

    Args:
        run: the run being fitted.
        train_given: the training loader the user passed (None: from the hooks).
        val_given: the validation loader(s) the user passed (None: from the hooks).
    """
    options, state = run.options, run.state
    # Validation's first (the sanity check uses it first), as Lightning loads them;
    # with limit_val_batches=0 or no validation_step none is asked for (nor is
    # val_dataloader called), as in Lightning.
    validating = options.limit_val_batches != 0 and overrides(run.module, "validation_step")
    val = stage_loaders(run, "val", val_given, False) if validating else []
    (train,) = stage_loaders(run, "train", train_given, True)
    if options.overfit_batches:  # the same batches every epoch, validation's too
        train = each_loader(train, lambda one: unshuffled(one, run.warn))
        val[:] = [unshuffled(one, run.warn, "val") for one in val]
    state.num_training_batches = training_batches(train, options.limit_train_batches)
    size = getattr(train, "batch_size", None)  # any iterable's: a list, say, or None
    fixed = size if isinstance(size, int) and size > 0 else 0
    state.samples_per_step = fixed * run.strategy.data_parallel_size or None
    state.num_val_batches = batch_totals(val, options.limit_val_batches, "limit_val_batches")
    return train, val


def fit_validates(run: Run) -> bool:
    """Whether fit validates: the loaders :func:`fit_loaders` prepared have batches to
    run (after ``limit_val_batches``), and the Module has a ``validation_step``."""
    totals = run.state.num_val_batches
    return any(total > 0 for total in totals) and overrides(run.module, "validation_step")

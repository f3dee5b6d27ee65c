"""The loops' ``_data_source``: where a stage's dataloaders come from, as Lightning names it.

Each entry point (``fit``, ``validate``, ``test``, ``predict``) records what it
was given: the Module, the DataModule and the dataloaders passed for its stages
(:class:`AttachedData`, kept by the Trainer until the next entry point, as
Lightning keeps its loops' sources). Ported code asks the loop views where a
stage's dataloaders come from, most often to know whether fit validates::

    source = trainer.fit_loop.epoch_loop.val_loop._data_source
    monitor = "val_loss" if source.is_defined() else "train_loss"

:class:`DataSource` answers from the record: the dataloaders passed for the
stage, else the DataModule or the Module whose ``<stage>_dataloader`` method
trainkit calls for it.

:class:`FitLoaders` loads fit's dataloaders through those hooks and records them
on the Trainer (``trainer.train_dataloader``, ``trainer.val_dataloaders``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainkit.checkpoint.restore import resumed_counters
from trainkit.core.data import DataModule, one_or_list
from trainkit.core.module import Module, overrides
from trainkit.loops.dataloaders import Reload, fit_train_loader, fit_val_loaders
from trainkit.loops.schedule import validates_in_epoch
from trainkit.utilities.combined_loader import as_given

if TYPE_CHECKING:
    from trainkit.loops.run import Run

__all__ = ["AttachedData", "DataSource", "FitLoaders", "unpaired_validation"]


@dataclass(frozen=True)
class AttachedData:
    """What an entry point was given, recorded before its set-up hooks run."""

    #: The Module the entry point runs.
    module: Module
    #: The DataModule it was given, if any.
    datamodule: DataModule | None
    #: The dataloaders passed, by stage ("train", "val", "test", "predict"); a stage
    #: absent or None takes them from the DataModule or the Module.
    loaders: Mapping[str, Any]


class DataSource:
    """Lightning's ``_data_source`` of a loop: the dataloaders of one stage, or their owner.

    Args:
        trainer: the Trainer whose last entry point this reads.
        stage: "train", "val", "test" or "predict".

    Example:
        >>> import trainkit
        >>> DataSource(trainkit.Trainer(logger=False), "val").is_defined()  # no run yet
        False
    """

    def __init__(self, trainer: Any, stage: str) -> None:
        self.trainer = trainer
        self.stage = stage

    @property
    def name(self) -> str:
        """The method that gives the stage's dataloaders (``"val_dataloader"``)."""
        return f"{self.stage}_dataloader"

    @property
    def instance(self) -> Any:
        """The dataloaders passed for the stage, else the DataModule or Module whose
        method gives them; None before the Trainer's first entry point."""
        attached: AttachedData | None = self.trainer._attached
        if attached is None:
            return None
        given = attached.loaders.get(self.stage)
        if given is not None:
            return given
        datamodule, module = attached.datamodule, attached.module
        # The DataModule's method, unless only the Module defines one (trainkit calls
        # the Module's then, see trainkit.core.data.find_dataloaders).
        if datamodule is not None and (
            overrides(datamodule, self.name, DataModule) or not overrides(module, self.name)
        ):
            return datamodule
        return module

    def is_module(self) -> bool:
        """Whether the source is a Module or DataModule (whose method gives the dataloaders)."""
        return isinstance(self.instance, (Module, DataModule))

    def is_defined(self) -> bool:
        """Whether the stage has dataloaders: passed, or a method of the source that gives them.

        Limits (``limit_val_batches=0``) do not change the answer, as in Lightning.
        False before the Trainer's first entry point (Lightning's answers True there,
        with nothing attached).
        """
        instance = self.instance
        if isinstance(instance, DataModule):
            return overrides(instance, self.name, DataModule)
        if isinstance(instance, Module):
            return overrides(instance, self.name)
        return instance is not None

    def __repr__(self) -> str:
        return f"DataSource(stage={self.stage!r}, defined={self.is_defined()})"


def unpaired_validation(trainer: Any) -> str | None:
    """Why fit will not validate although half of validation is there, or None.

    A ``validation_step`` without validation data, or validation data without a
    ``validation_step``: fit trains without validating, and says so (in Lightning's
    words, which projects' tests look for).

    Args:
        trainer: the Trainer whose fit is starting.
    """
    has_data = DataSource(trainer, "val").is_defined()
    has_step = overrides(trainer._attached.module, "validation_step")
    if has_step and not has_data:
        return (
            "You defined a `validation_step` but have no `val_dataloader`. Skipping val loop. "
            "To validate, pass val_dataloaders to fit() or define val_dataloader()."
        )
    if has_data and not has_step:
        return (
            "You passed in a `val_dataloader` but have no `validation_step`. Skipping val loop. "
            "To validate, define validation_step() on the Module."
        )
    return None


class FitLoaders:
    """Fit's dataloaders, loaded through the hooks and recorded on the Trainer.

    Args:
        trainer: the Trainer fitting: its ``train_dataloader`` and ``val_dataloaders``
            record what was loaded last.
        run: the run being fitted.
        train_given: the training loader passed to ``fit`` (None: from the hooks).
        val_given: the validation loader(s) passed to ``fit`` (None: from the hooks).
    """

    def __init__(self, trainer: Any, run: Run, train_given: Any, val_given: Any) -> None:
        self._trainer, self._run = trainer, run
        self._train_given, self._val_given = train_given, val_given

    def train(self) -> Iterable[Any]:
        """The training loader, loaded (again)."""
        loader = fit_train_loader(self._run, self._train_given)
        self._trainer.train_dataloader = as_given(loader)  # combined: the collection given
        return loader

    def val(self) -> list[Iterable[Any]]:
        """The validation loaders, loaded (again)."""
        loaders = fit_val_loaders(self._run, self._val_given)
        self._trainer.val_dataloaders = one_or_list(loaders)
        return loaders

    def load(
        self, checkpoint: Mapping[str, Any] | None = None
    ) -> tuple[Iterable[Any], list[Iterable[Any]]]:
        """Both: validation's first, as the sanity check reads them first.

        Args:
            checkpoint: the checkpoint the fit resumes from, if any: the hooks see the
                epoch and step it resumes at (``trainer.current_epoch``,
                ``global_step``), as under Lightning, which restores those first; the
                checkpoint is restored later, when the optimizers exist.
        """
        state = self._run.state
        before = state.epoch, state.global_step
        if checkpoint is not None:
            state.epoch, state.global_step = resumed_counters(checkpoint)
        try:
            val = self.val()
            return self.train(), val
        finally:
            state.epoch, state.global_step = before

    def reload(self, epoch: int) -> Reload:
        """When to load them again, for a fit that trains from ``epoch`` with the loaders
        :meth:`load` gave (``reload_dataloaders_every_n_epochs``)."""
        validates_first = validates_in_epoch(self._run.options, epoch)
        return Reload(self.train, self.val, epoch, epoch if validates_first else -math.inf)

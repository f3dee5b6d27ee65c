"""The hooks a Module and a DataModule may override, each doing nothing by default.

Lightning's split, under its names: :class:`DataHooks` (data preparation, the
optional dataloaders and the batch transfer hooks) are shared by the Module and
the DataModule; :class:`ModuleHooks` (Lightning's ``ModelHooks``: where the run
is) and :class:`CheckpointHooks` belong to the Module. The loop calls them at the
points their docstrings name (the order is in docs/architecture.md).
"""

from __future__ import annotations

from typing import Any

import torch

from trainkit.core.batches import BatchTransferHooks


class DataHooks(BatchTransferHooks):
    """Data preparation, the optional dataloaders and the batch transfer hooks.

    A base of :class:`~trainkit.core.module.Module` and
    :class:`~trainkit.core.data.DataModule`. The dataloader hooks are optional: the
    Trainer calls them when no dataloader is passed to it.
    """

    #: Run :meth:`prepare_data` on local rank 0 of every node (True), or once per
    #: job, on global rank 0 (False: for a folder every node shares).
    prepare_data_per_node: bool = True

    def prepare_data(self) -> None:
        """Download or write data to disk, once, before ``setup``.

        Runs in one process per node (global rank 0 only with
        ``prepare_data_per_node = False``) while the others wait, at the start of
        every fit, validate, test and predict (the DataModule's before the
        Module's). Set no state here that the other processes need: they do not
        run it (build datasets in ``setup``).
        """

    def setup(self, stage: str) -> None:
        """Called in every process at the start of fit/validate/test/predict (build datasets here).

        Args:
            stage: one of "fit", "validate", "test", "predict".
        """

    def teardown(self, stage: str) -> None:
        """Called at the end of fit/validate/test/predict (release what ``setup`` built).

        Args:
            stage: one of "fit", "validate", "test", "predict".
        """

    def train_dataloader(self) -> Any:
        """The training dataloader, when none is passed to ``fit``."""
        raise NotImplementedError(
            f"{type(self).__name__} has no train_dataloader(); define it, or pass the "
            "training dataloader to Trainer.fit."
        )

    def val_dataloader(self) -> Any:
        """The validation dataloader(s), when none is passed."""
        raise NotImplementedError(
            f"{type(self).__name__} has no val_dataloader(); define it to validate, or pass "
            "the dataloader."
        )

    def test_dataloader(self) -> Any:
        """The test dataloader(s), when none is passed to ``test``."""
        raise NotImplementedError(
            f"{type(self).__name__} has no test_dataloader(); define it, or pass the "
            "dataloader to Trainer.test."
        )

    def predict_dataloader(self) -> Any:
        """The prediction dataloader(s), when none is passed to ``predict``."""
        raise NotImplementedError(
            f"{type(self).__name__} has no predict_dataloader(); define it, or pass the "
            "dataloader to Trainer.predict."
        )


class CheckpointHooks:
    """What a Module adds to a checkpoint it is saved in, and reads back (Lightning's names)."""

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Called when a checkpoint is assembled; add entries to ``checkpoint`` here.

        Args:
            checkpoint: the checkpoint dict about to be saved.
        """

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Called when a checkpoint is restored, before the state is loaded.

        Args:
            checkpoint: the loaded checkpoint dict.
        """


class ModuleHooks(CheckpointHooks):
    """The Module's hooks: notifications of where the run is (Lightning's ``ModelHooks``).

    A base of :class:`~trainkit.core.module.Module`; the hooks that act on the
    module itself (eval and train mode around evaluation) are the Module's own.
    """

    def on_fit_start(self) -> None:
        """Called at the beginning of ``fit``."""

    def on_fit_end(self) -> None:
        """Called at the end of ``fit``."""

    def on_train_start(self) -> None:
        """Called when the training loop begins."""

    def on_train_end(self) -> None:
        """Called when the training loop ends."""

    def on_train_epoch_start(self) -> None:
        """Called at the beginning of each training epoch."""

    def on_train_epoch_end(self) -> None:
        """Called at the end of each training epoch, after its validation."""

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> int | None:
        """Called before ``training_step``. Return -1 to end the epoch here.

        Args:
            batch: the batch.
            batch_idx: index of the batch within the epoch.
        """
        return None

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Called after the optimizer step of a batch.

        Args:
            outputs: what ``training_step`` returned, as a dict (``{}`` for a skipped
                batch): its "loss" detached, divided by the accumulation window as
                backward took it, as in Lightning.
            batch: the batch.
            batch_idx: index of the batch within the epoch.
        """

    def on_validation_start(self) -> None:
        """Called when a validation run begins."""

    def on_validation_end(self) -> None:
        """Called when a validation run ends."""

    def on_validation_epoch_start(self) -> None:
        """Called before the first validation batch."""

    def on_validation_epoch_end(self) -> None:
        """Called after the last validation batch."""

    def on_validation_batch_start(
        self, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        """Called before ``validation_step``."""

    def on_validation_batch_end(
        self, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        """Called after ``validation_step``."""

    def on_test_start(self) -> None:
        """Called when a test run begins."""

    def on_test_end(self) -> None:
        """Called when a test run ends."""

    def on_test_epoch_start(self) -> None:
        """Called before the first test batch."""

    def on_test_epoch_end(self) -> None:
        """Called after the last test batch."""

    def on_test_batch_start(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        """Called before ``test_step``."""

    def on_test_batch_end(
        self, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        """Called after ``test_step``."""

    def on_predict_start(self) -> None:
        """Called when a predict run begins."""

    def on_predict_end(self) -> None:
        """Called when a predict run ends."""

    def on_predict_epoch_start(self) -> None:
        """Called before the first predict batch."""

    def on_predict_epoch_end(self) -> None:
        """Called after the last predict batch."""

    def on_predict_batch_start(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        """Called before ``predict_step``."""

    def on_predict_batch_end(
        self, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        """Called after ``predict_step``."""

    def on_before_backward(self, loss: torch.Tensor) -> None:
        """Called before ``backward`` with the step's loss.

        Args:
            loss: the loss returned by ``training_step``.
        """

    def on_after_backward(self) -> None:
        """Called after ``backward``; gradients are populated."""

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Called before ``optimizer.step()``, with gradients unscaled.

        Args:
            optimizer: the optimizer about to step.
        """

    def on_before_zero_grad(self, optimizer: torch.optim.Optimizer) -> None:
        """Called after the optimizer step, before gradients are cleared.

        Args:
            optimizer: the optimizer whose gradients are about to be cleared.
        """

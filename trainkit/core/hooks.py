"""The hooks a Module may override, each doing nothing by default (Lightning's names).

The loop calls them at the points their docstrings name (the order is in
docs/architecture.md); the optional data hooks provide dataloaders when none is
passed to the Trainer.
"""

from __future__ import annotations

from typing import Any

import torch


class ModuleHooks:
    """The Module's hooks: notifications of where the run is, and optional dataloaders.

    A base of :class:`~trainkit.core.module.Module`; the hooks that act on the
    module itself (eval and train mode around evaluation) are the Module's own.
    """

    # ----------------------------------------------- optional data hooks
    def train_dataloader(self) -> Any:
        """Optional: the training dataloader, when none is passed to ``fit``."""
        raise NotImplementedError

    def val_dataloader(self) -> Any:
        """Optional: the validation dataloader(s), when none is passed."""
        raise NotImplementedError

    def test_dataloader(self) -> Any:
        """Optional: the test dataloader(s), when none is passed."""
        raise NotImplementedError

    def predict_dataloader(self) -> Any:
        """Optional: the prediction dataloader(s), when none is passed."""
        raise NotImplementedError

    #: Run :meth:`prepare_data` on local rank 0 of every node (True), or once per
    #: job, on global rank 0 (False: for a folder every node shares).
    prepare_data_per_node: bool = True

    # ------------------------------------------------------------------ hooks
    def prepare_data(self) -> None:
        """Download or write data to disk, once, before ``setup``.

        Runs in one process per node (global rank 0 only with
        ``prepare_data_per_node = False``) while the others wait, after the
        DataModule's ``prepare_data``; at the start of every fit, validate, test
        and predict. Set no state here that the other processes need: they do
        not run it (build datasets in ``setup``).
        """

    def setup(self, stage: str) -> None:
        """Called at the start of fit/validate/test/predict, before the module is moved.

        Args:
            stage: one of "fit", "validate", "test", "predict".
        """

    def teardown(self, stage: str) -> None:
        """Called at the end of fit/validate/test/predict.

        Args:
            stage: one of "fit", "validate", "test", "predict".
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
            outputs: what ``training_step`` returned, as a dict holding "loss".
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

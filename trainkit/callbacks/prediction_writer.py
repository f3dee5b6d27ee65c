"""BasePredictionWriter: write predictions as ``predict`` makes them, or at its end."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

from trainkit.callbacks.base import Callback
from trainkit.core.data import RecordedBatches

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

_INTERVALS = ("batch", "epoch", "batch_and_epoch")


class WriteInterval(str, Enum):
    """When a :class:`BasePredictionWriter` writes (Lightning's names); equal to the strings."""

    BATCH = "batch"
    EPOCH = "epoch"
    BATCH_AND_EPOCH = "batch_and_epoch"

    @property
    def on_batch(self) -> bool:
        """Whether ``write_on_batch_end`` is called."""
        return self in (WriteInterval.BATCH, WriteInterval.BATCH_AND_EPOCH)

    @property
    def on_epoch(self) -> bool:
        """Whether ``write_on_epoch_end`` is called."""
        return self in (WriteInterval.EPOCH, WriteInterval.BATCH_AND_EPOCH)


class BasePredictionWriter(Callback):
    """Subclass it and override ``write_on_batch_end`` and/or ``write_on_epoch_end``.

    With ``trainer.predict(..., return_predictions=False)`` nothing is handed
    back, so writing per batch keeps memory flat over a large prediction run.
    ``batch_indices`` are the dataset indices of each batch, as in Lightning:
    under DDP each process predicts its own share, and they say which samples
    its predictions belong to. They are known for a plain ``DataLoader`` over a
    map-style dataset (a batch's are None, and a loader's list is empty, for an
    iterable dataset or a ``DataLoader`` subclass).

    Args:
        write_interval: "batch" (after each batch), "epoch" (once, with every
            prediction) or "batch_and_epoch".
    """

    def __init__(self, write_interval: str = "batch") -> None:
        if write_interval not in _INTERVALS:
            raise ValueError(
                f"write_interval={write_interval!r} must be one of {list(_INTERVALS)}."
            )
        self.interval = WriteInterval(write_interval)
        self._predictions: dict[int, list[Any]] = {}

    def write_on_batch_end(
        self,
        trainer: Trainer,
        pl_module: Module,
        prediction: Any,
        batch_indices: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int,
    ) -> None:
        """Write one batch's prediction (override it for ``write_interval`` "batch").

        Args:
            trainer: the Trainer.
            pl_module: the Module.
            prediction: what ``predict_step`` returned for the batch.
            batch_indices: the batch's dataset indices (None where not known).
            batch: the batch.
            batch_idx: its index in the dataloader.
            dataloader_idx: the dataloader's index.
        """
        raise NotImplementedError(
            f"{type(self).__name__} writes per batch: define write_on_batch_end."
        )

    def write_on_epoch_end(
        self, trainer: Trainer, pl_module: Module, predictions: Any, batch_indices: Any
    ) -> None:
        """Write every prediction (override it for ``write_interval`` "epoch").

        Args:
            trainer: the Trainer.
            pl_module: the Module.
            predictions: one list of batch predictions per dataloader (the list
                itself with one dataloader).
            batch_indices: one list per dataloader (also with one, as Lightning
                passes them) of each batch's dataset indices (empty where not known).
        """
        raise NotImplementedError(
            f"{type(self).__name__} writes at the end: define write_on_epoch_end."
        )

    def on_predict_epoch_start(self, trainer: Trainer, module: Module) -> None:
        """Start collecting this run's predictions (epoch interval)."""
        self._predictions = {}

    def on_predict_batch_end(
        self,
        trainer: Trainer,
        module: Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        """Write the batch's prediction, or keep it for the end."""
        if self.interval.on_batch:
            seen = seen_batches(trainer, dataloader_idx)
            indices = seen[batch_idx] if seen is not None and batch_idx < len(seen) else None
            self.write_on_batch_end(
                trainer, module, outputs, indices, batch, batch_idx, dataloader_idx
            )
        if self.interval.on_epoch:
            self._predictions.setdefault(dataloader_idx, []).append(outputs)

    def on_predict_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Write every prediction (epoch interval)."""
        if self.interval.on_epoch:
            keys = sorted(self._predictions)
            per_loader = [self._predictions[k] for k in keys]
            predictions = per_loader[0] if len(per_loader) == 1 else per_loader
            indices = []
            for key, outputs in zip(keys, per_loader, strict=True):
                seen = seen_batches(trainer, key)
                indices.append([] if seen is None else seen[: len(outputs)])
            self.write_on_epoch_end(trainer, module, predictions, indices)
        self._predictions = {}


def seen_batches(trainer: Trainer, dataloader_idx: int) -> list[list[int]] | None:
    """The dataset indices of each batch a prediction dataloader gave (None: not known).

    Known for a plain ``DataLoader`` over a map-style dataset (see ``RecordedBatches``).

    Args:
        trainer: the Trainer running ``predict``.
        dataloader_idx: which prediction dataloader.
    """
    loaders = getattr(trainer, "predict_dataloaders", None)
    loader = loaders[dataloader_idx] if isinstance(loaders, list) else loaders
    recorded = getattr(loader, "batch_sampler", None)
    return recorded.seen if isinstance(recorded, RecordedBatches) else None

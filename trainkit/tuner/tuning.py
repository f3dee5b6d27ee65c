"""``Tuner``: run the learning rate or batch size search on its own, before ``fit``.

As Lightning's ``Tuner(trainer)``: each method sets a fit up on the Trainer
(the ``setup`` hooks, the dataloaders, ``configure_optimizers``), runs the
search instead of training, and tears the fit down again. Unlike Lightning's,
it writes nothing: no temporary checkpoint, and no log folder (the fit ends
before anything reaches a logger).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from trainkit.core.data import DataModule
from trainkit.tuner.batch_size_scaling import scale_batch_size
from trainkit.tuner.lr_finder import LRFinder, check_search, lr_find
from trainkit.tuner.trial import searching
from trainkit.utilities.seed import isolated_rng

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer


class Tuner:
    """Searches a learning rate or a batch size with a Trainer's settings.

    Args:
        trainer: the Trainer whose settings (device, precision, accumulation, ...) the
            search trains with; its counters, callbacks and loggers are left as they were.

    Example:
        >>> import trainkit
        >>> from trainkit.tuner import Tuner
        >>> tuner = Tuner(trainkit.Trainer(logger=False, enable_progress_bar=False))
    """

    def __init__(self, trainer: Trainer) -> None:
        self._trainer = trainer

    def lr_find(
        self,
        model: Module,
        train_dataloaders: Iterable[Any] | DataModule | None = None,
        val_dataloaders: Any = None,
        dataloaders: Any = None,
        datamodule: DataModule | None = None,
        method: str = "fit",
        min_lr: float = 1e-8,
        max_lr: float = 1,
        num_training: int = 100,
        mode: str = "exponential",
        early_stop_threshold: float | None = 4.0,
        update_attr: bool = True,
        attr_name: str = "",
    ) -> LRFinder | None:
        """Search the learning rate: train ``num_training`` steps with a growing one.

        Args:
            model: the Module.
            train_dataloaders: the training dataloader (or a DataModule).
            val_dataloaders: validation dataloader(s) (not used by the search).
            dataloaders: for ``method`` other than "fit" (unsupported, as in Lightning).
            datamodule: a DataModule supplying the dataloaders.
            method: "fit", the only stage whose learning rate can be searched.
            min_lr: the first learning rate.
            max_lr: the last learning rate.
            num_training: the number of steps (learning rates) to try.
            mode: "exponential" or "linear" growth between them.
            early_stop_threshold: stop once the smoothed loss exceeds this many
                times the best one (None: never stop early).
            update_attr: set the suggestion on the model's ``lr`` / ``learning_rate``
                (or ``attr_name``) attribute or hparams key.
            attr_name: the attribute holding the learning rate.

        Returns:
            The search's results (``results``, ``suggestion()``, ``plot()``), or None
            when skipped (``fast_dev_run``).
        """
        if method != "fit":
            raise ValueError(
                f"method={method!r}: the learning rate finder trains, so method='fit' is the "
                "only valid configuration."
            )
        _check_fit_dataloaders(dataloaders)
        check_search(mode, min_lr, max_lr, num_training)
        found: list[LRFinder | None] = []

        def search(trainer: Trainer, module: Module) -> None:
            found.append(
                lr_find(
                    trainer,
                    module,
                    min_lr,
                    max_lr,
                    num_training,
                    mode,
                    early_stop_threshold,
                    update_attr,
                    attr_name,
                )
            )

        # The random state is as before (the loaders' draws, the trial steps'), as in
        # Lightning: a second search gives the same result, and training starts the same.
        with isolated_rng(), searching(search):
            self._trainer.fit(model, train_dataloaders, val_dataloaders, datamodule)
        return found[0] if found else None

    def scale_batch_size(
        self,
        model: Module,
        train_dataloaders: Iterable[Any] | DataModule | None = None,
        val_dataloaders: Any = None,
        dataloaders: Any = None,
        datamodule: DataModule | None = None,
        method: str = "fit",
        mode: str = "power",
        steps_per_trial: int = 3,
        init_val: int = 2,
        max_trials: int = 25,
        batch_arg_name: str = "batch_size",
        margin: float = 0.05,
        max_val: int = 8192,
    ) -> int | None:
        """Find the largest batch size whose training steps fit in memory; set and return it.

        Args:
            model: the Module.
            train_dataloaders: must be None (or a DataModule): each trial builds the
                dataloaders from their hooks, which read ``batch_arg_name``.
            val_dataloaders: must be None, likewise.
            dataloaders: for ``method`` other than "fit" (not supported).
            datamodule: a DataModule whose hooks build the dataloaders.
            method: "fit" (trainkit searches the training batch size only).
            mode: "power" (double until out of memory) or "binsearch" (then bisect).
            steps_per_trial: training steps per trial.
            init_val: the first batch size tried.
            max_trials: the most trials (sizes tried).
            batch_arg_name: the attribute (or hparams key) holding the batch size.
            margin: in "binsearch" mode, the fraction the size found is reduced by.
            max_val: the largest batch size tried.

        Returns:
            The largest batch size that ran (less ``margin`` in "binsearch" mode), or
            None when skipped (``fast_dev_run``).
        """
        if method != "fit":
            raise ValueError(
                f"method={method!r}: trainkit's batch size finder searches the training batch "
                "size only; use method='fit'."
            )
        _check_fit_dataloaders(dataloaders)
        if (train_dataloaders is not None and not isinstance(train_dataloaders, DataModule)) or (
            val_dataloaders is not None
        ):
            raise ValueError(
                "The batch size finder cannot be used with dataloaders passed directly to the "
                "Tuner: each trial builds them again with the new batch size. Return them from "
                "the Module's or a DataModule's train_dataloader()/val_dataloader() hooks."
            )
        found: list[int | None] = []

        def search(trainer: Trainer, module: Module) -> None:
            found.append(
                scale_batch_size(
                    trainer,
                    module,
                    mode,
                    steps_per_trial,
                    init_val,
                    max_trials,
                    batch_arg_name,
                    margin,
                    max_val,
                )
            )

        with isolated_rng(), searching(search):
            self._trainer.fit(model, train_dataloaders, None, datamodule)
        return found[0] if found else None


def _check_fit_dataloaders(dataloaders: Any) -> None:
    if dataloaders is not None:
        raise ValueError(
            "In the tuner with method='fit', `dataloaders` should be None: pass "
            "train_dataloaders and val_dataloaders instead."
        )

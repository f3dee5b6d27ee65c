"""BatchSizeFinder: find the largest batch size that fits when fit starts, then train with it.

Lightning's ``BatchSizeFinder`` callback. ``on_fit_start`` runs the search
(``trainkit.tuner.batch_size_scaling``): trials of ``steps_per_trial`` steps
with growing batch sizes until one runs out of memory; the run is then put
back exactly as it was, the batch size attribute holds the largest size that
ran (in "binsearch" mode, less ``margin``; never more than ``max_val``), and
fit builds its dataloaders again with it. Override ``on_fit_start`` (or call
:meth:`BatchSizeFinder.scale_batch_size` from it) to change when.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit.callbacks.base import Callback

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

__all__ = ["BatchSizeFinder"]


class BatchSizeFinder(Callback):
    """Finds the largest batch size that trains, at the start of fit (Lightning's BatchSizeFinder).

    The dataloaders must come from the Module's or DataModule's hooks, reading
    the batch size from ``batch_arg_name``.

    Args:
        mode: "power" (double the size until out of memory) or "binsearch" (then
            bisect between the last size that ran and the first that did not).
        steps_per_trial: training steps per trial.
        init_val: the first batch size tried.
        max_trials: the most trials (sizes tried).
        batch_arg_name: the attribute (of the Module or DataModule) or hparams key
            holding the batch size.
        margin: in "binsearch" mode, the fraction the size found is reduced by,
            a safety buffer: the result is ``max(1, int(found * (1 - margin)))``
            (0.05: 5% less). In [0, 1); "power" mode ignores it, as Lightning
            documents.
        max_val: the largest batch size used: the search's result is at most
            this (a size that ran above it is capped to it).

    Raises:
        ValueError: an unknown ``mode``, ``margin`` outside [0, 1), ``max_val``
            below 1 or below ``init_val``.

    Example:
        >>> finder = BatchSizeFinder(mode="binsearch", init_val=16, margin=0.1, max_val=1024)
        >>> finder.optimal_batch_size is None
        True
    """

    SUPPORTED_MODES = ("power", "binsearch")

    def __init__(
        self,
        mode: str = "power",
        steps_per_trial: int = 3,
        init_val: int = 2,
        max_trials: int = 25,
        batch_arg_name: str = "batch_size",
        margin: float = 0.05,
        max_val: int = 8192,
    ) -> None:
        # The tuner's own checks, at construction (imported here: see scale_batch_size).
        from trainkit.tuner.batch_size_scaling import check_search

        check_search(mode, steps_per_trial, init_val, max_trials, margin, max_val)
        self._mode = mode
        self._steps_per_trial = steps_per_trial
        self._init_val = init_val
        self._max_trials = max_trials
        self._batch_arg_name = batch_arg_name
        self._margin = margin
        self._max_val = max_val
        #: The batch size the last search found (None: not run, or skipped).
        self.optimal_batch_size: int | None = None

    def scale_batch_size(self, trainer: Trainer, pl_module: Module) -> None:
        """Run the search now; the result goes to ``optimal_batch_size``.

        The batch size attribute then holds it too: the largest size that ran
        (never above ``max_val``), less ``margin`` in "binsearch" mode.

        Args:
            trainer: the running Trainer.
            pl_module: the Module.
        """
        # Imported here: the tuner runs the fit loop, which callbacks do not import.
        from trainkit.tuner.batch_size_scaling import scale_batch_size

        self.optimal_batch_size = scale_batch_size(
            trainer,
            pl_module,
            mode=self._mode,
            steps_per_trial=self._steps_per_trial,
            init_val=self._init_val,
            max_trials=self._max_trials,
            batch_arg_name=self._batch_arg_name,
            margin=self._margin,
            max_val=self._max_val,
        )

    def on_fit_start(self, trainer: Trainer, pl_module: Module) -> None:
        """Search the batch size before training starts.

        Args:
            trainer: the running Trainer.
            pl_module: the Module.
        """
        self.scale_batch_size(trainer, pl_module)

"""LearningRateFinder: search the learning rate when fit starts, then train with it.

Lightning's ``LearningRateFinder`` callback. ``on_fit_start`` runs the search
(``trainkit.tuner.lr_finder``): ``num_training_steps`` steps with a learning
rate growing from ``min_lr`` to ``max_lr``; the run is then put back exactly as
it was and, with ``update_attr``, trains with the suggested learning rate.
Override ``on_fit_start`` (or call :meth:`LearningRateFinder.lr_find` from
another hook, e.g. ``on_train_epoch_start``) to search at other times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit.callbacks.base import Callback
from trainkit.utilities.seed import isolated_rng

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer
    from trainkit.tuner.lr_finder import LRFinder

__all__ = ["LearningRateFinder"]


class LearningRateFinder(Callback):
    """Finds a learning rate at the start of fit and sets it (Lightning's LearningRateFinder).

    Args:
        min_lr: the first learning rate tried.
        max_lr: the last learning rate tried.
        num_training_steps: the number of steps (learning rates) to try.
        mode: "exponential" or "linear" growth from ``min_lr`` to ``max_lr``.
        early_stop_threshold: stop once the smoothed loss exceeds this many times
            the best one so far (None: never stop early).
        update_attr: set the suggestion on the Module's ``lr`` / ``learning_rate``
            attribute or hparams key (or ``attr_name``) and on the optimizer.
        attr_name: the attribute holding the learning rate.

    Example:
        >>> finder = LearningRateFinder(min_lr=1e-5, max_lr=1.0, num_training_steps=50)
        >>> finder.optimal_lr is None
        True
    """

    SUPPORTED_MODES = ("linear", "exponential")

    def __init__(
        self,
        min_lr: float = 1e-8,
        max_lr: float = 1,
        num_training_steps: int = 100,
        mode: str = "exponential",
        early_stop_threshold: float | None = 4.0,
        update_attr: bool = True,
        attr_name: str = "",
    ) -> None:
        if mode not in self.SUPPORTED_MODES:
            raise ValueError(f"`mode` should be either of {self.SUPPORTED_MODES}, got {mode!r}.")
        self._min_lr = min_lr
        self._max_lr = max_lr
        self._num_training_steps = num_training_steps
        self._mode = mode
        self._early_stop_threshold = early_stop_threshold
        self._update_attr = update_attr
        self._attr_name = attr_name
        #: The last search's results (``results``, ``suggestion()``, ``plot()``).
        self.optimal_lr: LRFinder | None = None

    def lr_find(self, trainer: Trainer, pl_module: Module) -> None:
        """Run the search now (from any hook of a fit); the result goes to ``optimal_lr``.

        Args:
            trainer: the running Trainer.
            pl_module: the Module.
        """
        # Imported here: the tuner runs the fit loop, which callbacks do not import.
        from trainkit.tuner.lr_finder import lr_find

        with isolated_rng():  # as Lightning's: the training after it starts from the same state
            self.optimal_lr = lr_find(
                trainer,
                pl_module,
                min_lr=self._min_lr,
                max_lr=self._max_lr,
                num_training=self._num_training_steps,
                mode=self._mode,
                early_stop_threshold=self._early_stop_threshold,
                update_attr=self._update_attr,
                attr_name=self._attr_name,
            )

    def on_fit_start(self, trainer: Trainer, pl_module: Module) -> None:
        """Search the learning rate before training starts.

        Args:
            trainer: the running Trainer.
            pl_module: the Module.
        """
        self.lr_find(trainer, pl_module)

"""The learning rate finder: train a few steps with a growing learning rate, record the loss.

Lightning's ``lr_find`` (its documentation: *Learning Rate Finder*): starting
at ``min_lr``, each optimizer step uses a larger learning rate, growing
exponentially or linearly to ``max_lr`` over ``num_training`` steps; the loss
of each step is smoothed and recorded. The search stops early once the
smoothed loss exceeds ``early_stop_threshold`` times the best one (it diverges).
:meth:`LRFinder.suggestion` picks the learning rate where the smoothed loss
falls fastest. Afterwards the run is exactly as before (see ``trainkit.tuner.trial``);
with ``update_attr`` the suggestion is written to the Module's ``lr`` /
``learning_rate`` attribute (or ``attr_name``) and to the optimizer.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback
from trainkit.core.optim import LRSchedulerConfig
from trainkit.tuner.trial import Snapshot, should_skip, train_trial
from trainkit.tuner.values import find_attribute, set_attribute
from trainkit.utilities.combined_loader import training_iterable

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

__all__ = ["LRFinder", "_LRFinder", "learning_rates", "lr_find"]

#: The search modes: how the learning rate grows from step to step.
MODES = ("exponential", "linear")
#: The learning rate's usual attribute names, looked up in this order.
LR_ATTRIBUTES = ("lr", "learning_rate")
# The weight of the past in the loss's moving average (a common choice for this search).
_BETA = 0.98


def learning_rates(mode: str, min_lr: float, max_lr: float, num_training: int) -> list[float]:
    """The learning rate of each step of the search: ``min_lr`` first, ``max_lr`` last.

    Args:
        mode: "exponential" (a constant factor per step) or "linear" (a constant increment).
        min_lr: the first learning rate.
        max_lr: the last learning rate.
        num_training: how many steps (learning rates).

    Example:
        >>> learning_rates("exponential", 1e-3, 1.0, 4)
        [0.001, 0.01, 0.1, 1.0]
        >>> learning_rates("linear", 0.0, 1.0, 5)
        [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    check_search(mode, min_lr, max_lr, num_training)
    last = max(num_training - 1, 1)
    if mode == "linear":
        return [min_lr + (max_lr - min_lr) * i / last for i in range(num_training)]
    ratio = max_lr / min_lr
    # Rounded to 15 significant digits: 10 ** (2/3 * 3) is 100.00000000000004.
    return [float(f"{min_lr * ratio ** (i / last):.15g}") for i in range(num_training)]


def check_search(mode: str, min_lr: float, max_lr: float, num_training: int) -> None:
    """Refuse search settings that cannot work, naming the fix.

    Args:
        mode: the search mode.
        min_lr: the first learning rate.
        max_lr: the last learning rate.
        num_training: the number of steps.
    """
    if mode not in MODES:
        raise ValueError(f"`mode` should be either of {MODES}, got {mode!r}.")
    if num_training < 1:
        raise ValueError(f"num_training={num_training}: the search needs at least one step.")
    if not 0 <= min_lr < max_lr or (mode == "exponential" and min_lr == 0):
        raise ValueError(
            f"min_lr={min_lr} and max_lr={max_lr}: the learning rate must grow from min_lr to "
            "max_lr, with 0 < min_lr < max_lr (min_lr may be 0 only with mode='linear')."
        )


class LRFinder:
    """The result of a learning rate search (Lightning's ``_LRFinder``).

    Args:
        mode: the search mode.
        lr_min: the first learning rate.
        lr_max: the last learning rate.
        num_training: the number of steps asked for.

    Example:
        >>> finder = LRFinder("linear", 0.0, 1.0, 5)
        >>> finder.results = {"lr": [0.0, 0.25, 0.5, 0.75, 1.0], "loss": [4.0, 3.9, 2.0, 1.9, 1.8]}
        >>> finder.suggestion(skip_begin=0, skip_end=1)
        0.25
    """

    def __init__(self, mode: str, lr_min: float, lr_max: float, num_training: int) -> None:
        self.mode = mode
        self.lr_min = lr_min
        self.lr_max = lr_max
        self.num_training = num_training
        #: ``{"lr": [...], "loss": [...]}``: each step's learning rate and smoothed loss.
        self.results: dict[str, list[float]] = {"lr": [], "loss": []}
        self._optimal_idx: int | None = None

    def suggestion(self, skip_begin: int = 10, skip_end: int = 1) -> float | None:
        """The learning rate where the smoothed loss falls fastest (steepest negative gradient).

        The gradient is taken with respect to the learning rate, over the points
        left after skipping; points whose loss is not finite are left out.

        Args:
            skip_begin: points to skip at the start (the loss is noisy there).
            skip_end: points to skip at the end (the loss often diverges there).

        Returns:
            The suggested learning rate, or None (with a warning) when fewer than two
            points remain: run more steps (``num_training``) or skip fewer points.
        """
        count = len(self.results["loss"])
        kept = [
            i for i in range(skip_begin, count - skip_end) if math.isfinite(self.results["loss"][i])
        ]
        if len(kept) < 2:
            import warnings

            warnings.warn(
                f"No learning rate suggestion: {len(kept)} of the search's {count} points remain "
                f"after skip_begin={skip_begin}, skip_end={skip_end} and non-finite losses; at "
                "least 2 are needed. Raise num_training, or lower skip_begin / skip_end.",
                stacklevel=2,
            )
            self._optimal_idx = None
            return None
        losses = torch.tensor([self.results["loss"][i] for i in kept], dtype=torch.float64)
        lrs = torch.tensor([self.results["lr"][i] for i in kept], dtype=torch.float64)
        (gradient,) = torch.gradient(losses, spacing=(lrs,))
        self._optimal_idx = kept[int(torch.argmin(gradient))]
        return self.results["lr"][self._optimal_idx]

    def plot(self, suggest: bool = False, show: bool = False, ax: Any = None) -> Any:
        """Plot the smoothed loss against the learning rate (needs matplotlib).

        Args:
            suggest: mark the suggested learning rate with a red point.
            show: show the figure (``plt.show()``).
            ax: the matplotlib Axes to draw on (None: a new figure).

        Returns:
            The figure drawn on.
        """
        try:
            plt = importlib.import_module("matplotlib.pyplot")
        except ImportError as error:
            raise ModuleNotFoundError(
                "LRFinder.plot draws with matplotlib, which is not installed: install it "
                "with `pip install matplotlib`."
            ) from error
        lrs, losses = self.results["lr"], self.results["loss"]
        if ax is None:
            figure, ax = plt.subplots()
        else:
            figure = ax.figure
        ax.plot(lrs, losses)
        if self.mode == "exponential":
            ax.set_xscale("log")
        ax.set_xlabel("Learning rate")
        ax.set_ylabel("Loss")
        if suggest:
            lr = self.suggestion()
            if lr is not None and self._optimal_idx is not None:
                ax.plot(lr, losses[self._optimal_idx], markersize=10, marker="o", color="red")
        if show:
            plt.show()
        return figure


#: Lightning's name for the result (``lightning.pytorch.tuner.lr_finder._LRFinder``).
_LRFinder = LRFinder


class _SweepLR(torch.optim.lr_scheduler.LRScheduler):
    """The learning rates the finder tries, as a scheduler: what ``lr_schedulers()`` gives
    while it runs (a manual step steps it instead of the Module's own schedule).

    Args:
        optimizer: the optimizer searched.
        lrs: the learning rates, one per step.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, lrs: list[float]) -> None:
        self.lrs = lrs
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:  # type: ignore[override]
        lr = self.lrs[min(self.last_epoch, len(self.lrs) - 1)]
        return [lr for _ in self.optimizer.param_groups]


class _Recorder(Callback):
    """Sets each step's learning rate; records its smoothed loss; stops when it diverges."""

    def __init__(
        self, finder: LRFinder, lrs: list[float], threshold: float | None, start: int
    ) -> None:
        self.finder, self.lrs, self.threshold, self.start = finder, lrs, threshold, start
        self.best = math.inf
        self.average = 0.0
        # The losses of the micro-batches of this step, each divided by their number.
        self.window: list[float] = []

    def on_train_batch_start(
        self, trainer: Trainer, module: Module, batch: Any, index: int
    ) -> None:
        step = min(trainer.global_step - self.start, len(self.lrs) - 1)
        for optimizer in trainer.optimizers:
            for group in optimizer.param_groups:
                group["lr"] = self.lrs[step]

    def on_train_batch_end(
        self, trainer: Trainer, module: Module, outputs: Any, batch: Any, index: int
    ) -> None:
        if not isinstance(outputs, Mapping) or "loss" not in outputs:
            return  # a skipped batch (training_step returned None)
        # Each micro-batch's loss divided by its window's length, as backward took it.
        self.window.append(float(outputs["loss"]))
        recorded = self.finder.results["loss"]
        step = trainer.global_step - self.start
        if step == len(recorded):
            return  # inside an accumulation window: the step comes later
        loss, self.window = sum(self.window), []  # the window's mean loss
        # An exponential moving average, divided by its weights' sum (unbiased from the start).
        self.average = _BETA * self.average + (1 - _BETA) * loss
        smoothed = self.average / (1 - _BETA ** (len(recorded) + 1))
        self.finder.results["lr"].append(self.lrs[len(recorded)])
        recorded.append(smoothed)
        diverged = not math.isfinite(smoothed) or smoothed > (self.threshold or 0) * self.best
        if self.threshold is not None and len(recorded) > 1 and diverged:
            trainer.should_stop = True
        self.best = min(self.best, smoothed)


def lr_find(
    trainer: Trainer,
    module: Module,
    min_lr: float = 1e-8,
    max_lr: float = 1.0,
    num_training: int = 100,
    mode: str = "exponential",
    early_stop_threshold: float | None = 4.0,
    update_attr: bool = True,
    attr_name: str = "",
) -> LRFinder | None:
    """Search the learning rate in a set-up fit, then put the run back as it was.

    Called from ``on_fit_start`` (the LearningRateFinder callback) or by
    :meth:`trainkit.tuner.Tuner.lr_find`; the arguments are theirs.

    Args:
        trainer: the Trainer, its fit set up.
        module: the Module.
        min_lr: the first learning rate.
        max_lr: the last learning rate.
        num_training: the number of steps (learning rates) to try.
        mode: "exponential" or "linear" growth.
        early_stop_threshold: stop once the smoothed loss exceeds this many times
            the best one so far (None: never stop early).
        update_attr: set the suggestion on the Module (and the optimizer).
        attr_name: the attribute to set (default: ``lr``, else ``learning_rate``).

    Returns:
        The search's results, or None when skipped (``fast_dev_run``).
    """
    check_search(mode, min_lr, max_lr, num_training)
    attribute = _lr_attribute(trainer, module, attr_name) if update_attr else ""
    if should_skip(trainer, "learning rate finder"):
        return None
    if len(trainer.optimizers) != 1:
        raise ValueError(
            f"configure_optimizers() returned {len(trainer.optimizers)} optimizers; the learning "
            "rate finder searches one optimizer's learning rate. Return one optimizer while "
            "you search."
        )
    finder = LRFinder(mode, min_lr, max_lr, num_training)
    lrs = learning_rates(mode, min_lr, max_lr, num_training)
    recorder = _Recorder(finder, lrs, early_stop_threshold, trainer.global_step)
    snapshot = Snapshot(trainer)
    try:
        batches = training_iterable(trainer.train_dataloader or [])
        sweep = [LRSchedulerConfig(_SweepLR(trainer.optimizers[0], lrs), interval="step")]
        train_trial(trainer, module, num_training, batches, [recorder], lr_scheduler_configs=sweep)
    finally:
        snapshot.restore(trainer)
    if len(finder.results["lr"]) < num_training:
        trainer.warn(
            f"The learning rate finder stopped after {len(finder.results['lr'])} of "
            f"{num_training} steps: the loss diverged (early_stop_threshold="
            f"{early_stop_threshold}) or the training data ran out."
        )
    if update_attr:
        lr = finder.suggestion()
        if lr is not None:
            set_attribute(trainer, module, attribute, lr)
            for optimizer in trainer.optimizers:  # the fit that follows trains with it
                for group in optimizer.param_groups:
                    group["lr"] = lr
    return finder


def _lr_attribute(trainer: Trainer, module: Module, attr_name: str) -> str:
    # Which attribute update_attr sets, checked before any work.
    names = (attr_name,) if attr_name else LR_ATTRIBUTES
    for name in names:
        if find_attribute(trainer, module, name):
            return name
    if attr_name:
        raise AttributeError(
            f"The learning rate attribute was set to attr_name={attr_name!r}, but neither the "
            "model, its hparams nor the DataModule has it. Pass the attribute that holds your "
            "learning rate, or update_attr=False to only search."
        )
    raise AttributeError(
        f"The learning rate finder sets the suggestion on the model, but neither the model "
        f"nor model.hparams has one of {list(LR_ATTRIBUTES)}. Store the learning rate as "
        "self.lr (or save_hyperparameters() with an lr argument), name your attribute with "
        "attr_name=..., or pass update_attr=False."
    )

"""Stochastic Weight Averaging: Lightning's ``StochasticWeightAveraging`` callback.

From ``swa_epoch_start`` on, the optimizer's LR scheduler is swapped for torch's
:class:`~torch.optim.swa_utils.SWALR` (annealing to ``swa_lrs``), and at the
start of each epoch from then on the weights are added to an equally weighted
average (torch's ``AveragedModel``). When training ends the model receives the
average and, if it has BatchNorm layers, their statistics are recomputed with
one pass over the training data (``torch.optim.swa_utils.update_bn``'s
procedure). Timings follow Lightning 2.x's, so a ported run ends with the same
weights; see :class:`StochasticWeightAveraging` for the schedule.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch.optim.swa_utils import SWALR, AveragedModel

from trainkit.callbacks.base import Callback
from trainkit.callbacks.weight_averaging import (
    AverageFunction,
    averaged_model,
    check_unsharded,
    copy_weights,
)
from trainkit.core.optim import LRSchedulerConfig
from trainkit.utilities.combined_loader import training_iterable

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

_BATCH_NORM = torch.nn.modules.batchnorm._BatchNorm


class StochasticWeightAveraging(Callback):
    """Average the weights of the last epochs, under an SWA learning rate (as Lightning).

    The schedule, with ``swa_start`` the 0-based epoch ``swa_epoch_start - 1``
    (for a float, ``int(swa_epoch_start * max_epochs) - 1``; at least 0):

    - at the start of epoch ``swa_start`` the LR scheduler (or none) is replaced
      by ``SWALR(optimizer, swa_lrs, annealing_epochs, annealing_strategy)``,
      stepped at each epoch's end;
    - at the start of each epoch from ``swa_start`` to the last, the weights
      (those the previous epochs trained) are added to the average;
    - when training ends, the model gets the averaged parameters, and BatchNorm
      statistics are recomputed: running stats reset, momentum None, one pass of
      ``training_step`` over the training batches in train mode (no gradients,
      nothing logged).

    Each step goes through a method Lightning documents, which a subclass may
    override: :meth:`update_parameters` (with :meth:`avg_fn`, or the ``avg_fn``
    given) adds the weights to the average, :meth:`transfer_weights` gives the
    model the average, :meth:`reset_batch_norm_and_save_state` and
    :meth:`reset_momenta` surround the BatchNorm pass, which runs when
    :meth:`pl_module_contains_batch_norm` says so.

    Its state (the average, how many weights it holds, the SWALR scheduler) is
    in checkpoints: a resumed run ends with the weights of an uninterrupted one.

    Args:
        swa_lrs: the SWA learning rate: one for every parameter group, or a list
            with one per group.
        swa_epoch_start: an int: start at this (1-based) epoch; a float in
            [0, 1]: at this fraction of ``max_epochs``.
        annealing_epochs: epochs SWALR takes to reach ``swa_lrs``.
        annealing_strategy: "cos" or "linear" annealing.
        avg_fn: ``avg_fn(averaged, current, n_averaged)`` to average with
            (default: the equally weighted mean).
        device: where the average lives (None: the model's device).

    Raises:
        ValueError: for a bad argument.

    Example:
        >>> swa = StochasticWeightAveraging(swa_lrs=1e-2, swa_epoch_start=3)
        >>> swa.swa_start
        2
    """

    def __init__(
        self,
        swa_lrs: float | list[float],
        swa_epoch_start: int | float = 0.8,
        annealing_epochs: int = 10,
        annealing_strategy: Literal["cos", "linear"] = "cos",
        avg_fn: AverageFunction | None = None,
        device: torch.device | str | None = torch.device("cpu"),  # noqa: B008 (Lightning's default)
    ) -> None:
        if isinstance(swa_epoch_start, bool) or not (
            (isinstance(swa_epoch_start, int) and swa_epoch_start >= 1)
            or (isinstance(swa_epoch_start, float) and 0 <= swa_epoch_start <= 1)
        ):
            raise ValueError(
                f"swa_epoch_start={swa_epoch_start!r} must be an int >= 1 (the 1-based epoch "
                "SWA starts at) or a float between 0 and 1 (a fraction of max_epochs)."
            )
        lrs = swa_lrs if isinstance(swa_lrs, list) else [swa_lrs]
        if not lrs or not all(
            isinstance(lr, (int, float)) and not isinstance(lr, bool) and lr > 0 for lr in lrs
        ):
            raise ValueError(
                f"swa_lrs={swa_lrs!r} must be a positive float, or a list of positive floats "
                "(one per parameter group of the optimizer)."
            )
        if annealing_strategy not in ("cos", "linear"):
            raise ValueError(
                f'annealing_strategy={annealing_strategy!r} must be "cos" or "linear".'
            )
        if isinstance(annealing_epochs, bool) or not (
            isinstance(annealing_epochs, int) and annealing_epochs >= 0
        ):
            raise ValueError(f"annealing_epochs={annealing_epochs!r} must be an int >= 0.")
        if avg_fn is not None and not callable(avg_fn):
            raise ValueError(
                f"avg_fn={avg_fn!r} must be a function (averaged, current, n_averaged) -> tensor."
            )
        self._swa_lrs = swa_lrs
        self._swa_epoch_start = swa_epoch_start
        self._annealing_epochs = annealing_epochs
        self._annealing_strategy = annealing_strategy
        self._avg_fn = avg_fn
        self._device = torch.device(device) if isinstance(device, str) else device
        self._start = swa_epoch_start - 1 if isinstance(swa_epoch_start, int) else 0
        self._max_epochs = -1
        self._average_model: AveragedModel | None = None
        self._swa_scheduler: SWALR | None = None
        self._latest_update_epoch = -1
        self._has_batch_norm = False
        #: Each BatchNorm layer's momentum, kept while its statistics are recomputed.
        self.momenta: dict[torch.nn.Module, float | None] = {}

    @property
    def swa_start(self) -> int:
        """The 0-based epoch SWA starts at (for a float start: known once fit starts)."""
        return max(self._start, 0)

    @property
    def swa_end(self) -> float:
        """The 0-based last epoch averaged (infinite without ``max_epochs``)."""
        return self._max_epochs - 1 if self._max_epochs != -1 else float("inf")

    @property
    def n_averaged(self) -> int:
        """How many weights the average holds."""
        return int(self._average_model.n_averaged) if self._average_model is not None else 0

    # ------------------------------------------------------------------ fit
    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Check the strategy; a fit starts a new average (a resumed one restores it)."""
        super().setup(trainer, module, stage)
        if stage == "fit":
            check_unsharded(trainer, "StochasticWeightAveraging")
            self._average_model = None
            self._swa_scheduler = None
            self._latest_update_epoch = -1

    def on_fit_start(self, trainer: Trainer, module: Module) -> None:
        """Check the optimizers and schedulers; resolve a fractional start."""
        if not module.automatic_optimization:
            raise ValueError(
                "StochasticWeightAveraging needs automatic optimization: it swaps the LR "
                "scheduler the Trainer steps, and a manual training_step steps its own. "
                "Set self.automatic_optimization = True, or average with "
                "torch.optim.swa_utils yourself."
            )
        if len(trainer.optimizers) != 1:
            raise ValueError(
                f"StochasticWeightAveraging works with 1 optimizer; configure_optimizers "
                f"returned {len(trainer.optimizers)}. Return one (as Lightning requires)."
            )
        if len(trainer.lr_scheduler_configs) > 1:
            raise ValueError(
                "StochasticWeightAveraging replaces the LR scheduler with SWALR, but "
                f"configure_optimizers returned {len(trainer.lr_scheduler_configs)}. Return "
                "at most one (as Lightning requires)."
            )
        groups = len(trainer.optimizers[0].param_groups)
        if isinstance(self._swa_lrs, list) and len(self._swa_lrs) != groups:
            raise ValueError(
                f"swa_lrs has {len(self._swa_lrs)} values, but the optimizer has {groups} "
                "parameter groups: give one learning rate per group, or a single float."
            )
        max_epochs = trainer.max_epochs  # set once a fit starts
        self._max_epochs = max_epochs if max_epochs is not None else -1
        if isinstance(self._swa_epoch_start, float):
            if self._max_epochs == -1:
                raise ValueError(
                    f"swa_epoch_start={self._swa_epoch_start} is a fraction of max_epochs, "
                    "which this fit does not set (max_steps or max_time limits it). Pass "
                    "max_epochs, or swa_epoch_start as an int (the epoch to start at)."
                )
            self._start = int(self._max_epochs * self._swa_epoch_start) - 1
        self._has_batch_norm = self.pl_module_contains_batch_norm(module)
        self._averaged(module)

    def on_train_epoch_start(self, trainer: Trainer, module: Module) -> None:
        """From ``swa_start`` on: SWALR in place of the scheduler; the weights join the average."""
        epoch = trainer.current_epoch
        if not self.swa_start <= epoch <= self.swa_end:
            return
        if self._swa_scheduler is None:
            self._install_scheduler(trainer, warn=True)
        if epoch > self._latest_update_epoch:  # a resumed epoch starts a second time
            averaged = self._averaged(module)
            average = self._avg_fn if self._avg_fn is not None else self.avg_fn
            self.update_parameters(averaged.module, module, averaged.n_averaged, average)
            self._latest_update_epoch = epoch

    def on_train_end(self, trainer: Trainer, module: Module) -> None:
        """The model gets the average; BatchNorm statistics are recomputed for it."""
        averaged = self._average_model
        if averaged is None or int(averaged.n_averaged) == 0:
            return  # stopped before SWA started: the weights stay as trained
        self.transfer_weights(averaged.module, module)
        if self._has_batch_norm:
            self._update_batch_norm(trainer, module)

    # -------------------------------------------- Lightning's documented steps
    @staticmethod
    def avg_fn(
        averaged_model_parameter: torch.Tensor,
        model_parameter: torch.Tensor,
        num_averaged: torch.Tensor,
    ) -> torch.Tensor:
        """The equally weighted mean: the average of ``n`` weights and one more.

        Args:
            averaged_model_parameter: the average so far.
            model_parameter: the weight joining it.
            num_averaged: how many weights the average holds (``n``).

        Returns:
            ``averaged + (current - averaged) / (n + 1)``.

        Example:
            >>> StochasticWeightAveraging.avg_fn(torch.tensor(1.0), torch.tensor(4.0),
            ...                                  torch.tensor(2))
            tensor(2.)
        """
        step = (model_parameter - averaged_model_parameter) / (num_averaged + 1)
        return averaged_model_parameter + step

    @staticmethod
    def update_parameters(
        average_model: torch.nn.Module,
        model: torch.nn.Module,
        n_averaged: torch.Tensor,
        avg_fn: AverageFunction,
    ) -> None:
        """Add ``model``'s parameters to the average held by ``average_model``.

        The first weights are copied; later ones are combined by ``avg_fn``.
        ``n_averaged`` is then increased by one, in place.

        Args:
            average_model: the averaged copy of the model (parameters in the same order).
            model: the model being trained.
            n_averaged: how many weights the average holds (a tensor, updated).
            avg_fn: ``avg_fn(averaged, current, n_averaged) -> new average``.
        """
        with torch.no_grad():
            for averaged, trained in zip(
                average_model.parameters(), model.parameters(), strict=True
            ):
                current = trained.detach().to(averaged.device)
                if n_averaged == 0:
                    averaged.copy_(current)
                else:
                    count = n_averaged.to(averaged.device)
                    averaged.copy_(avg_fn(averaged.detach(), current, count))
        n_averaged += 1

    @staticmethod
    def transfer_weights(src_pl_module: torch.nn.Module, dst_pl_module: torch.nn.Module) -> None:
        """Copy ``src_pl_module``'s parameters into ``dst_pl_module``'s (not the buffers).

        Args:
            src_pl_module: the module to read (the average's copy).
            dst_pl_module: the module to write (the model), each tensor on its own device.
        """
        copy_weights(src_pl_module, dst_pl_module, buffers=False)

    def reset_batch_norm_and_save_state(self, pl_module: torch.nn.Module) -> None:
        """Before the BatchNorm pass: reset each BatchNorm's running statistics, keep its
        momentum in :attr:`momenta` and set it to None (a cumulative average).

        Args:
            pl_module: the model whose BatchNorm layers are reset.
        """
        self.momenta = {}
        for norm in pl_module.modules():
            if isinstance(norm, _BATCH_NORM):
                norm.reset_running_stats()
                self.momenta[norm] = norm.momentum
                norm.momentum = None

    def reset_momenta(self) -> None:
        """After the BatchNorm pass: give each BatchNorm its momentum back."""
        for norm, momentum in self.momenta.items():
            norm.momentum = momentum  # type: ignore[assignment]

    @staticmethod
    def pl_module_contains_batch_norm(pl_module: torch.nn.Module) -> bool:
        """Whether ``pl_module`` has a BatchNorm layer (whose statistics the end recomputes).

        Args:
            pl_module: the model.

        Example:
            >>> StochasticWeightAveraging.pl_module_contains_batch_norm(
            ...     torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
            ... )
            True
        """
        return any(isinstance(module, _BATCH_NORM) for module in pl_module.modules())

    # ---------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The average, its count, the SWALR scheduler's state (Lightning's keys)."""
        averaged, scheduler = self._average_model, self._swa_scheduler
        return {
            "n_averaged": self.n_averaged,
            "latest_update_epoch": self._latest_update_epoch,
            "scheduler_state": scheduler.state_dict() if scheduler is not None else None,
            "average_model_state": averaged.module.state_dict() if averaged is not None else None,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the scheduler is restored with the Trainer's schedulers)."""
        self._latest_update_epoch = state_dict["latest_update_epoch"]
        averaged = self._average_model
        if averaged is not None and state_dict["average_model_state"] is not None:
            averaged.module.load_state_dict(state_dict["average_model_state"])
            averaged.n_averaged.fill_(state_dict["n_averaged"])

    def on_load_checkpoint(
        self, trainer: Trainer, module: Module, checkpoint: dict[str, Any]
    ) -> None:
        """A run saved after SWA started resumes with SWALR where it saved one."""
        self._averaged(module)
        saved = checkpoint.get("callbacks", {}).get(self.state_key) or {}
        if saved.get("scheduler_state") is not None:
            # The checkpoint's LR scheduler states hold SWALR's: the Trainer loads
            # them into its schedulers after this hook, so SWALR must be there.
            self._install_scheduler(trainer, warn=False)

    # ---------------------------------------------------------------- helpers
    def _averaged(self, module: Module) -> AveragedModel:
        if self._average_model is None:
            device = self._device if self._device is not None else module.device
            # A copy and its counter: update_parameters averages (the parameters only:
            # BatchNorm statistics are recomputed at the end).
            self._average_model = averaged_model(module, device, use_buffers=False)
        return self._average_model

    def _update_batch_norm(self, trainer: Trainer, module: Module) -> None:
        """``torch.optim.swa_utils.update_bn`` over the training batches, by ``training_step``."""
        modes = [(m, m.training) for m in module.modules()]
        self.reset_batch_norm_and_save_state(module)
        run = trainer.optimization.run
        batches: Any = training_iterable(trainer.train_dataloader)
        total = trainer.num_training_batches
        if total != float("inf"):
            batches = itertools.islice(batches, int(total))
        module.train()
        try:
            # The batch's forward as training computes it; what it logs is dropped.
            with torch.no_grad(), trainer.results.capture(_drop):
                for batch_idx, batch in enumerate(batches):
                    batch = run.batch_to_device(batch, 0)
                    context = run.forward_context()
                    if context is None:
                        module.training_step(batch, batch_idx)
                    else:
                        with context:
                            module.training_step(batch, batch_idx)
        finally:
            self.reset_momenta()
            for submodule, training in modes:
                submodule.training = training

    def _install_scheduler(self, trainer: Trainer, warn: bool) -> None:
        # Lightning's swap: SWALR, stepped every epoch, replaces the first scheduler.
        optimizer = trainer.optimizers[0]
        self._swa_scheduler = SWALR(
            optimizer,
            swa_lr=self._swa_lrs,  # type: ignore[arg-type]  # torch takes a float or a list
            anneal_epochs=self._annealing_epochs,
            anneal_strategy=self._annealing_strategy,
        )
        config = LRSchedulerConfig(self._swa_scheduler, interval="epoch", frequency=1)
        configs = trainer.lr_scheduler_configs
        if not configs:
            configs.append(config)
            return
        replaced = configs[0]
        if warn and (replaced.interval != "epoch" or replaced.frequency != 1):
            trainer.warn(
                f"StochasticWeightAveraging replaces {type(replaced.scheduler).__name__} "
                f"(interval={replaced.interval!r}, frequency={replaced.frequency}) with SWALR, "
                "stepped after every epoch: SWA runs per epoch only."
            )
        configs[0] = config


def _drop(name: str, value: Any, arguments: Any) -> None:
    return None

"""Finetuning callbacks: freeze parts of a model, then unfreeze them as training goes.

:class:`BaseFinetuning` is Lightning's API for this: override
``freeze_before_training`` (called when a run is set up) and
``finetune_function`` (called at each training epoch's start, once per
optimizer), using the static helpers to freeze modules and to add their
parameters to an optimizer as a new parameter group. :class:`BackboneFinetuning`
is the ready-made policy for a Module with a ``backbone`` attribute.

Resuming: the parameter groups the callback added are saved in its state (by
parameter name) with the names of the parameters that were trainable. When a
checkpoint is restored, the groups are rebuilt before the optimizers' saved
states are loaded into them, and the saved trainable flags are put back, so a
resumed run trains the same parameters with the same groups as the run it
continues.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Generator, Iterable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from trainkit.callbacks.base import Callback

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

Modules = nn.Module | Iterable[Any]


def multiplicative(epoch: int) -> float:
    """The default ``lambda_func`` of :class:`BackboneFinetuning`: double the LR each epoch.

    Args:
        epoch: the epoch about to start (unused).

    Returns:
        2.0
    """
    return 2.0


class BaseFinetuning(Callback):
    """Freeze modules before training and unfreeze them on a schedule you write.

    Override :meth:`freeze_before_training` and :meth:`finetune_function`.

    Example:
        >>> class FeatureExtractorFreezeUnfreeze(BaseFinetuning):
        ...     def __init__(self, unfreeze_at_epoch=10):
        ...         super().__init__()
        ...         self._unfreeze_at_epoch = unfreeze_at_epoch
        ...     def freeze_before_training(self, pl_module):
        ...         self.freeze(pl_module.feature_extractor)
        ...     def finetune_function(self, pl_module, current_epoch, optimizer):
        ...         if current_epoch == self._unfreeze_at_epoch:
        ...             self.unfreeze_and_add_param_group(
        ...                 modules=pl_module.feature_extractor, optimizer=optimizer
        ...             )
    """

    def __init__(self) -> None:
        #: Per optimizer index, its parameter groups with parameter names for params.
        self._internal_optimizer_metadata: dict[int, list[dict[str, Any]]] = {}
        self._restarting = False
        self._trainable: list[str] | None = None  # restored trainable parameter names

    # ---------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """The parameter groups added so far (parameters by name), and what is trainable."""
        return {
            "internal_optimizer_metadata": self._internal_optimizer_metadata,
            "trainable_parameters": self._trainable_names(),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved; the groups are rebuilt when fit starts.

        Args:
            state_dict: what :meth:`state_dict` returned when the checkpoint was saved.
        """
        self._restarting = True
        self._internal_optimizer_metadata = state_dict.get(
            "internal_optimizer_metadata", state_dict
        )
        self._trainable = state_dict.get("trainable_parameters")

    def _trainable_names(self) -> list[str]:
        module = self._logging_module
        if module is None:
            return []
        return [name for name, p in module.named_parameters() if p.requires_grad]

    # ---------------------------------------------------------------- hooks
    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Call :meth:`freeze_before_training` when a run is set up."""
        super().setup(trainer, module, stage)
        self.freeze_before_training(module)

    def on_load_checkpoint(
        self, trainer: Trainer, module: Module, checkpoint: dict[str, Any]
    ) -> None:
        """Rebuild the added parameter groups before the optimizers' states are loaded."""
        saved = (checkpoint.get("callbacks") or {}).get(self.state_key)
        if saved is not None:
            self.load_state_dict(saved)
            self._restore(trainer, module)

    def on_fit_start(self, trainer: Trainer, module: Module) -> None:
        """Rebuild the added parameter groups if a restored state has not done so yet."""
        self._restore(trainer, module)

    def on_train_epoch_start(self, trainer: Trainer, module: Module) -> None:
        """Run :meth:`finetune_function` for each optimizer; remember the groups it added."""
        for index, optimizer in enumerate(trainer.optimizers):
            count = len(optimizer.param_groups)
            self.finetune_function(module, trainer.current_epoch, optimizer)
            self._store(module, index, count, optimizer.param_groups)

    # --------------------------------------------------------- to override
    def freeze_before_training(self, pl_module: Module) -> None:
        """Freeze what must not train at first (called when a run is set up).

        Args:
            pl_module: the run's Module.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must override freeze_before_training(pl_module), "
            "e.g. with self.freeze(pl_module.backbone)."
        )

    def finetune_function(
        self, pl_module: Module, epoch: int, optimizer: torch.optim.Optimizer
    ) -> None:
        """Unfreeze on your schedule (called at each training epoch's start, per optimizer).

        Args:
            pl_module: the run's Module.
            epoch: the epoch starting, counted from 0.
            optimizer: one of the run's optimizers.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must override finetune_function(pl_module, epoch, "
            "optimizer), e.g. calling self.unfreeze_and_add_param_group(...) at some epoch."
        )

    # -------------------------------------------------------------- helpers
    @staticmethod
    def flatten_modules(modules: Modules) -> list[nn.Module]:
        """The leaf modules of ``modules``, and the modules that own parameters directly.

        Args:
            modules: a module, a ``ModuleDict``, or an iterable (possibly nested) of modules.

        Returns:
            The modules, in order.
        """
        if isinstance(modules, nn.ModuleDict):
            modules = modules.values()
        if isinstance(modules, nn.Module):
            found: Iterable[nn.Module] = modules.modules()
        else:
            found = [leaf for item in modules for leaf in BaseFinetuning.flatten_modules(item)]
        return [m for m in found if not list(m.children()) or m._parameters]

    @staticmethod
    def filter_params(
        modules: Modules, train_bn: bool = True, requires_grad: bool = True
    ) -> Generator[nn.Parameter, None, None]:
        """Yield the parameters of ``modules`` whose ``requires_grad`` equals ``requires_grad``.

        Args:
            modules: a module or an iterable of modules.
            train_bn: include BatchNorm parameters.
            requires_grad: which parameters to yield.
        """
        for module in BaseFinetuning.flatten_modules(modules):
            if isinstance(module, _BatchNorm) and not train_bn:
                continue
            for param in module.parameters(recurse=False):
                if param.requires_grad == requires_grad:
                    yield param

    @staticmethod
    def make_trainable(modules: Modules) -> None:
        """Let every parameter of ``modules`` train (BatchNorm tracks running stats again).

        Args:
            modules: a module or an iterable of modules.
        """
        for module in BaseFinetuning.flatten_modules(modules):
            if isinstance(module, _BatchNorm):
                module.track_running_stats = True
            for param in module.parameters(recurse=False):
                param.requires_grad = True

    @staticmethod
    def freeze_module(module: nn.Module) -> None:
        """Freeze one module's own parameters (a BatchNorm stops tracking running stats).

        Args:
            module: the module.
        """
        if isinstance(module, _BatchNorm):
            module.track_running_stats = False
        for param in module.parameters(recurse=False):
            param.requires_grad = False

    @staticmethod
    def freeze(modules: Modules, train_bn: bool = True) -> None:
        """Freeze ``modules``; with ``train_bn``, their BatchNorm layers keep training.

        Args:
            modules: a module or an iterable of modules.
            train_bn: leave BatchNorm layers trainable.
        """
        for module in BaseFinetuning.flatten_modules(modules):
            if isinstance(module, _BatchNorm) and train_bn:
                BaseFinetuning.make_trainable(module)
            else:
                BaseFinetuning.freeze_module(module)

    @staticmethod
    def filter_on_optimizer(
        optimizer: torch.optim.Optimizer, params: Iterable[nn.Parameter]
    ) -> list[nn.Parameter]:
        """The parameters of ``params`` that are in none of ``optimizer``'s groups.

        Args:
            optimizer: the optimizer.
            params: candidate parameters.

        Returns:
            Those not in the optimizer yet (a warning names the skipped ones' count).
        """
        present = {id(p) for group in optimizer.param_groups for p in group["params"]}
        kept: list[nn.Parameter] = []
        skipped = 0
        for param in params:
            if id(param) in present:
                skipped += 1
            else:
                kept.append(param)
        if skipped:
            warnings.warn(
                f"The provided params to be frozen already exist within another group of this "
                f"optimizer. Those parameters will be skipped ({skipped} of them). HINT: Did "
                "you init your optimizer in `configure_optimizer` as such: "
                f"{type(optimizer).__name__}(filter(lambda p: p.requires_grad, "
                "self.parameters()), ...)? Create it with only the trainable parameters.",
                stacklevel=3,
            )
        return kept

    @staticmethod
    def unfreeze_and_add_param_group(
        modules: Modules,
        optimizer: torch.optim.Optimizer,
        lr: float | None = None,
        initial_denom_lr: float = 10.0,
        train_bn: bool = True,
    ) -> None:
        """Unfreeze ``modules`` and add their parameters to ``optimizer`` as a new group.

        Args:
            modules: a module or an iterable of modules.
            optimizer: the optimizer to add the group to.
            lr: the group's learning rate; None: the first group's LR / ``initial_denom_lr``.
            initial_denom_lr: the divisor used when ``lr`` is None.
            train_bn: include BatchNorm parameters in the group.
        """
        BaseFinetuning.make_trainable(modules)
        group_lr = optimizer.param_groups[0]["lr"] if lr is None else float(lr)
        denominator = initial_denom_lr if lr is None else 1.0
        params = BaseFinetuning.filter_params(modules, train_bn=train_bn, requires_grad=True)
        new = BaseFinetuning.filter_on_optimizer(optimizer, params)
        if new:
            optimizer.add_param_group({"params": new, "lr": group_lr / denominator})

    # ------------------------------------------------------------ internals
    @staticmethod
    def _by_name(groups: Iterable[dict[str, Any]], names: dict[Any, Any]) -> list[dict[str, Any]]:
        # Copies of the groups with their params mapped (parameter <-> name).
        return [{**group, "params": [names[p] for p in group["params"]]} for group in groups]

    def _store(self, module: Module, index: int, count: int, groups: list[dict[str, Any]]) -> None:
        names = {p: n for n, p in module.named_parameters()}
        if index not in self._internal_optimizer_metadata:
            self._internal_optimizer_metadata[index] = self._by_name(groups, names)
        elif count != len(groups):
            self._internal_optimizer_metadata[index].extend(self._by_name(groups[count:], names))

    def _restore(self, trainer: Trainer, module: Module) -> None:
        if not self._restarting:
            return
        self._restarting = False
        parameters = dict(module.named_parameters())
        for index, optimizer in enumerate(trainer.optimizers):
            saved = self._internal_optimizer_metadata.get(index)
            if saved is not None and len(saved) != len(optimizer.param_groups):
                optimizer.param_groups = self._by_name(saved, parameters)
        if self._trainable is not None:
            trainable = set(self._trainable)
            for name, param in parameters.items():
                param.requires_grad = name in trainable
        else:  # a state saved without the flags: what the restored groups hold trains
            for optimizer in trainer.optimizers:
                for group in optimizer.param_groups:
                    for param in group["params"]:
                        param.requires_grad = True


class BackboneFinetuning(BaseFinetuning):
    """Train the head first; unfreeze ``pl_module.backbone`` at an epoch, with a rising LR.

    At ``unfreeze_backbone_at_epoch`` the backbone's parameters join the optimizer
    as a new group with LR ``backbone_initial_lr`` (default: the first group's LR
    times ``backbone_initial_ratio_lr``). At each later epoch the group's LR is
    multiplied by ``lambda_func(epoch + 1)``, and with ``should_align`` never
    exceeds the first group's LR.

    Args:
        unfreeze_backbone_at_epoch: the epoch (from 0) at which the backbone unfreezes.
        lambda_func: epoch -> the factor the backbone's LR is multiplied by.
        backbone_initial_ratio_lr: the backbone's first LR as a fraction of the current LR.
        backbone_initial_lr: the backbone's first LR (overrides the ratio).
        should_align: cap the backbone's LR at the first group's LR.
        initial_denom_lr: passed to :meth:`unfreeze_and_add_param_group`.
        train_bn: train the backbone's BatchNorm layers once unfrozen.
        verbose: print the LRs each epoch after unfreezing (global rank 0).
        rounding: digits the printed LRs are rounded to.

    Raises:
        ValueError: when fit starts and the Module has no ``nn.Module`` ``backbone``.

    Example:
        >>> finetuning = BackboneFinetuning(unfreeze_backbone_at_epoch=10)
    """

    def __init__(
        self,
        unfreeze_backbone_at_epoch: int = 10,
        lambda_func: Callable[[int], float] = multiplicative,
        backbone_initial_ratio_lr: float = 10e-2,
        backbone_initial_lr: float | None = None,
        should_align: bool = True,
        initial_denom_lr: float = 10.0,
        train_bn: bool = True,
        verbose: bool = False,
        rounding: int = 12,
    ) -> None:
        super().__init__()
        self.unfreeze_backbone_at_epoch = unfreeze_backbone_at_epoch
        self.lambda_func = lambda_func
        self.backbone_initial_ratio_lr = backbone_initial_ratio_lr
        self.backbone_initial_lr = backbone_initial_lr
        self.should_align = should_align
        self.initial_denom_lr = initial_denom_lr
        self.train_bn = train_bn
        self.verbose = verbose
        self.rounding = rounding
        self.previous_backbone_lr: float | None = None
        self._is_global_zero = True

    def state_dict(self) -> dict[str, Any]:
        """The base state and the backbone's last LR."""
        return {**super().state_dict(), "previous_backbone_lr": self.previous_backbone_lr}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved.

        Args:
            state_dict: what :meth:`state_dict` returned when the checkpoint was saved.
        """
        self.previous_backbone_lr = state_dict["previous_backbone_lr"]
        super().load_state_dict(state_dict)

    def on_fit_start(self, trainer: Trainer, module: Module) -> None:
        """Check that the Module has a ``backbone``, then rebuild restored groups."""
        if not isinstance(getattr(module, "backbone", None), nn.Module):
            raise ValueError(
                "The LightningModule should have a nn.Module `backbone` attribute: "
                f"BackboneFinetuning unfreezes {type(module).__name__}.backbone. Set "
                "self.backbone = <the nn.Module to finetune> in your Module's __init__, "
                "or subclass BaseFinetuning to freeze other modules."
            )
        self._is_global_zero = trainer.is_global_zero
        super().on_fit_start(trainer, module)

    def freeze_before_training(self, pl_module: Module) -> None:
        """Freeze ``pl_module.backbone`` (its BatchNorm layers stay trainable)."""
        backbone = getattr(pl_module, "backbone", None)
        if isinstance(backbone, nn.Module):
            self.freeze(backbone)

    def finetune_function(
        self, pl_module: Module, epoch: int, optimizer: torch.optim.Optimizer
    ) -> None:
        """Unfreeze the backbone at its epoch; afterwards, raise its LR by ``lambda_func``.

        Args:
            pl_module: the run's Module.
            epoch: the epoch starting, counted from 0.
            optimizer: one of the run's optimizers.
        """
        current_lr = float(optimizer.param_groups[0]["lr"])
        if epoch == self.unfreeze_backbone_at_epoch:
            backbone_lr = (
                self.backbone_initial_lr
                if self.backbone_initial_lr is not None
                else current_lr * self.backbone_initial_ratio_lr
            )
            self.previous_backbone_lr = backbone_lr
            self.unfreeze_and_add_param_group(
                pl_module.backbone,
                optimizer,
                backbone_lr,
                train_bn=self.train_bn,
                initial_denom_lr=self.initial_denom_lr,
            )
        elif epoch > self.unfreeze_backbone_at_epoch and self.previous_backbone_lr is not None:
            backbone_lr = self.lambda_func(epoch + 1) * self.previous_backbone_lr
            if self.should_align and backbone_lr > current_lr:
                backbone_lr = current_lr
            optimizer.param_groups[-1]["lr"] = backbone_lr
            self.previous_backbone_lr = backbone_lr
        else:
            return
        if self.verbose and self._is_global_zero:
            print(
                f"Current lr: {round(current_lr, self.rounding)}, "
                f"Backbone lr: {round(backbone_lr, self.rounding)}",
                flush=True,
            )

"""Module: the user's ``nn.Module`` plus its steps, optimizers and logging.

Hook and method names are Lightning's, so porting a ``LightningModule`` is mostly
changing the import. The Module's parts live beside it: its do-nothing hooks
(``hooks.py``), hyperparameters (``hyperparameters.py``), checkpoint loading
(``loading.py``), export (``export.py``), ``self.log``'s argument checks
(``log_arguments.py``) and how the loops call its steps (``steps.py``). The names
other code imports from here are re-exported.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

import torch
from torch import nn

from trainkit.core import export, loading
from trainkit.core.hooks import DataHooks, ModuleHooks
from trainkit.core.hyperparameters import AttributeDict, HyperparametersMixin
from trainkit.core.loading import ModuleT
from trainkit.core.log_arguments import check_log_options, dict_entries, warn_unattached
from trainkit.core.optim import clip_optimizer_gradients, clip_value
from trainkit.core.steps import fit_step_arguments, loss_from_output

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer

__all__ = [
    "AttributeDict",
    "HyperparametersMixin",
    "Module",
    "ModuleHooks",
    "ModuleT",
    "StageSplit",
    "fit_step_arguments",
    "loss_from_output",
    "overrides",
]


class StageSplit:
    """What the default ``forward`` of a listed model runs: its layers in order, or a split.

    A strategy that cuts the layers listed by ``Module.configure_stages()`` into
    stages sets :attr:`runner` to the split version (and back to None when it is
    done). It is not a submodule of the Module, so ``state_dict`` names stay the
    model's own.
    """

    def __init__(self) -> None:
        #: The module running the listed layers (None: run them in order).
        self.runner: nn.Module | None = None


class Module(DataHooks, HyperparametersMixin, ModuleHooks, nn.Module):
    """Base class for models trained by :class:`trainkit.Trainer`.

    Subclass it, define ``forward``, ``training_step`` and ``configure_optimizers``
    (and, optionally, ``validation_step``, ``test_step``, ``predict_step`` and hooks).

    Example:
        >>> import torch
        >>> import trainkit
        >>> class Regressor(trainkit.Module):
        ...     def __init__(self, lr: float = 0.1):
        ...         super().__init__()
        ...         self.save_hyperparameters()
        ...         self.layer = torch.nn.Linear(4, 1)
        ...     def training_step(self, batch, batch_idx):
        ...         x, y = batch
        ...         loss = torch.nn.functional.mse_loss(self.layer(x), y)
        ...         self.log("train/loss", loss)
        ...         return loss
        ...     def configure_optimizers(self):
        ...         return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
        >>> Regressor(lr=0.05).hparams.lr
        0.05
    """

    #: Where checkpoints keep the hyperparameters (as in Lightning).
    CHECKPOINT_HYPER_PARAMS_KEY = "hyper_parameters"
    #: The name the hyperparameters were saved under.
    CHECKPOINT_HYPER_PARAMS_NAME = "hparams_name"
    #: The type of the saved hyperparameters, when they are not a plain dict.
    CHECKPOINT_HYPER_PARAMS_TYPE = "hparams_type"

    # What TorchScript must not compile (to_torchscript).
    __jit_ignored_attributes__: list[str] = ["example_input_array"]
    __jit_unused_properties__: list[str] = [
        "trainer",
        "automatic_optimization",
        "stage_split",
        "example_input_array",
        "logger",
        "loggers",
        "global_rank",
        "local_rank",
        "device",
        "on_gpu",
        "dtype",
        "_dtype",
        "global_step",
        "current_epoch",
        "hparams",
        "hparams_initial",
        "logs_hyperparams",
        "strict_loading",
        "device_mesh",
        "fabric",
    ]

    _exporting = False  # True while to_torchscript / to_onnx runs

    def __init__(self) -> None:
        super().__init__()
        # Only underscored names on the instance, as Lightning's: projects build a
        # model's config from the public entries of vars(self).
        self._trainer: Trainer | None = None
        self._automatic_optimization = True
        self._strict_loading: bool | None = None  # None: not set (True)
        self._toggled: dict[int, tuple[torch.Tensor, bool]] | None = None
        self._stage_split = StageSplit()
        self._example_input_array: Any = None

    @property
    def automatic_optimization(self) -> bool:
        """True (the default): the Trainer steps the optimizers. Set it to False in
        ``__init__`` to step them yourself in ``training_step``."""
        return self._automatic_optimization

    @automatic_optimization.setter
    def automatic_optimization(self, automatic: bool) -> None:
        self._automatic_optimization = automatic

    @property
    def example_input_array(self) -> Any:
        """One input for ``forward`` (a tensor, tuple or dict; None: none): the model
        summary runs it for sizes and FLOPs, loggers for the graph, ``to_onnx`` to
        export, and ``HybridStrategy(balance="time")`` to time each layer."""
        return self._example_input_array

    @example_input_array.setter
    def example_input_array(self, example: Any) -> None:
        self._example_input_array = example

    @property
    def stage_split(self) -> StageSplit:
        """How the default forward runs the layers of configure_stages() (a strategy
        may split them)."""
        return self._stage_split

    # --------------------------------------------------------------- context
    @property
    def trainer(self) -> Trainer:
        """The Trainer running this module (an error outside fit/validate/test/predict)."""
        if self._trainer is None and not self._exporting:
            raise RuntimeError(
                f"{type(self).__name__} is not attached to a Trainer. `self.trainer` is "
                "available inside fit/validate/test/predict."
            )
        return self._trainer  # type: ignore[return-value]  # None only while exporting

    @trainer.setter
    def trainer(self, trainer: Trainer | None) -> None:
        # Also attaches the Module's own submodules that are Modules.
        for module in self.modules():
            if isinstance(module, Module):
                module._trainer = trainer

    @property
    def fabric(self) -> None:
        """Lightning's link to a ``Fabric``: None, as under a Trainer (trainkit has none)."""
        return None

    def __getstate__(self) -> dict[str, Any]:
        # Pickled (torch.save(module), deepcopy) without the Trainer, as in Lightning: it
        # holds the run's hooks and open files, and a copy belongs to no run.
        state: dict[str, Any] = super().__getstate__()  # type: ignore[no-untyped-call]
        state["_trainer"] = None
        return state

    @property
    def strict_loading(self) -> bool:
        """Whether a checkpoint's weights must name exactly this module's keys (default True).

        Set ``self.strict_loading = False`` in ``__init__`` when the module's
        ``state_dict`` leaves parts out (a frozen backbone loaded from elsewhere,
        say): resuming a fit, ``ckpt_path=`` in validate/test/predict and
        ``load_from_checkpoint`` then load the keys the checkpoint has and warn
        about the others. A key whose shape differs is an error either way.
        """
        return getattr(self, "_strict_loading", None) is not False

    @strict_loading.setter
    def strict_loading(self, strict: bool | None) -> None:
        self._strict_loading = None if strict is None else bool(strict)  # None: not set

    @property
    def logger(self) -> Any:
        """The Trainer's first logger (None without a Trainer or loggers)."""
        return self._trainer.logger if self._trainer is not None else None

    @property
    def loggers(self) -> list[Any]:
        """The Trainer's loggers (empty without a Trainer)."""
        return list(self._trainer.loggers) if self._trainer is not None else []

    @property
    def global_rank(self) -> int:
        """This process's rank among all processes (0 without a Trainer)."""
        return self._trainer.global_rank if self._trainer is not None else 0

    @property
    def local_rank(self) -> int:
        """This process's rank on its machine (0 without a Trainer)."""
        return self._trainer.local_rank if self._trainer is not None else 0

    @property
    def device_mesh(self) -> Any:
        """The ``("data_parallel", "tensor_parallel")`` device mesh under
        ``ModelParallelStrategy``, for ``configure_model()`` to parallelize the layers
        over (None under other strategies and without a Trainer)."""
        trainer = self._trainer
        return trainer.strategy.module_device_mesh if trainer is not None else None

    @property
    def dtype(self) -> torch.dtype:
        """The floating-point type of the module's parameters (float32 without any); also
        ``_dtype``, Lightning's private name for it, which projects read."""
        return next((p.dtype for p in self.parameters() if p.is_floating_point()), torch.float32)

    _dtype = dtype

    def all_gather(self, data: Any, group: Any = None, sync_grads: bool = False) -> Any:
        """Gather ``data`` (a tensor, a number, or tensors in lists/dicts) from every process.

        Each tensor comes back stacked along a new first dimension, one entry per
        process, in rank order; in a single process ``data`` comes back as it is,
        with no new dimension (Lightning's documented behaviour).

        Args:
            data: a tensor or a collection of tensors, the same shapes on every process.
            group: a ``torch.distributed`` process group to gather over (None: all).
            sync_grads: let gradients flow back through the gather to each process's
                own ``data`` (for losses over every process's outputs, e.g.
                contrastive losses).
        """
        trainer = self._trainer
        if trainer is None or trainer.world_size == 1:
            return data
        if isinstance(data, Mapping):
            return {key: self.all_gather(value, group, sync_grads) for key, value in data.items()}
        if isinstance(data, (list, tuple)):
            return type(data)(self.all_gather(value, group, sync_grads) for value in data)
        if not isinstance(data, torch.Tensor):
            data = torch.as_tensor(data, device=self.device)
        return trainer.strategy.all_gather(data, group=group, sync_grads=sync_grads)

    def print(self, *args: Any, **kwargs: Any) -> None:
        """``print`` from global rank 0 only (every process runs the same code).

        Args:
            *args: passed to ``print``.
            **kwargs: passed to ``print``.
        """
        if self._trainer is None or self._trainer.is_global_zero:
            print(*args, **kwargs)

    def freeze(self) -> None:
        """Make every parameter untrainable and switch to eval mode."""
        for parameter in self.parameters():
            parameter.requires_grad = False
        self.eval()

    def unfreeze(self) -> None:
        """Make every parameter trainable and switch to train mode."""
        for parameter in self.parameters():
            parameter.requires_grad = True
        self.train()

    @property
    def on_gpu(self) -> bool:
        """Whether the module runs on a CUDA device."""
        return self.device.type == "cuda"

    @property
    def device(self) -> torch.device:
        """The device the module's parameters are on (the strategy's device when attached)."""
        if self._trainer is not None:
            return self._trainer.strategy.root_device
        tensors = itertools.chain(self.parameters(), self.buffers())
        return next((tensor.device for tensor in tensors), torch.device("cpu"))

    @property
    def global_step(self) -> int:
        """Optimizer steps taken so far (0 when not attached to a Trainer)."""
        return self._trainer.global_step if self._trainer is not None else 0

    @property
    def current_epoch(self) -> int:
        """The current epoch, counted from 0 (0 when not attached to a Trainer)."""
        return self._trainer.current_epoch if self._trainer is not None else 0

    @classmethod
    def load_from_checkpoint(
        cls: type[ModuleT],
        checkpoint_path: str | os.PathLike[str] | IO[bytes],
        map_location: Any = "cpu",
        hparams_file: str | os.PathLike[str] | None = None,
        strict: bool | None = None,
        weights_only: bool | None = None,
        **kwargs: Any,
    ) -> ModuleT:
        """Build the module from a checkpoint's hyperparameters and load its weights.

        Reads checkpoints written by trainkit and by Lightning 2.x. The module is
        built with the saved hyperparameters (``save_hyperparameters()``), updated
        by ``kwargs``; then ``on_load_checkpoint(checkpoint)`` runs and the
        weights are loaded. Unlike Lightning, the module is returned in eval mode.

        Args:
            checkpoint_path: a checkpoint file (trainkit's or Lightning's), or a binary
                file object open on one.
            map_location: where to load the tensors (CPU by default): a device,
                a string, a dict or a function, as for ``torch.load``. The module
                is moved to the device its weights are loaded on.
            hparams_file: a ``.yaml`` file whose hyperparameters replace the saved ones.
            strict: whether every key of the checkpoint's and the module's
                ``state_dict`` must match (default: the module's ``strict_loading``,
                or True). With False, unmatched keys are skipped with a warning.
            weights_only: as for ``torch.load``: None or True reads tensors and
                plain values only (no code from the file runs); False, for a file
                you trust, unpickles any object (a loss saved as a hyperparameter).
            **kwargs: ``__init__`` arguments that replace the saved ones.

        Returns:
            The module, in eval mode, ready for inference.

        Raises:
            CheckpointError: the file is missing, damaged, or does not fit.
            TypeError: the class cannot be built from the saved hyperparameters.
            ValueError: ``strict`` contradicts the module's ``strict_loading``.
        """
        return loading.load_from_checkpoint(
            cls, checkpoint_path, map_location, hparams_file, strict, weights_only, kwargs
        )

    # --------------------------------------------------------------- logging
    def log(
        self,
        name: str,
        value: Any,
        prog_bar: bool = False,
        logger: bool | None = None,
        on_step: bool | None = None,
        on_epoch: bool | None = None,
        reduce_fx: str | Callable[..., Any] = "mean",
        enable_graph: bool = False,
        sync_dist: bool = False,
        sync_dist_group: Any | None = None,
        add_dataloader_idx: bool = True,
        batch_size: int | None = None,
        metric_attribute: str | None = None,
        rank_zero_only: bool = False,
    ) -> None:
        """Log a scalar (or a torchmetrics ``Metric``) from inside a step or hook.

        Values stay on the device; they are read only when a logger writes or the
        progress bar draws, so logging every step costs no device synchronisation.
        The arguments are Lightning's, in Lightning's order.

        Names: with ``on_step`` and ``on_epoch`` both True, loggers receive
        ``name_step`` and ``name_epoch``, and callbacks also see ``name`` (the step
        value during a training epoch, the epoch value after it). With several
        evaluation dataloaders, names end in ``/dataloader_idx_N``.

        Args:
            name: the metric's name, e.g. ``"train/loss"``.
            value: a one-element tensor, a Python or NumPy number, or a torchmetrics
                ``Metric`` (its forward value per step; ``compute()`` at the epoch's
                end, after which it is reset).
            prog_bar: show it in the progress bar.
            logger: send it to the loggers (None: True).
            on_step: record the per-step value (default: True in training steps and
                batch hooks, False in evaluation and in epoch hooks).
            on_epoch: aggregate over the epoch with ``reduce_fx`` (default: False in
                training steps and batch hooks, True in evaluation and epoch hooks).
            reduce_fx: how epoch values combine: "mean" (weighted by batch size;
                "avg" too), "sum", "max" or "min", in any case, or ``torch.mean``,
                ``torch.sum``, ``torch.max``, ``torch.min``.
            enable_graph: trainkit always logs detached values (True warns).
            sync_dist: reduce it across processes when it is read (not applied to
                ``Metric`` objects, which synchronise themselves).
            sync_dist_group: trainkit reduces over all processes (a group warns).
            add_dataloader_idx: with several evaluation dataloaders, append
                ``/dataloader_idx_N`` to the name. If False, each dataloader must
                log under its own name.
            batch_size: weight of this value in an epoch mean (default: inferred
                from the batch).
            metric_attribute: accepted for compatibility; trainkit needs no
                attribute name to handle a logged ``Metric``.
            rank_zero_only: whether only global rank 0 calls this (then, with several
                processes, it cannot also be ``sync_dist``, which needs every one).
        """
        if enable_graph or sync_dist_group is not None or (rank_zero_only and sync_dist):
            check_log_options(
                self, name, enable_graph, sync_dist_group, rank_zero_only and sync_dist
            )
        # The attribute itself, not the ``trainer`` property: one call less per value logged.
        trainer = self._trainer
        if trainer is None:  # a step method called by a test: it runs (as in Lightning)
            warn_unattached(self, name)
            return
        trainer.results.log(
            name,
            value,
            on_step,
            on_epoch,
            prog_bar,
            logger,
            sync_dist,
            reduce_fx,
            batch_size,
            add_dataloader_idx,
        )

    def log_dict(
        self,
        dictionary: Mapping[str, Any] | Any,
        prog_bar: bool = False,
        logger: bool | None = None,
        on_step: bool | None = None,
        on_epoch: bool | None = None,
        reduce_fx: str | Callable[..., Any] = "mean",
        enable_graph: bool = False,
        sync_dist: bool = False,
        sync_dist_group: Any | None = None,
        add_dataloader_idx: bool = True,
        batch_size: int | None = None,
        rank_zero_only: bool = False,
    ) -> None:
        """Log every entry of ``dictionary`` with the same options as :meth:`log`.

        Args:
            dictionary: metric name to value, or a torchmetrics ``MetricCollection``
                (each of its metrics is logged under its name, prefix included).
            prog_bar: see :meth:`log`.
            logger: see :meth:`log`.
            on_step: see :meth:`log`.
            on_epoch: see :meth:`log`.
            reduce_fx: see :meth:`log`.
            enable_graph: see :meth:`log`.
            sync_dist: see :meth:`log`.
            sync_dist_group: see :meth:`log`.
            add_dataloader_idx: see :meth:`log`.
            batch_size: see :meth:`log`.
            rank_zero_only: see :meth:`log`.
        """
        for name, value in dict_entries(dictionary):
            self.log(
                name,
                value,
                prog_bar=prog_bar,
                logger=logger,
                on_step=on_step,
                on_epoch=on_epoch,
                reduce_fx=reduce_fx,
                enable_graph=enable_graph,
                sync_dist=sync_dist,
                sync_dist_group=sync_dist_group,
                add_dataloader_idx=add_dataloader_idx,
                batch_size=batch_size,
                rank_zero_only=rank_zero_only,
            )

    # ------------------------------------------------------- steps (override)
    def training_step(self, batch: Any, batch_idx: int) -> Any:
        """Compute the training loss of one batch.

        Args:
            batch: the batch, on the module's device.
            batch_idx: index of the batch within the epoch.

        Returns:
            A scalar loss tensor, or a dict holding it under "loss" (other entries
            are passed to ``on_train_batch_end``). With manual optimization, any value.
        """
        raise NotImplementedError(
            f"{type(self).__name__} has no training_step(). Define "
            "`def training_step(self, batch, batch_idx)` returning the loss to use Trainer.fit."
        )

    def validation_step(self, batch: Any, batch_idx: int) -> Any:
        """Evaluate one validation batch; log metrics with ``self.log``.

        Args:
            batch: the batch, on the module's device.
            batch_idx: index of the batch within the loader. With several
                validation loaders, a third argument ``dataloader_idx`` is passed.
        """
        return None

    def test_step(self, batch: Any, batch_idx: int) -> Any:
        """Evaluate one test batch; log metrics with ``self.log``.

        Args:
            batch: the batch, on the module's device.
            batch_idx: index of the batch within the loader.
        """
        raise NotImplementedError(
            f"{type(self).__name__} has no test_step(). Define "
            "`def test_step(self, batch, batch_idx)` to use Trainer.test."
        )

    def predict_step(self, *args: Any, **kwargs: Any) -> Any:
        """Return predictions for one batch. Default: ``self(batch)``.

        Called as ``predict_step(batch, batch_idx)``, with ``dataloader_idx`` as a
        third argument when there are several dataloaders. Override it with the
        arguments you need (``(self, batch)`` alone works too).

        Args:
            *args: ``batch`` (on the module's device), ``batch_idx``, ``dataloader_idx``.
            **kwargs: the same, by name.
        """
        batch = args[0] if args else kwargs["batch"]
        return self(batch)

    def configure_optimizers(self) -> Any:
        """Return the optimizer(s) and, optionally, LR schedulers.

        Accepted forms: an optimizer; a list of optimizers; a pair
        ``([optimizers], [schedulers])``; a dict ``{"optimizer": opt,
        "lr_scheduler": scheduler or {"scheduler": s, "interval": "step" | "epoch",
        "frequency": n, "monitor": "val/loss"}}``; or a list of such dicts.
        """
        raise NotImplementedError(
            f"{type(self).__name__} has no configure_optimizers(). Define it and return "
            "an optimizer, e.g. `return torch.optim.Adam(self.parameters(), lr=1e-3)`."
        )

    # ------------------------------------------------------ model parallelism
    def configure_model(self) -> None:
        """Build layers late, on every rank, before the strategy sets the model up.

        The Trainer calls it at the start of every fit, validate, test and predict
        (after the ``setup`` hooks, as Lightning does), under every strategy: layers
        made here are made on this process's device, in the precision's dtype
        (a "true" precision's, e.g. bfloat16). Under ``FSDPStrategy`` they are made
        on the meta device (``meta_init``) and get memory only as each rank's
        shards, initialized by their ``reset_parameters()``, so a model larger than
        one rank never exists whole. ``load_from_checkpoint`` calls it too. Since it
        runs once per stage, build only what is not built yet.
        """
        if overrides(self, "configure_sharded_model", follow_wrapped=True):  # the older name
            self.configure_sharded_model()

    def configure_sharded_model(self) -> None:
        """Lightning's older name of :meth:`configure_model`: override that one instead.

        A Module that overrides only this has it called where ``configure_model``
        would be, with a warning; overriding both is an error (as in Lightning).
        """

    def configure_stages(self) -> nn.Sequential | list[nn.Module] | None:
        """The model's layers in order, for the hybrid strategy to cut into stages.

        Return the ``nn.Sequential`` your ``forward`` runs (an attribute of this
        module), or a list of this module's layers in order; with a list, leave
        ``forward`` undefined: the default one runs the listed layers in order
        (the hybrid strategy refuses a list together with a ``forward`` of your own).
        ``HybridStrategy`` splits them into contiguous stages on its devices; the
        module's ``state_dict`` keeps its names, so checkpoints load anywhere.
        The default, None, means the model cannot be split.
        """
        return None

    def pipeline_loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The loss of one micro-batch, for ``HybridStrategy(pipeline_size>1)``.

        When the stages are spread over processes, no process runs the whole
        ``training_step``: the batch ``(inputs, target)`` flows through the stages,
        and the last one calls this with the stages' output. Return the *mean* over
        the micro-batch's samples (as ``F.cross_entropy`` does). trainkit logs the
        batch's loss as ``train/loss``.

        Args:
            output: the last stage's output for a micro-batch.
            target: the matching rows of the batch's targets.
        """
        raise NotImplementedError(
            f"{type(self).__name__} has no pipeline_loss(output, target). Pipelining across "
            "processes runs the stages, not training_step; define pipeline_loss to return "
            "the loss, e.g. `return F.cross_entropy(output, target)`."
        )

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Runs the layers :meth:`configure_stages` lists, in order; override it otherwise.

        When a strategy has split them into stages (:attr:`stage_split`), the
        split version runs instead.
        """
        runner = self.stage_split.runner
        if runner is None:
            stages = self.configure_stages()
            if stages is None or kwargs:
                raise NotImplementedError(
                    f"{type(self).__name__} has no forward(). Define forward, or return the "
                    "layers in order from configure_stages()."
                )
            if isinstance(stages, nn.Sequential):
                return stages(*args)
            (output,) = args  # layers pass one tensor from each to the next
            for layer in stages:
                output = layer(output)
            return output
        return runner(*args)

    # ---------------------------------------------------- manual optimization
    def optimizers(self, use_pl_optimizer: bool = True) -> Any:
        """The optimizer (or list of them), for manual optimization.

        Each is a :class:`~trainkit.core.optim.ManagedOptimizer`: its ``step()`` runs the
        Trainer's step (mixed precision's unscale and scaler, ``on_before_optimizer_step``,
        gradient clipping) like automatic optimization does.

        Args:
            use_pl_optimizer: False: the torch optimizers themselves, whose ``step()`` is
                the optimizer's own, as Lightning's argument of this name gives them.
        """
        found = (
            self.trainer.optimization.managed_optimizers
            if use_pl_optimizer
            else self.trainer.optimizers
        )
        return found[0] if len(found) == 1 else found

    def lr_schedulers(self) -> Any:
        """The LR scheduler (or list of them, or None), for manual optimization."""
        schedulers = [config.scheduler for config in self.trainer.lr_scheduler_configs]
        if not schedulers:
            return None
        return schedulers[0] if len(schedulers) == 1 else schedulers

    def manual_backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        """Call backward on ``loss`` the way the Trainer would (scaled under mixed precision).

        Args:
            loss: the loss tensor.
            *args: passed to ``Tensor.backward``.
            **kwargs: passed to ``Tensor.backward``.
        """
        if self.automatic_optimization:
            raise RuntimeError(
                "manual_backward() is for manual optimization; set "
                "`self.automatic_optimization = False` in __init__ or return the loss instead."
            )
        self.trainer.optimization.backward(loss, *args, **kwargs)

    def toggle_optimizer(self, optimizer: Any) -> None:
        """Freeze the parameters the run's other optimizers update (until untoggled).

        With several optimizers (a GAN), it keeps one network's backward from
        computing gradients for the other's parameters. Parameters no optimizer
        holds are left as they are, as in Lightning.

        Args:
            optimizer: the optimizer (or the one ``optimizers()`` returned) to train.
        """
        inner = getattr(optimizer, "optimizer", optimizer)
        own = {id(p) for group in inner.param_groups for p in group["params"]}
        others = self._trainer.optimizers if self._trainer is not None else []
        saved: dict[int, tuple[torch.Tensor, bool]] = {}
        for other in others:
            for group in getattr(other, "optimizer", other).param_groups:
                for parameter in group["params"]:
                    if id(parameter) not in own and id(parameter) not in saved:
                        saved[id(parameter)] = (parameter, parameter.requires_grad)
                        parameter.requires_grad = False
        self._toggled = saved

    def untoggle_optimizer(self, optimizer: Any) -> None:
        """Give back the ``requires_grad`` flags :meth:`toggle_optimizer` changed.

        Args:
            optimizer: the optimizer passed to :meth:`toggle_optimizer`.
        """
        saved = getattr(self, "_toggled", None) or {}
        for parameter, requires_grad in saved.values():
            parameter.requires_grad = requires_grad
        self._toggled = None

    @contextmanager
    def toggled_optimizer(self, optimizer: Any) -> Iterator[None]:
        """:meth:`toggle_optimizer` for the duration of a ``with`` block.

        Args:
            optimizer: the optimizer to train inside the block.
        """
        self.toggle_optimizer(optimizer)
        try:
            yield
        finally:
            self.untoggle_optimizer(optimizer)

    def clip_gradients(
        self,
        optimizer: Any,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Clip the gradients of ``optimizer``'s parameters (after unscaling).

        Args:
            optimizer: whose parameters to clip.
            gradient_clip_val: the threshold (None: the Trainer's ``gradient_clip_val``;
                no clipping when that is None too).
            gradient_clip_algorithm: "norm" or "value" (None: the Trainer's).

        Raises:
            ValueError: the Trainer has a ``gradient_clip_val`` and another one is given
                (as Lightning refuses it: which one should hold is unclear).
        """
        trainer = self._trainer
        if trainer is not None:
            gradient_clip_val = clip_value(trainer.gradient_clip_val, gradient_clip_val)
        if gradient_clip_algorithm is None:
            gradient_clip_algorithm = trainer.gradient_clip_algorithm if trainer else "norm"
        if gradient_clip_val is None or gradient_clip_val == 0:
            return
        clip_optimizer_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def configure_gradient_clipping(
        self,
        optimizer: Any,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Override to clip gradients your way; called before each optimizer step.

        When overridden, it replaces the Trainer's clipping (``gradient_clip_val``):
        call :meth:`clip_gradients` from it to clip.

        Args:
            optimizer: the optimizer about to step.
            gradient_clip_val: the Trainer's ``gradient_clip_val``.
            gradient_clip_algorithm: the Trainer's ``gradient_clip_algorithm``.
        """
        self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        """Run the backward pass of ``loss`` (already scaled); override to change how.

        Args:
            loss: the loss to differentiate.
            *args: passed to ``Tensor.backward``.
            **kwargs: passed to ``Tensor.backward``.
        """
        loss.backward(*args, **kwargs)  # type: ignore[no-untyped-call]

    def optimizer_step(
        self,
        epoch: int,
        batch_idx: int,
        optimizer: Any,
        optimizer_closure: Callable[[], Any] | None = None,
    ) -> None:
        """Step the optimizer (automatic optimization); override to adjust, e.g. LR warm-up.

        The batch's forward and backward have run already when this is called:
        ``optimizer_closure()`` returns that loss, and runs them again when called again
        (as LBFGS's ``step`` does, through ``optimizer.step(closure=optimizer_closure)``).
        ``optimizer.step()`` still runs the Trainer's step: unscaling, clipping, the
        gradient scaler.

        Args:
            epoch: the current epoch.
            batch_idx: the batch's index in the epoch.
            optimizer: the optimizer to step.
            optimizer_closure: returns the batch's loss.
        """
        optimizer.step(closure=optimizer_closure)

    def optimizer_zero_grad(self, epoch: int, batch_idx: int, optimizer: Any) -> None:
        """Clear the gradients after a step (automatic optimization); override to change how.

        Args:
            epoch: the current epoch.
            batch_idx: the batch's index in the epoch.
            optimizer: the optimizer that stepped.
        """
        optimizer.zero_grad()

    def lr_scheduler_step(self, scheduler: Any, metric: Any) -> None:
        """Step one LR scheduler (automatic optimization); override for custom schedulers.

        Args:
            scheduler: the scheduler.
            metric: the monitored value, or None when the scheduler monitors nothing.
        """
        if metric is None:
            scheduler.step()
        else:
            scheduler.step(metric)

    def configure_callbacks(self) -> Any:
        """Callbacks this model needs, added to the Trainer's for each run.

        A returned callback replaces the Trainer's callbacks of the same type;
        checkpointing callbacks run last.

        Returns:
            A callback or a list of callbacks (default: none).
        """
        return []

    # ----------------------------------------------------------- export
    def to_torchscript(
        self, file_path: str | os.PathLike[str] | None = None, method: str = "script", **kwargs: Any
    ) -> Any:
        """The module compiled by TorchScript (``torch.jit.script`` or ``trace``), in eval mode.

        Args:
            file_path: also save it there.
            method: "script" or "trace" (``trace`` runs ``example_input_array``
                unless ``example_inputs`` is given).
            **kwargs: passed to ``torch.jit.script`` / ``torch.jit.trace``.
        """
        return export.to_torchscript(self, file_path, method, **kwargs)

    def to_onnx(
        self, file_path: str | os.PathLike[str], input_sample: Any = None, **kwargs: Any
    ) -> None:
        """Export the module to ONNX with ``torch.onnx.export`` (needs the ``onnx`` package).

        Args:
            file_path: the ``.onnx`` file to write.
            input_sample: an input for the export (default: ``example_input_array``).
            **kwargs: passed to ``torch.onnx.export``.
        """
        export.to_onnx(self, file_path, input_sample, **kwargs)

    # ------------------------------------------------------- evaluation mode
    def on_validation_model_zero_grad(self) -> None:
        """Release the gradients before validation inside fit (not inside an accumulation
        window, whose gradients are kept); override to keep them."""
        self.zero_grad()

    def on_validation_model_eval(self) -> None:
        """Put the model in eval mode for validation (override to keep, say, dropout on)."""
        self.eval()

    def on_validation_model_train(self) -> None:
        """Give the model back its training mode after validation inside fit."""
        self.train()

    def on_test_model_eval(self) -> None:
        """Put the model in eval mode for testing."""
        self.eval()

    def on_test_model_train(self) -> None:
        """Called after testing; trainkit restores each submodule's mode itself."""
        self.train()

    def on_predict_model_eval(self) -> None:
        """Put the model in eval mode for prediction."""
        self.eval()


def overrides(obj: object, name: str, base: type = Module, follow_wrapped: bool = False) -> bool:
    """Whether ``obj``'s class overrides method ``name`` of ``base``.

    Args:
        obj: a Module, DataModule or Callback.
        name: the method's name.
        base: the class that defines the default.
        follow_wrapped: judge an instance attribute made with ``functools.wraps``
            by the method it wraps (Lightning's rule for DataModule hooks, which
            run only when overridden; the Module's run regardless there).

    Example:
        >>> class Net(Module):
        ...     def training_step(self, batch, batch_idx): ...
        >>> overrides(Net(), "training_step"), overrides(Net(), "validation_step")
        (True, False)
    """
    if getattr(obj, name, None) is None:
        return False  # a hook set to None counts as not defined
    if name in getattr(obj, "__dict__", {}):
        wrapped = getattr(getattr(obj, name), "__wrapped__", None)
        if not follow_wrapped or wrapped is None:
            return True  # set on the instance (DataModule.from_datasets)
        return getattr(wrapped, "__func__", wrapped) is not getattr(base, name, None)
    return getattr(type(obj), name, None) is not getattr(base, name, None)

"""Lightning's strategy hooks that trainkit's DDP strategies call (:class:`DDPHooks`), and
the Lightning ``Strategy`` methods its Trainer calls and trainkit's does not
(:data:`UNCALLED_HOOKS`: a subclass overriding one is warned when defined)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from torch import nn

__all__ = ["UNCALLED_HOOKS", "DDPHooks"]


class DDPHooks:
    """Lightning's ``DDPStrategy.setup``/``configure_ddp`` split (a base of trainkit's DDP).

    When fitting, :meth:`setup` calls :meth:`configure_ddp`, which wraps :attr:`model`
    in ``DistributedDataParallel``, as Lightning's does; a subclass overrides it to work
    on the Module before it is wrapped (registering hooks), calling
    ``super().configure_ddp()``. For evaluation the Module is set up without the call.
    Strategies that shard the parameters (FSDP) set up as
    :meth:`~trainkit.strategies.lightning_attributes.LightningAttributes.setup`.
    """

    model: nn.Module | None
    shards_parameters: ClassVar[bool]

    if TYPE_CHECKING:

        def setup_module(self, module: nn.Module) -> nn.Module: ...

    def setup(self, trainer: Any) -> None:
        """See :meth:`LightningAttributes.setup`; calls :meth:`configure_ddp` when fitting.

        Args:
            trainer: the Trainer whose run starts (None: set up as for ``fit``).
        """
        fitting = trainer is None or trainer.state.fn == "fit"
        if fitting and not self.shards_parameters:
            self.configure_ddp()
        else:
            assert self.model is not None
            self.model = self.setup_module(self.model)

    def configure_ddp(self) -> None:
        """Wrap :attr:`model` (the user's Module, on its device) in ``DistributedDataParallel``."""
        assert self.model is not None
        self.model = self.setup_module(self.model)


# Lightning's Strategy methods its Trainer calls and trainkit's does not (trainkit's step,
# optimizer and checkpoint paths are its own): a subclass overriding one is warned.
UNCALLED_HOOKS = (
    "connect",
    "setup_distributed",
    "model_to_device",
    "_setup_model",
    "setup_precision_plugin",
    "determine_ddp_device_ids",
    "set_world_ranks",
    "_register_ddp_hooks",
    "_get_process_group_backend",
    "training_step",
    "validation_step",
    "test_step",
    "predict_step",
    "post_training_step",
    "backward",
    "pre_backward",
    "post_backward",
    "optimizer_step",
    "on_train_start",
    "on_train_end",
    "on_validation_start",
    "on_validation_end",
    "on_test_start",
    "on_test_end",
    "on_predict_start",
    "on_predict_end",
    "on_train_batch_start",
    "on_exception",
    "lightning_module_state_dict",
    "optimizer_state",
    "load_model_state_dict",
    "load_optimizer_state_dict",
    "remove_checkpoint",
    "model_sharded_context",
)

"""Fully sharded data parallel (FSDP2): each rank keeps 1/N of the parameters, gradients
and optimizer state.

Built on torch's ``fully_shard`` (DTensor): every shard unit all-gathers its
parameters just before its forward (and backward) and frees them after, and
gradients are reduce-scattered so each rank keeps only its shard. Everything
about processes (joining the group, launching, samplers, rank-0 logging,
failure handling, trainkit's control messages) is the DDP strategy's: this
class changes only how the module is wrapped, how gradient sync is skipped on
accumulating micro-batches, and how checkpoints are written.

Checkpoints are sharded folders by default (:mod:`trainkit.distributed.shards`):
every process writes its own shards with ``torch.distributed.checkpoint``, and
a later run on any number of processes reads them resharded. With
``state_dict_type="full"`` they are one ordinary trainkit file written by
rank 0 from the full state dicts (gathered tensor by tensor onto rank 0's CPU).
Either loads under any strategy and with ``Module.load_from_checkpoint``; a
full state dict loads back into the sharded module (each rank cuts its own
shards).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import timedelta
from typing import Any, ClassVar, Literal

import torch
from torch import distributed as dist
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    apply_activation_checkpointing,
)
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    OffloadPolicy,
    fully_shard,
    register_fsdp_forward_method,
)

from trainkit.checkpoint import sharded
from trainkit.distributed import sharding, shards
from trainkit.launch.environment import ClusterEnvironment
from trainkit.strategies.ddp import DDPStrategy
from trainkit.utilities.tensor_init import made_on

#: The Module's methods that run the model (parameters are gathered around each).
_STEP_METHODS = ("training_step", "validation_step", "test_step", "predict_step")


class FSDPStrategy(DDPStrategy):
    """FSDP2 (``torch.distributed.fsdp.fully_shard``) over the job's processes.

    Args:
        device_type: "cpu" (gloo) or "cuda" (NCCL; the process's device is its local rank);
            None (the default): the Trainer's ``accelerator`` decides.
        shard_modules: which submodules become their own shard units (gathered
            one at a time, so at most one unit is whole at once). None (default):
            each direct child of the Module that has parameters, where a
            ``Sequential``/``ModuleList``/``ModuleDict`` gives each of its
            children instead. Else module classes (each outermost module of
            these classes, e.g. your transformer block) and submodule names
            (each child of that submodule, e.g. ``"layers"``). The Module
            itself is always the root unit (its remaining parameters). A Module
            that defines ``configure_sharding(mesh)`` shards its submodules itself
            (calling ``fully_shard``) instead.
        reshard_after_forward: free each unit's gathered parameters after its
            forward (gather them again for backward): less memory, more communication.
        cpu_offload: keep parameter shards, gradients and optimizer state on the
            CPU (torch's ``CPUOffloadPolicy``; for CUDA runs).
        activation_checkpointing: module classes whose activations are recomputed
            in backward instead of kept (torch's checkpoint wrapper).
        hsdp: ``(replicate, shard)``: a 2-D mesh (hybrid sharding) where each
            group of ``shard`` ranks shards the model and the ``replicate`` groups
            average their gradients; ``replicate * shard`` must be the world size.
        meta_init: build the layers ``Module.configure_model()`` creates on the
            meta device, and give them memory only as shards (initialized by each
            module's ``reset_parameters()``), so the whole model never exists on
            one rank.
        state_dict_type: "sharded" (default): each checkpoint is a folder to
            which every process writes its own shards (``torch.distributed.checkpoint``)
            beside the training state, resumable under any number of processes
            (see :mod:`trainkit.checkpoint.sharded`; ``trainkit.consolidate_checkpoint`` makes
            one file of it). "full": one ordinary file, gathered on rank 0.
            Lightning's name; its default is "full" (trainkit's is "sharded": no
            rank has to hold the whole state to save it).
        async_save: write sharded checkpoints in the background: a save returns
            once the tensors are copied to memory, and the folder appears (whole)
            when every process has written its shards; waited for at the next
            save, before a checkpoint is read, and at the end of fit.
        timeout, environment, init_method, rank, world_size, process_group_backend: as for
            :class:`~trainkit.strategies.ddp.DDPStrategy`.

    ``Trainer(precision="bf16-mixed")`` becomes a ``MixedPrecisionPolicy`` that
    computes in bfloat16 and reduces gradients in float32; "16-mixed" is refused.
    """

    name = "fsdp"
    names: ClassVar[tuple[str, ...]] = ("fsdp",)
    shards_parameters = True  # and FSDP reuses its all-gather buffers in training

    def __init__(
        self,
        device_type: str | None = None,
        *,
        shard_modules: Collection[type[nn.Module] | str] | None = None,
        reshard_after_forward: bool = True,
        cpu_offload: bool = False,
        activation_checkpointing: Collection[type[nn.Module]] = (),
        hsdp: tuple[int, int] | None = None,
        meta_init: bool = True,
        state_dict_type: Literal["sharded", "full"] = "sharded",
        async_save: bool = False,
        timeout: timedelta = timedelta(minutes=30),
        environment: ClusterEnvironment | None = None,
        init_method: str | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        process_group_backend: str | None = None,
    ) -> None:
        super().__init__(
            device_type,
            timeout=timeout,
            environment=environment,
            init_method=init_method,
            rank=rank,
            world_size=world_size,
            process_group_backend=process_group_backend,
        )
        if hsdp is not None and (len(hsdp) != 2 or min(hsdp) < 1):
            raise ValueError(
                f"FSDPStrategy(hsdp={hsdp!r}) must be (replicate, shard), two positive "
                "numbers whose product is the number of processes, e.g. hsdp=(2, 2)."
            )
        self.shard_modules = shard_modules
        self.reshard_after_forward = reshard_after_forward
        self.cpu_offload = cpu_offload
        self.activation_checkpointing = tuple(activation_checkpointing)
        self.hsdp = tuple(hsdp) if hsdp is not None else None
        self.meta_init = meta_init
        if state_dict_type not in ("sharded", "full"):
            raise ValueError(
                f"FSDPStrategy(state_dict_type={state_dict_type!r}) must be 'sharded' (a "
                "folder each process writes its shards to) or 'full' (one file from rank 0)."
            )
        self.state_dict_type = state_dict_type
        if async_save and state_dict_type != "sharded":
            raise ValueError(
                "FSDPStrategy(async_save=True) writes sharded checkpoints in the background; "
                "it needs state_dict_type='sharded' (the default)."
            )
        self.async_save = async_save
        self._background: Any = None  # the process group background writes use
        self._writing: Future[Any] | None = None
        self._optimizers: list[torch.optim.Optimizer] = []
        self.mesh: DeviceMesh | None = None
        self._module: nn.Module | None = None

    # ------------------------------------------------------------ the module
    def model_init_context(self) -> AbstractContextManager[Any]:
        """Where ``configure_model()`` builds: the device (meta with ``meta_init``), in dtype."""
        device = torch.device("meta") if self.meta_init else torch.device(self.root_device)
        return made_on(device, self.precision)

    def init_device(self, empty: bool) -> AbstractContextManager[Any]:
        # init_module: sharded at set-up, so the CPU; with empty_init the meta device
        # (parameters get memory only as shards there, initialized by reset_parameters).
        return torch.device("meta") if empty else nullcontext()

    def _build_mesh(self) -> DeviceMesh:
        if self.hsdp is None:
            return init_device_mesh(self.device_type, (self.world_size,))
        replicate, shard = self.hsdp
        if replicate * shard != self.world_size:
            raise ValueError(
                f"FSDPStrategy(hsdp=({replicate}, {shard})) needs {replicate * shard} "
                f"processes, but the job has {self.world_size}; make replicate x shard equal "
                "the number of processes."
            )
        return init_device_mesh(
            self.device_type, (replicate, shard), mesh_dim_names=("replicate", "shard")
        )

    def setup_module(self, module: nn.Module) -> nn.Module:
        if isinstance(module, FSDPModule):
            self._module = module  # a later validate/test in the same process
            return module
        if self.cpu_offload and self.device_type == "cpu":
            raise ValueError(
                "FSDPStrategy(cpu_offload=True) moves parameters off a CUDA device, but this "
                "run is on the CPU already; drop cpu_offload, or run with device_type='cuda'."
            )
        mp_policy = sharding.mixed_precision_policy(self.precision)  # refuses "16-mixed"
        self.mesh = mesh = self._build_mesh()
        # The Trainer has called Module.configure_model() in model_init_context().
        meta = sharding.meta_modules(module)
        if not meta:
            module.to(self.root_device)
        if self.activation_checkpointing:
            classes = self.activation_checkpointing
            apply_activation_checkpointing(module, check_fn=lambda m: isinstance(m, classes))
        offload: OffloadPolicy = CPUOffloadPolicy() if self.cpu_offload else OffloadPolicy()
        options: dict[str, Any] = {
            "mesh": mesh,
            "reshard_after_forward": self.reshard_after_forward,
            "mp_policy": mp_policy,
            "offload_policy": offload,
        }
        configure_sharding = getattr(module, "configure_sharding", None)
        if callable(configure_sharding):
            configure_sharding(mesh)
        else:
            for unit in sharding.shard_units(module, self.shard_modules):
                fully_shard(unit, **options)
        fully_shard(module, **options)
        for name in _STEP_METHODS:
            # The step methods call forward (or submodules) themselves: gather the
            # root unit's parameters around each, as around forward.
            register_fsdp_forward_method(module, name)
        if meta:
            sharding.materialize(meta, self.root_device)
        module.register_load_state_dict_pre_hook(sharding.load_full_model_state)  # type: ignore[no-untyped-call]
        self._module = module
        return module

    def unwrap(self, module: nn.Module) -> nn.Module:
        return module

    def step_function(self, module: nn.Module, name: str) -> Any:
        return getattr(module, name)

    def setup_optimizers(
        self, optimizers: list[torch.optim.Optimizer]
    ) -> list[torch.optim.Optimizer]:
        for optimizer in optimizers:
            # A full (one-device) optimizer state loads as shards.
            optimizer.register_load_state_dict_post_hook(sharding.shard_optimizer_state)
        self._optimizers = optimizers
        return optimizers

    def no_backward_sync(self, module: nn.Module) -> AbstractContextManager[Any]:
        return _no_gradient_sync(module)

    # ------------------------------------------------------------ checkpoints
    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike[str]) -> None:
        if self._module is None:
            super().save_checkpoint(checkpoint, path)
        elif self.state_dict_type == "sharded":
            self._finish_writing()  # one background write at a time
            if self.async_save and self._background is None:
                # Background writes talk on a group of their own, so they never pair
                # with the training's collectives.
                self._background = dist.new_group(backend="gloo")
            names = shards.parameter_names(self._module, self._optimizers)
            self._writing = shards.save(self, checkpoint, names, path, self._background)
        else:  # gathered by every rank; rank 0 writes the file one process would
            full = shards.gathered(self._module, self._optimizers, checkpoint)
            super().save_checkpoint(full, path)

    def load_checkpoint(
        self, path: str | os.PathLike[str], weights_only: bool = True
    ) -> dict[str, Any]:
        # A sharded folder is read resharded to this run; a file whole, sharded by load hooks.
        self._finish_writing()
        if self._module is not None and sharded.is_folder(path):
            return shards.load(self, self._module, path)
        return super().load_checkpoint(path, weights_only)

    def on_fit_end(self) -> None:
        self._finish_writing()  # fit returns with every checkpoint on disk
        super().on_fit_end()

    def _finish_writing(self) -> None:
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()
        if self.is_global_zero:
            sharded.settle()


@contextmanager
def _no_gradient_sync(module: nn.Module) -> Iterator[None]:
    # No reduce-scatter (nor HSDP all-reduce) on micro-batches that do not step:
    # the unsharded gradients accumulate until the window's last backward. Every
    # FSDP2 unit in the module: the strategy's, or those a Module applied itself
    # (ModelParallelStrategy); tensor-parallel layers have nothing to skip.
    units = [sub for sub in module.modules() if isinstance(sub, FSDPModule)]
    for unit in units:
        unit.set_requires_gradient_sync(False, recurse=False)
    try:
        yield
    finally:
        for unit in units:
            unit.set_requires_gradient_sync(True, recurse=False)

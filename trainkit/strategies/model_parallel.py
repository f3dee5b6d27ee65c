"""Model parallelism the Module applies to itself: tensor parallel inside groups, FSDP2 across.

The job's ``W = D x T`` processes form a ``("data_parallel", "tensor_parallel")``
device mesh, which ``Module.device_mesh`` gives ``Module.configure_model()``:
there the Module parallelizes its own layers, typically
``torch.distributed.tensor.parallel.parallelize_module`` over
``device_mesh["tensor_parallel"]`` and ``fully_shard`` over
``device_mesh["data_parallel"]`` (Lightning's ``ModelParallelStrategy``, same
arguments). The strategy wraps nothing itself. The processes of one
tensor-parallel group read the same batches: samplers split the data over the
data-parallel dimension only. Everything else (processes, launching, sharded or
full checkpoints that load under any strategy and on any number of processes)
is :class:`~trainkit.strategies.fsdp.FSDPStrategy`'s.
"""

from __future__ import annotations

import weakref
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any, ClassVar, Literal

from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import FSDPModule, register_fsdp_forward_method

from trainkit.core.module import overrides
from trainkit.distributed import sharding
from trainkit.launch.environment import ClusterEnvironment
from trainkit.strategies.fsdp import _STEP_METHODS, FSDPStrategy

Size = int | Literal["auto"]
#: The mesh's dimension names (Lightning's).
DIMENSIONS = ("data_parallel", "tensor_parallel")
#: The modules whose step methods gather FSDP parameters and that load full states.
_READY: weakref.WeakSet[nn.Module] = weakref.WeakSet()


class ModelParallelStrategy(FSDPStrategy):
    """Tensor and data parallelism that ``Module.configure_model()`` applies.

    Args:
        data_parallel_size: the processes a batch is split over (model replicas or
            FSDP shards). "auto": the number of machines.
        tensor_parallel_size: the processes that split each layer (and share each
            batch). "auto": the processes on one machine.
        save_distributed_checkpoint: True: each process writes its shards into a
            checkpoint folder; False: rank 0 writes one ordinary file, gathered from
            every process.
        process_group_backend: "gloo" or "nccl" (default: NCCL on CUDA, else gloo).
        timeout: how long a collective may wait for the other processes.
        device_type, environment, init_method, rank, world_size: as for
            :class:`~trainkit.strategies.ddp.DDPStrategy`.

    The product of the two sizes must be the number of processes. The Module
    must define ``configure_model()``; parameters built there (or under
    ``trainer.init_module(empty_init=True)``) on the meta device get memory after
    it, initialized by each layer's ``reset_parameters()``.
    """

    name = "model_parallel"
    # Built as an instance, as in Lightning: no Trainer(strategy="...") name.
    names: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        data_parallel_size: Size = "auto",
        tensor_parallel_size: Size = "auto",
        save_distributed_checkpoint: bool = True,
        process_group_backend: str | None = None,
        timeout: timedelta = timedelta(minutes=30),
        *,
        device_type: str | None = None,
        environment: ClusterEnvironment | None = None,
        init_method: str | None = None,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        for option, value in (
            ("data_parallel_size", data_parallel_size),
            ("tensor_parallel_size", tensor_parallel_size),
        ):
            if value != "auto" and (type(value) is not int or value < 1):
                raise ValueError(
                    f"ModelParallelStrategy({option}={value!r}) must be a positive number of "
                    "processes or 'auto'."
                )
        super().__init__(
            device_type,
            meta_init=False,  # configure_model builds real layers, as under Lightning
            state_dict_type="sharded" if save_distributed_checkpoint else "full",
            timeout=timeout,
            environment=environment,
            init_method=init_method,
            rank=rank,
            world_size=world_size,
            process_group_backend=process_group_backend,
        )
        self.sizes: tuple[Size, Size] = (data_parallel_size, tensor_parallel_size)
        self.save_distributed_checkpoint = save_distributed_checkpoint

    # ------------------------------------------------------------ the mesh
    def setup_environment(self) -> None:
        super().setup_environment()
        if self.mesh is None or self.mesh.size() != self.world_size:
            self.mesh = self._build_mesh()

    def _build_mesh(self) -> DeviceMesh:
        given_data, given_tensor = self.sizes
        if isinstance(given_tensor, int):
            tensor = given_tensor
        elif isinstance(given_data, int):
            tensor = max(self.world_size // given_data, 1)
        else:
            # The processes on one machine (ranks are numbered machine by machine).
            local_ranks = self.exchange("the processes per machine", [self.local_rank])
            tensor = max(rank for (rank,) in local_ranks) + 1
        data = given_data if isinstance(given_data, int) else max(self.world_size // tensor, 1)
        if data * tensor != self.world_size:
            raise ValueError(
                f"ModelParallelStrategy(data_parallel_size={self.sizes[0]!r}, "
                f"tensor_parallel_size={self.sizes[1]!r}) gives a {data} x {tensor} mesh, but "
                f"the job has {self.world_size} processes; make the product of the two sizes "
                "the number of processes."
            )
        return init_device_mesh(self.device_type, (data, tensor), mesh_dim_names=DIMENSIONS)

    @property
    def device_mesh(self) -> DeviceMesh:
        """The ``("data_parallel", "tensor_parallel")`` mesh.

        Raises:
            RuntimeError: the processes have not joined yet (before fit/validate/...).
        """
        if self.mesh is None:
            raise RuntimeError(
                "ModelParallelStrategy.device_mesh exists once the processes have joined: "
                "read it in configure_model() (as self.device_mesh) or later."
            )
        return self.mesh

    @property
    def module_device_mesh(self) -> DeviceMesh | None:
        """What ``Module.device_mesh`` reads."""
        return self.mesh

    @property
    def data_parallel_size(self) -> int:
        return self.device_mesh["data_parallel"].size() if self.mesh is not None else 1

    @property
    def distributed_sampler_kwargs(self) -> dict[str, int] | None:
        data = self.device_mesh["data_parallel"]
        return {"num_replicas": data.size(), "rank": data.get_local_rank()}

    @property
    def evaluation_share(self) -> tuple[int, int]:
        # A tensor-parallel row computes on one batch together, in evaluation too.
        share = self.distributed_sampler_kwargs
        assert share is not None
        return share["num_replicas"], share["rank"]

    # ------------------------------------------------------------ the module
    def model_init_context(self) -> AbstractContextManager[Any]:
        return self.tensor_init_context()

    def setup_module(self, module: nn.Module) -> nn.Module:
        if not overrides(module, "configure_model"):
            raise TypeError(
                f"ModelParallelStrategy parallelizes nothing itself: {type(module).__name__} "
                "must define configure_model() and apply its parallelism there, e.g. "
                "parallelize_module(self.model, self.device_mesh['tensor_parallel'], plan) "
                "and fully_shard(self.model, mesh=self.device_mesh['data_parallel'])."
            )
        if any(type(sub).__name__ == "FullyShardedDataParallel" for sub in module.modules()):
            raise TypeError(
                "ModelParallelStrategy takes FSDP2's fully_shard (torch.distributed.fsdp."
                "fully_shard); the model holds FullyShardedDataParallel (FSDP1) wrappers. "
                "Apply fully_shard in configure_model instead."
            )
        # configure_model has run (the Trainer calls it): give memory to what is still
        # on the meta device (built under init_module(empty_init=True)), then move
        # what is left on the CPU.
        meta = sharding.meta_modules(module)
        if meta:
            sharding.materialize(meta, self.root_device)
        module.to(self.root_device)
        if module not in _READY:  # once per module, whatever the stage
            if isinstance(module, FSDPModule):
                for name in _STEP_METHODS:
                    register_fsdp_forward_method(module, name)
            module.register_load_state_dict_pre_hook(sharding.load_full_model_state)  # type: ignore[no-untyped-call]
            _READY.add(module)
        self._module = module
        return module

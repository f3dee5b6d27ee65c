"""Distributed data parallel: one process per device, gradients averaged by torch's DDP.

The processes are started by torchrun, SLURM's srun or one of trainkit's launchers
(``trainkit.launch``): this strategy reads who it is from the environment when it sets
up (or is told, by the launcher that started the ranks), joins the process group through
torch's env:// rendezvous, and wraps the module in ``DistributedDataParallel`` (see
:class:`~trainkit.strategies.lightning_hooks.DDPHooks`). Gloo on CPU, NCCL on CUDA.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from trainkit.core.data import rebuild_dataloader, takes_sampler
from trainkit.distributed.collectives import ProcessGroupCollectives
from trainkit.distributed.control import ControlChannel
from trainkit.distributed.peers import begin_run, describe_lost_peers
from trainkit.distributed.rendezvous import check_init_method, end_process_group, join_group
from trainkit.distributed.sampling import advise_on_loading, evaluation_sampler, training_sampler
from trainkit.distributed.wrapping import StepModule, unwrap
from trainkit.launch.environment import ClusterEnvironment, detect_environment
from trainkit.strategies.base import Strategy
from trainkit.strategies.lightning_hooks import DDPHooks

if TYPE_CHECKING:
    from trainkit.strategies.registrable import LaunchMode
    from trainkit.strategies.registry import DevicePlan

__all__ = ["DDPStrategy", "end_process_group"]


class DDPStrategy(ProcessGroupCollectives, DDPHooks, Strategy):
    """DistributedDataParallel over the processes of a torchrun or SLURM job.

    Args:
        device_type: "cpu" (gloo) or "cuda" (NCCL; the process's device is its local
            rank). None (the default): the Trainer's ``accelerator`` decides (CUDA when
            available for "auto").
        timeout: how long a collective may wait for the other processes before the
            job fails (instead of hanging forever).
        find_unused_parameters: passed to DDP (needed when some parameters get no
            gradient in a step).
        static_graph: passed to DDP.
        gradient_as_bucket_view: passed to DDP (saves memory).
        bucket_cap_mb: passed to DDP.
        environment: who this process is (default: read from the environment
            when the strategy sets up, in the process that runs it).
        init_method: how the processes find each other, for clusters without
            torchrun or SLURM: ``"env://"`` (``MASTER_ADDR``/``MASTER_PORT``),
            ``"tcp://HOST:PORT"`` (rank 0's host and a free port) or
            ``"file:///PATH"`` (a file on a filesystem every process shares). None:
            ``env://`` from the variables torchrun, SLURM or trainkit's launcher set.
        rank: this process's rank, with ``init_method`` (default: ``RANK``).
        world_size: the number of processes, with ``init_method`` (default: ``WORLD_SIZE``).
        process_group_backend: the ``torch.distributed`` backend ("gloo", "nccl",
            ...); None: NCCL on CUDA, gloo on the CPU.
        ddp_comm_hook: a DDP communication hook (``torch.distributed.algorithms.
            ddp_comm_hooks``, e.g. ``default_hooks.fp16_compress_hook``), registered
            on the wrapped model with ``ddp_comm_state`` as its state.
        ddp_comm_state: the hook's state (None for the default hooks).
    """

    name = "ddp"

    def __init__(
        self,
        device_type: str | None = None,
        *,
        timeout: timedelta = timedelta(minutes=30),
        find_unused_parameters: bool = False,
        static_graph: bool = False,
        gradient_as_bucket_view: bool = False,
        bucket_cap_mb: float | None = None,
        environment: ClusterEnvironment | None = None,
        init_method: str | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        process_group_backend: str | None = None,
        ddp_comm_hook: Callable[..., Any] | None = None,
        ddp_comm_state: object = None,
    ) -> None:
        self.init_method = check_init_method(init_method)
        if (rank is None) != (world_size is None):
            raise ValueError(
                "Give DDPStrategy both rank and world_size, or neither (then the RANK and "
                "WORLD_SIZE variables say them)."
            )
        if rank is not None and world_size is not None:
            environment = ClusterEnvironment.given(rank, world_size)
        self._environment = environment
        if device_type not in (None, "cpu", "cuda"):
            raise ValueError(
                f"{type(self).__name__}(device_type={device_type!r}) must be 'cpu', 'cuda' "
                "or None (the Trainer's accelerator decides)."
            )
        self._device_type = device_type
        self.timeout = timeout
        self.ddp_options: dict[str, Any] = {
            "find_unused_parameters": find_unused_parameters,
            "static_graph": static_graph,
            "gradient_as_bucket_view": gradient_as_bucket_view,
        }
        if bucket_cap_mb is not None:
            self.ddp_options["bucket_cap_mb"] = bucket_cap_mb
        self.process_group_backend = process_group_backend
        self.ddp_comm_hook = ddp_comm_hook
        self.ddp_comm_state = ddp_comm_state
        # trainkit's own messages (stop votes, sync_dist checks): a gloo group made at set-up.
        self._control: ControlChannel | None = None
        self._control_world: Any = None

    @property
    def device_type(self) -> str:
        """ "cpu" or "cuda": as given, else the Trainer's accelerator, else CUDA when available."""
        if self._device_type is None:
            return "cuda" if torch.cuda.is_available() else "cpu"
        return self._device_type

    def use_accelerator(self, accelerator: str, device_type: str) -> None:
        """Compute on the Trainer's devices, unless this strategy was given its own.

        Raises:
            ValueError: ``device_type`` was given and contradicts the Trainer's accelerator.
        """
        if self._device_type is None:
            self._device_type = device_type
        elif accelerator != "auto" and self._device_type != device_type:
            raise ValueError(
                f"{type(self).__name__} was built to run on {self._device_type!r} devices, "
                f"which contradicts Trainer(accelerator={accelerator!r}); leave the device "
                "type out of the strategy (the Trainer's accelerator then decides) or make "
                "them agree."
            )

    names: ClassVar[tuple[str, ...]] = ("ddp", "ddp_spawn")

    @classmethod
    def launch_mode(cls, name: str) -> LaunchMode:
        return "spawn" if name == "ddp_spawn" else "script"

    @classmethod
    def from_plan(
        cls,
        plan: DevicePlan,
        *,
        timeout: timedelta = timedelta(minutes=30),
        environment: ClusterEnvironment | None = None,
        **init_params: Any,
    ) -> Strategy:
        return cls(plan.device_type, timeout=timeout, environment=environment, **init_params)

    def join_as(self, environment: ClusterEnvironment | None) -> bool:
        """Take the place a launcher gives this process, unless one was given at construction.

        Returns:
            Whether this process now has ``environment``'s place (with None: whether
            the new processes may read theirs from their variables).
        """
        if self._environment is not None:
            return False
        if environment is not None:
            self._environment = environment
        return True

    @property
    def environment(self) -> ClusterEnvironment:
        """Who this process is in the job."""
        # Read late: a launcher may start this process after the strategy was built.
        return self._environment or detect_environment()

    def process_environment(self) -> ClusterEnvironment:
        return self.environment

    @property
    def root_device(self) -> torch.device:
        if self.device_type == "cuda":
            return torch.device("cuda", self.environment.local_rank)
        return torch.device("cpu")

    @property
    def global_rank(self) -> int:
        return self.environment.global_rank

    @property
    def local_rank(self) -> int:
        return self.environment.local_rank

    @property
    def world_size(self) -> int:
        return self.environment.world_size

    @property
    def process_group(self) -> Any:
        return dist.group.WORLD if dist.is_initialized() else None

    def setup_environment(self) -> None:
        if self._environment is None:
            self._environment = detect_environment()
        if self.device_type == "cuda":
            self._check_cuda_device()
            torch.cuda.set_device(self.root_device)
        if not dist.is_initialized():
            backend = self.process_group_backend or (
                "nccl" if self.device_type == "cuda" else "gloo"
            )
            join_group(self.init_method, backend, self.environment, self.timeout)
            # Leaving the group to the interpreter's shutdown can abort the process:
            # the backend's threads may still hold tensors while Python is torn down.
            atexit.register(end_process_group)
        begin_run()  # every rank, at the same point of each run
        if self._control is None or self._control_world is not dist.group.WORLD:
            # Every rank sets up at the same point, so every rank makes the group here.
            self._control = ControlChannel.create(self.timeout)
            self._control_world = dist.group.WORLD

    def _check_cuda_device(self) -> None:
        """Each process computes on ``cuda:<local rank>``: that device must be there."""
        count, local_rank = torch.cuda.device_count(), self.local_rank
        if local_rank >= count:
            raise RuntimeError(
                f"{type(self).__name__}: the process of local rank {local_rank} computes on "
                f"cuda:{local_rank}, but this machine has {count} CUDA device(s). Start at "
                f"most {count} process(es) on each machine, or run them on the CPU: "
                "Trainer(accelerator='cpu'), or device_type='cpu' for the strategy."
            )

    def setup_module(self, module: nn.Module) -> nn.Module:
        ids = [self.root_device.index] if self.device_type == "cuda" else None
        wrapped = DistributedDataParallel(
            StepModule(module.to(self.root_device)), device_ids=ids, **self.ddp_options
        )
        if self.ddp_comm_hook is not None:
            wrapped.register_comm_hook(self.ddp_comm_state, self.ddp_comm_hook)
        return wrapped

    def unwrap(self, module: nn.Module) -> nn.Module:
        return unwrap(module)

    def step_function(self, module: nn.Module, name: str) -> Any:
        if name == "training_step" and isinstance(module, DistributedDataParallel):
            return lambda *args: module(name, *args)
        # Evaluation needs no gradient synchronisation: call the module directly.
        return getattr(self.unwrap(module), name)

    def no_backward_sync(self, module: nn.Module) -> AbstractContextManager[Any]:
        assert isinstance(module, DistributedDataParallel)
        return module.no_sync()

    @property
    def distributed_sampler_kwargs(self) -> dict[str, int] | None:
        return {"num_replicas": self.world_size, "rank": self.global_rank}

    def prepare_dataloader(self, dataloader: DataLoader[Any], *, training: bool) -> DataLoader[Any]:
        if training:
            advise_on_loading(dataloader, self.root_device, self.is_global_zero)
        if not takes_sampler(dataloader):
            return dataloader  # an iterable dataset splits its data itself
        if isinstance(dataloader.sampler, DistributedSampler):
            return dataloader  # the user's own: respected as it is
        if not training:  # each sample evaluated once: no padding
            return rebuild_dataloader(
                dataloader, sampler=evaluation_sampler(dataloader, *self.evaluation_share)
            )
        share = self.distributed_sampler_kwargs
        assert share is not None
        sampler = training_sampler(dataloader, share["num_replicas"], share["rank"])
        return rebuild_dataloader(dataloader, sampler=sampler)

    @property
    def evaluation_share(self) -> tuple[int, int]:
        """How evaluation data is split: ``(parts, this process's part)``; every process
        evaluates its own part (a strategy whose processes share batches says otherwise)."""
        return self.world_size, self.global_rank

    def on_fit_end(self) -> None:
        # Every process ends fit here: one left behind at a collective of its own
        # is named now, instead of waiting until the job's end.
        self.exchange("the end of fit")

    def describe_failure(self, exception: BaseException) -> str | None:
        env = self.environment  # the backend's error names no rank: find the silent ones
        where = self.init_method or f"{env.master_addr}:{env.master_port}"
        return describe_lost_peers(exception, self.global_rank, self.world_size, where)

    def teardown(self) -> None:
        # The group is left up: a later validate/test in the same process reuses it.
        # end_process_group() ends it; trainkit calls it at interpreter exit.
        return None

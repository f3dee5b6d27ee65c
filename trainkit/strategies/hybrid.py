"""Hybrid model + data parallel: the model cut into stages, the stages replicated over processes.

Two layouts (docs/strategies.md draws them):

* ``pipeline_size=1`` (default): inside each process the layers from
  ``Module.configure_stages()`` are cut into stages on the process's devices
  (:class:`~trainkit.pipelining.pipe.PipelinedSequential`: each batch split into
  micro-batches flowing from stage to stage); each process holds a replica of
  the split model, and DDP, wrapping it as a multi-device module, averages the
  gradients across processes.
* ``pipeline_size=P``: the stages live on different processes. The world of
  ``W = D x P`` ranks is a ``("data", "pipe")`` mesh; each row runs one replica
  of the model as a pipeline (``torch.distributed.pipelining``, GPipe or 1F1B),
  each column averages one stage's gradients
  (:class:`~trainkit.pipelining.pipeline.RankPipeline`). The batch
  ``(inputs, target)`` flows through the stages and ``Module.pipeline_loss``
  gives the loss. Evaluation runs the user's steps on the full model, brought up
  to date on every rank first.

Either way the stages are chosen by :mod:`trainkit.pipelining.balance` (by
measured time, by parameter memory, or as given), and checkpoints hold the full
model under its own names, so they load under any other strategy.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from trainkit.core.module import Module
from trainkit.distributed.wrapping import StepModule
from trainkit.launch.environment import ClusterEnvironment
from trainkit.pipelining.balance import Partition
from trainkit.pipelining.pipe import PipelinedSequential
from trainkit.pipelining.pipeline import RankPipeline
from trainkit.pipelining.stages import choose_partition, refuse_step_shaping, stages_of
from trainkit.strategies.ddp import DDPStrategy
from trainkit.utilities.rank_zero import rank_zero_print

if TYPE_CHECKING:
    from trainkit.callbacks.slots import StepSlots
    from trainkit.strategies.registry import DevicePlan

Balance = str | Sequence[int]


class HybridStrategy(DDPStrategy):
    """Model parallel stages inside (or across) processes, data parallel across processes.

    Args:
        stage_devices: the devices of this process's stages (e.g. ``["cuda:0",
            "cuda:1"]``), or how many stages: then stage ``i`` of local rank ``r``
            goes on ``cuda:(r * n + i)`` when CUDA is available, else every stage is
            ``"cpu"``. Default: 2 stages, or 1 with ``pipeline_size > 1`` (each
            process then holds one stage).
        balance: how to cut the layers: ``"time"`` (forward + backward of each
            layer, timed on ``Module.example_input_array``), ``"params"`` (parameter
            memory), or a list of layer counts per stage.
        micro_batches: chunks each batch is split into as it flows through the stages.
        pipeline_size: processes one model replica spans (1: the stages are inside
            each process). The world size must be a multiple of it.
        schedule: for ``pipeline_size > 1``: ``"gpipe"`` or ``"1f1b"``.
        timeout: how long a collective may wait for the other processes.
        environment: who this process is (default: read from the environment).
        **ddp_options: passed to DDP (``find_unused_parameters``, ...).
    """

    name = "hybrid"
    names = ("hybrid",)

    def __init__(
        self,
        stage_devices: int | Sequence[str | torch.device] | None = None,
        *,
        balance: Balance = "params",
        micro_batches: int = 1,
        pipeline_size: int = 1,
        schedule: str = "gpipe",
        timeout: timedelta = timedelta(minutes=30),
        environment: ClusterEnvironment | None = None,
        **ddp_options: Any,
    ) -> None:
        if stage_devices is None:
            stage_devices = 1 if pipeline_size > 1 else 2
        requested = (
            stage_devices
            if isinstance(stage_devices, int)
            else [torch.device(device) for device in stage_devices]
        )
        stage_count = requested if isinstance(requested, int) else len(requested)
        if stage_count < 1:
            raise ValueError(f"stage_devices={stage_devices!r} must name at least one device.")
        if pipeline_size < 1 or micro_batches < 1:
            raise ValueError(
                f"pipeline_size={pipeline_size} and micro_batches={micro_batches} must be >= 1."
            )
        if pipeline_size > 1 and stage_count != 1:
            raise ValueError(
                f"pipeline_size={pipeline_size} puts one stage on each process; drop "
                f"stage_devices={stage_devices!r} (stages inside processes and across them "
                "do not combine)."
            )
        # Named devices decide the device type; a count of stages leaves it to the
        # Trainer's accelerator (CUDA when available, when there is none).
        named = None
        if isinstance(requested, list):
            named = "cuda" if any(d.type == "cuda" for d in requested) else "cpu"
        super().__init__(named, timeout=timeout, environment=environment)
        self.ddp_options.update(ddp_options)
        self.requested_devices = requested
        self.balance = balance
        self.micro_batches = micro_batches
        self.pipeline_size = pipeline_size
        self.schedule = schedule
        #: The chosen split (set when the module is set up).
        self.partition: Partition | None = None
        #: This rank's stage of the cross-process pipeline (``pipeline_size > 1``).
        self.pipeline: RankPipeline | None = None
        self._module: Module | None = None
        self._optimizers: list[torch.optim.Optimizer] = []
        self._restore: Callable[[], None] | None = None
        self._sync_gradients = True

    @classmethod
    def processes(cls, plan: DevicePlan) -> int:
        # Each process runs two stages: on CUDA, `devices` counts GPUs, two per process.
        return max(len(plan.indices) // 2, 1) if plan.device_type == "cuda" else len(plan.indices)

    @classmethod
    def from_plan(
        cls,
        plan: DevicePlan,
        *,
        timeout: timedelta = timedelta(minutes=30),
        environment: ClusterEnvironment | None = None,
        **init_params: Any,
    ) -> HybridStrategy:
        strategy = cls(timeout=timeout, environment=environment, **init_params)
        # Named stage devices decide the device type (see __init__); a count of stages
        # takes the Trainer's accelerator, so accelerator="cpu" stays on the CPU.
        strategy.use_accelerator("auto", plan.device_type)
        return strategy

    # ------------------------------------------------------------ placement
    @property
    def stage_devices(self) -> list[torch.device]:
        """This process's stage devices, in stage order."""
        if isinstance(self.requested_devices, list):
            return self.requested_devices
        count = self.requested_devices
        if self.device_type == "cuda":
            first = self.local_rank * count
            return [torch.device("cuda", first + i) for i in range(count)]
        return [torch.device("cpu")] * count

    @property
    def data_parallel_size(self) -> int:
        # The ranks of one pipeline share a batch.
        return self.world_size // self.pipeline_size

    @property
    def root_device(self) -> torch.device:
        # Batches go to the first stage; the loss comes out of the last.
        return self.stage_devices[0]

    def setup_module(self, module: nn.Module) -> nn.Module:
        assert isinstance(module, Module)
        self._module = module
        layers, install = stages_of(module)
        stages = len(self.stage_devices) if self.pipeline_size == 1 else self.pipeline_size
        self.partition = choose_partition(
            module,
            layers,
            stages,
            self.balance,
            self.root_device,
            self.is_global_zero,
            self.broadcast,
        )
        if self.is_global_zero:
            rank_zero_print(f"trainkit: hybrid stages ({self.partition.unit or 'layers'}):")
            rank_zero_print(self.partition.describe())
        module.to(self.root_device)
        if self.pipeline_size > 1:
            self.pipeline = RankPipeline(
                layers,
                self.partition.sizes,
                pipe_size=self.pipeline_size,
                micro_batches=self.micro_batches,
                schedule=self.schedule,
                loss_fn=module.pipeline_loss,
                device=self.root_device,
            )
            return module
        split = PipelinedSequential(
            layers, self.partition.sizes, self.stage_devices, self.micro_batches
        )
        self._restore = install(split)
        # A module spread over several devices: DDP takes no device_ids then.
        return DistributedDataParallel(StepModule(module), device_ids=None, **self.ddp_options)

    def setup_optimizers(
        self, optimizers: list[torch.optim.Optimizer]
    ) -> list[torch.optim.Optimizer]:
        # Kept: a checkpoint merges their state over the pipeline's ranks.
        self._optimizers = super().setup_optimizers(optimizers)
        return self._optimizers

    # ------------------------------------------------------------------ steps
    def step_function(self, module: nn.Module, name: str) -> Callable[..., Any]:
        if self.pipeline is not None and name != "training_step":
            # Evaluation runs the user's step on the full model: bring every layer
            # up to date from the rank that trains it.
            self.pipeline.sync_parameters()
        # Across processes, training runs the pipeline instead (fused_backward).
        step: Callable[..., Any] = super().step_function(module, name)
        return step

    def fused_backward(self, slots: StepSlots) -> Callable[[Any, float], torch.Tensor] | None:
        pipeline = self.pipeline
        if pipeline is None:
            return None  # stages inside the process: DDP's backward through them
        refuse_step_shaping(slots)

        def forward_backward(batch: Any, loss_scale: float) -> torch.Tensor:
            # The batch (inputs, target) flows through the stages; the step logs the loss.
            sync = self._sync_gradients
            return pipeline.train_step(
                batch[0], batch[1], sync_gradients=sync, loss_scale=loss_scale
            )

        return forward_backward

    def no_backward_sync(self, module: nn.Module) -> AbstractContextManager[Any]:
        if self.pipeline is None:
            return super().no_backward_sync(module)
        return self._skip_gradient_sync()

    @contextmanager
    def _skip_gradient_sync(self) -> Any:
        self._sync_gradients = False
        try:
            yield
        finally:
            self._sync_gradients = True

    def unwrap(self, module: nn.Module) -> nn.Module:
        return super().unwrap(module) if isinstance(module, DistributedDataParallel) else module

    @property
    def distributed_sampler_kwargs(self) -> dict[str, int] | None:
        if self.pipeline is None:
            return super().distributed_sampler_kwargs
        # The ranks of one pipeline share each batch: split the data over the
        # data dimension only (rank = data_rank * pipeline_size + pipe_rank).
        return {
            "num_replicas": self.data_parallel_size,
            "rank": self.global_rank // self.pipeline_size,
        }

    # ------------------------------------------------------------ checkpoints
    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike[str]) -> None:
        if self.pipeline is not None and self._module is not None:
            # Each rank trained only its stage: gather the full model and the
            # optimizer state of every stage (collective), so the file is the one a
            # single process would write.
            self.pipeline.sync_parameters()
            checkpoint = {
                **checkpoint,
                "state_dict": self._module.state_dict(),
                "optimizer_states": [
                    self.pipeline.merge_optimizer_state(optimizer) for optimizer in self._optimizers
                ],
            }
        super().save_checkpoint(checkpoint, path)

    def on_fit_end(self) -> None:
        # The caller's module (rank 0's above all) must hold the trained model,
        # not only this rank's stage.
        super().on_fit_end()
        if self.pipeline is not None:
            self.pipeline.sync_parameters()

    def teardown(self) -> None:
        # Give the user's module back as it was: one Sequential, not a split one.
        # (No collective here: teardown also runs when a rank failed alone.)
        if self._restore is not None:
            self._restore()
            self._restore = None
        super().teardown()

"""Pipeline parallelism across processes: this rank's stage of a pipelined, replicated model.

The world is a 2-D mesh of ``data_size x pipe_size`` ranks. The ranks of one
row (a *pipe group*) hold consecutive slices of ``layers`` and pass activations
to each other with ``torch.distributed.pipelining``; the ranks of one column (a
*data group*) hold the same slice and average its gradients, as DDP does.

Every rank keeps the full ``layers``, but runs only its own slice: the stage is
an ``nn.Sequential`` of the same module objects, so gradients land on the full
model's parameters, and an optimizer built over the full model steps only those
(torch optimizers skip parameters whose ``.grad`` is ``None``).
``sync_parameters`` and ``merge_optimizer_state`` bring the rest up to date
before evaluation or checkpointing.

Gradients and ``schedule.step``: the stage's backward accumulates into ``.grad``
(it never zeroes it; the caller does, with ``optimizer.zero_grad()``). With
``scale_grads=True`` the schedule then divides *every* ``.grad`` of the stage by
the number of micro-batches, including what earlier calls had accumulated, which
would shrink those again on each call. So the schedules here run with
``scale_grads=False`` and the loss of each micro-batch is divided by the number
of micro-batches instead: gradients then accumulate correctly across calls.

Shapes: a stage learns its activation shapes on the first step (by running the
first micro-batch), and sizes its receive buffers by them, so all micro-batches
of a step must have one shape: a batch must split into ``micro_batches`` equal
parts. When the shape changes between steps (an epoch's last, smaller batch),
the stages are rebuilt for the new shape, and kept for when it comes back.

Not covered: parameters tied across stages (refused), and buffers updated in
forward (BatchNorm statistics), which each data replica keeps for itself, as DDP
without ``broadcast_buffers`` would.

The argument and batch checks that every rank runs alike live in
:mod:`trainkit.pipelining.checks`; the collectives that bring the ranks
back into agreement (gradients, parameters, optimizer state) in
:mod:`trainkit.pipelining.sync`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from trainkit.pipelining.checks import (
    BatchKey,
    agree_on_batch,
    checked_sizes,
    even_sizes,
    parameter_owners,
)
from trainkit.pipelining.sync import (
    average_gradients,
    broadcast_from,
    gather_optimizer_state,
)

__all__ = ["RankPipeline", "even_sizes"]

_SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
# Stages built for distinct micro-batch shapes (e.g. a full batch and an epoch's
# last, smaller one) are kept so that alternating between them does not rebuild.
_MAX_CACHED_SHAPES = 4


class RankPipeline:
    """This rank's stage of ``layers`` pipelined over ``pipe_size`` ranks and replicated over
    ``world_size // pipe_size`` ranks.

    The default process group must be initialised; building this is collective
    (every rank builds the device mesh), so every rank must construct it.

    Args:
        layers: the full model; every rank passes an identical copy.
        sizes: how many consecutive layers each stage owns (``pipe_size`` numbers that sum
            to ``len(layers)``), or ``None`` for an even split.
        pipe_size: number of pipeline stages; must divide the world size.
        micro_batches: micro-batches per batch; every batch must divide into this many
            equal parts (all micro-batches share one shape, which the stages learn on
            the first step with that shape). ``"1f1b"`` needs at least ``pipe_size``.
        schedule: ``"gpipe"`` (all forwards, then all backwards) or ``"1f1b"``
            (interleaved; fewer activations held).
        loss_fn: ``loss_fn(output, target)``, the *mean* over a micro-batch's samples.
        device: this rank's device (``layers`` is moved there).

    Attributes:
        mesh: the ``("data", "pipe")`` device mesh; rank = data_rank * pipe_size + pipe_rank.
        data_group: the ranks holding this rank's stage (gradients are averaged over them).
        pipe_group: the ranks holding the stages of this rank's model replica.
        data_rank, pipe_rank, data_size, pipe_size: this rank's place in the mesh.
        is_first_stage, is_last_stage: whether this rank needs ``inputs`` / ``target``.
        stage_layers: the indices of the layers this rank owns.
        stage_module: those layers (the same objects, with their names in ``layers``).
    """

    def __init__(
        self,
        layers: nn.Sequential,
        sizes: Sequence[int] | None,
        *,
        pipe_size: int,
        micro_batches: int,
        schedule: str = "gpipe",
        loss_fn: Callable[[Tensor, Tensor], Tensor],
        device: torch.device,
    ) -> None:
        sizes = checked_sizes(layers, sizes, pipe_size, micro_batches, schedule, _SCHEDULES)
        self.layers = layers.to(device)
        self.micro_batches = micro_batches
        self.device = device
        self._loss_fn = loss_fn
        self._schedule_class = _SCHEDULES[schedule]
        self._loss_scale = 1.0
        data_size = dist.get_world_size() // pipe_size
        self.mesh: DeviceMesh = init_device_mesh(
            device.type, (data_size, pipe_size), mesh_dim_names=("data", "pipe")
        )
        self.data_group = self.mesh.get_group("data")
        self.pipe_group = self.mesh.get_group("pipe")
        self.data_size, self.pipe_size = data_size, pipe_size
        self.data_rank = self.mesh.get_local_rank("data")
        self.pipe_rank = self.mesh.get_local_rank("pipe")
        self.is_first_stage = self.pipe_rank == 0
        self.is_last_stage = self.pipe_rank == pipe_size - 1
        self._owner = [stage for stage in range(pipe_size) for _ in range(sizes[stage])]
        start = sum(sizes[: self.pipe_rank])
        self.stage_layers = range(start, start + sizes[self.pipe_rank])
        names = list(layers._modules)
        self.stage_module = nn.Sequential(
            OrderedDict((names[index], layers[index]) for index in self.stage_layers)
        )
        self._param_owner = parameter_owners(layers, self._owner)
        self._schedules: OrderedDict[BatchKey, Any] = OrderedDict()

    def train_step(
        self,
        inputs: Tensor | None,
        target: Tensor | None,
        *,
        sync_gradients: bool = True,
        loss_scale: float = 1.0,
    ) -> Tensor:
        """Forward and backward of this data replica's batch; the batch's mean loss.

        Gradients are added to the ``.grad`` of this stage's parameters (zero them
        between optimizer steps), then averaged over the data group unless
        ``sync_gradients`` is ``False``; accumulate with ``False`` on all but the last call.

        Args:
            inputs: the batch's inputs; needed on the first stage, ignored elsewhere.
            target: the batch's targets; needed on the last stage, ignored elsewhere.
            sync_gradients: average the accumulated gradients over the data group now.
            loss_scale: multiplies the loss before backward (e.g. ``1 / k`` when
                accumulating over ``k`` calls, or an AMP scale); the returned loss is unscaled.

        Returns:
            The mean loss over this data replica's batch, as a 0-dim float32 tensor, on
            every rank of the pipe group (reduce it over ``data_group`` for the global mean).
        """
        if not loss_scale > 0:
            raise ValueError(f"loss_scale={loss_scale} must be positive.")
        key = agree_on_batch(
            inputs,
            target,
            micro_batches=self.micro_batches,
            pipe_size=self.pipe_size,
            pipe_group=self.pipe_group,
        )
        schedule = self._schedule_for(key)
        self._loss_scale = loss_scale
        losses: list[Tensor] = []
        args = (inputs,) if self.is_first_stage else ()
        schedule.step(
            *args,
            target=target if self.is_last_stage else None,
            losses=losses,
            return_outputs=False,
        )
        if sync_gradients and self.data_size > 1:
            average_gradients(self.stage_module.parameters(), self.data_group, self.data_size)
        loss = torch.zeros((), dtype=torch.float32, device=self.device)
        if self.is_last_stage:
            loss.copy_(torch.stack([item.detach() for item in losses]).sum() / loss_scale)
        if self.pipe_size > 1:
            dist.broadcast(loss, group=self.pipe_group, group_src=self.pipe_size - 1)
        return loss

    def sync_parameters(self) -> None:
        """Make every rank's full ``layers`` current: each layer's parameters and buffers
        are broadcast from the pipe rank that owns it (collective over every rank)."""
        if self.pipe_size == 1:
            return
        with torch.no_grad():
            for owner in range(self.pipe_size):
                broadcast_from(
                    self._tensors_of_stage(owner),
                    owner=owner,
                    rank=self.pipe_rank,
                    group=self.pipe_group,
                )

    def merge_optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """The state dict a single-process ``optimizer`` over the full model would have.

        Each parameter's state is taken from the pipe rank that owns it, whatever
        the other ranks hold; the result is the same on every rank (collective).

        Args:
            optimizer: built over the full ``layers``' parameters, in the same order on
                every rank.
        """
        return gather_optimizer_state(
            optimizer,
            self._param_owner,
            pipe_rank=self.pipe_rank,
            pipe_size=self.pipe_size,
            pipe_group=self.pipe_group,
        )

    def _micro_batch_loss(self, output: Tensor, target: Tensor) -> Tensor:
        # Stands in for the schedule's scale_grads (see the module docstring): the
        # sum over micro-batches of mean / micro_batches is the batch's mean.
        return self._loss_fn(output, target) * (self._loss_scale / self.micro_batches)

    def _schedule_for(self, key: BatchKey) -> Any:
        # Every pipe rank sees the same keys in the same order, so they build and
        # evict the same stages together (building a stage's schedule is collective).
        schedule = self._schedules.pop(key, None)
        if schedule is None:
            if len(self._schedules) >= _MAX_CACHED_SHAPES:
                self._schedules.popitem(last=False)
            stage = PipelineStage(
                self.stage_module,
                self.pipe_rank,
                self.pipe_size,
                self.device,
                group=self.pipe_group,
            )
            schedule = self._schedule_class(
                stage,
                n_microbatches=self.micro_batches,
                loss_fn=self._micro_batch_loss,
                scale_grads=False,
            )
        self._schedules[key] = schedule
        return schedule

    def _tensors_of_stage(self, stage: int) -> list[Tensor]:
        # Looked up on each call: a module may replace a buffer by a new tensor.
        owned = nn.ModuleList(
            layer for i, layer in enumerate(self.layers) if self._owner[i] == stage
        )
        return [*owned.parameters(), *owned.buffers()]  # each shared tensor once

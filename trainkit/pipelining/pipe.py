"""GPipe-style pipeline parallelism inside one process.

A ``PipelinedSequential`` splits an ``nn.Sequential`` into consecutive stages,
one device per stage, and runs a batch through them as micro-batches on the
GPipe wavefront schedule. It stays an ``nn.Sequential`` with the original child
names, so its ``state_dict`` is the un-split model's and checkpoints move freely
between the two.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import overload

import torch
from torch import nn


class PipelinedSequential(nn.Sequential):
    """An ``nn.Sequential`` whose layers are spread over devices and pipelined.

    ``forward`` splits the batch along dim 0 into ``micro_batches`` chunks and
    runs the wavefront (GPipe) schedule: at clock tick ``t``, stage ``j``
    processes micro-batch ``t - j``. CUDA kernels are asynchronous, so issuing
    the work in this order lets stages on different GPUs run at the same time;
    on the CPU the result is simply computed chunk by chunk. The outputs are
    concatenated on the last stage's device. A batch with fewer rows than
    ``micro_batches`` runs as one micro-batch per row.

    Backward needs nothing special: the concatenated output's autograd graph
    covers every chunk, so gradients accumulate over the micro-batches.

    Exactness: for layers without batch statistics the output and gradients
    equal the un-split model's, up to floating-point rounding. BatchNorm in
    training mode normalises each micro-batch with its own statistics (and
    updates its running statistics once per micro-batch), so results differ
    from the un-split step; use ``micro_batches=1``, or GroupNorm / LayerNorm,
    where that matters. In eval mode BatchNorm uses its running statistics and
    the results agree.

    The layers are moved to their stages' devices in place (the modules in
    ``layers`` are the ones used, not copies). Calling ``.to(device)`` on the
    whole model afterwards would gather every stage on one device, undoing the
    split.

    Args:
        layers: the layers to pipeline, in order. An ``nn.Sequential`` keeps its
            child names (``"0"``, ``"1"``, ... or its ``OrderedDict`` keys); a
            plain sequence is numbered from ``"0"``.
        sizes: the number of consecutive layers in each stage; each at least 1,
            summing to the number of layers.
        devices: the device of each stage, one per entry of ``sizes``.
        micro_batches: how many chunks each batch is split into (at least 1).

    Raises:
        TypeError: if ``layers`` holds something that is not an ``nn.Module``.
        ValueError: if there are no layers, ``sizes`` and ``devices`` disagree in
            length, a stage is empty, the sizes do not add up to the number of
            layers, or ``micro_batches`` is below 1.

    Example:
        >>> layers = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        >>> model = PipelinedSequential(layers, [2, 1], ["cpu", "cpu"], micro_batches=4)
        >>> model(torch.randn(10, 4)).shape
        torch.Size([10, 2])
        >>> model.sizes, model.output_device
        ((2, 1), device(type='cpu'))
        >>> list(model.state_dict())
        ['0.weight', '0.bias', '2.weight', '2.bias']
        >>> model.extra_repr()
        'micro_batches=4, stages=[0..1 @ cpu, 2 @ cpu]'
    """

    def __init__(
        self,
        layers: nn.Sequential | Sequence[nn.Module],
        sizes: Sequence[int],
        devices: Sequence[torch.device | str],
        micro_batches: int = 1,
    ) -> None:
        named = _named_layers(layers)
        _check_split(len(named), sizes, devices, micro_batches)
        super().__init__(OrderedDict(named))
        # Plain Python data, not registered submodules: the module tree (and so
        # the state_dict) must stay exactly the un-split Sequential's.
        self._sizes = tuple(sizes)
        self._devices = tuple(torch.device(device) for device in devices)
        self._micro_batches = micro_batches
        self._bounds = _stage_bounds(self._sizes)
        # A copy to the CPU with non_blocking=True may return before the data
        # has arrived, and the CPU stage would then read garbage; copies onto an
        # accelerator are ordered on its stream, so only those may be async.
        self._non_blocking = tuple(device.type != "cpu" for device in self._devices)
        for stage_layers, device in zip(self.stages, self._devices, strict=True):
            for layer in stage_layers:
                layer.to(device)

    @property
    def sizes(self) -> tuple[int, ...]:
        """Number of layers in each stage."""
        return self._sizes

    @property
    def devices(self) -> tuple[torch.device, ...]:
        """Device of each stage."""
        return self._devices

    @property
    def micro_batches(self) -> int:
        """Number of chunks each batch is split into (fewer for smaller batches)."""
        return self._micro_batches

    @property
    def output_device(self) -> torch.device:
        """The device the output lands on: the last stage's."""
        return self._devices[-1]

    @property
    def stages(self) -> list[list[nn.Module]]:
        """The layers of each stage, in order (the live child modules)."""
        layers = [layer for layer in self._modules.values() if layer is not None]
        if len(layers) != sum(self._sizes):
            raise RuntimeError(
                f"PipelinedSequential has {len(layers)} layers but its stages hold "
                f"{sum(self._sizes)} (sizes={list(self._sizes)}): layers were added or "
                "removed after construction. Build a new PipelinedSequential from the "
                "changed layers instead."
            )
        return [layers[start:stop] for start, stop in self._bounds]

    @overload
    def __getitem__(self, idx: slice) -> nn.Sequential: ...

    @overload
    def __getitem__(self, idx: int) -> nn.Module: ...

    def __getitem__(self, idx: slice | int) -> nn.Sequential | nn.Module:
        # nn.Sequential builds a slice with self.__class__(OrderedDict), which
        # has no split to give; a slice is a plain, un-pipelined Sequential.
        if isinstance(idx, slice):
            return nn.Sequential(OrderedDict(list(self._modules.items())[idx]))
        return super().__getitem__(idx)

    def forward(self, input: torch.Tensor, *extra: object) -> torch.Tensor:
        """Run ``input`` through the stages on the wavefront schedule.

        Args:
            input: one tensor whose dim 0 is the batch.
            *extra: not accepted; present only to explain the error clearly.

        Returns:
            The output of the last layer, on ``output_device``.

        Raises:
            TypeError: if the input is not a single tensor, or a stage returns
                something other than a tensor.
        """
        if extra or not isinstance(input, torch.Tensor):
            given = f"{1 + len(extra)} inputs" if extra else type(input).__name__
            raise TypeError(
                f"PipelinedSequential takes a single tensor, got {given}: its stages pass "
                "one tensor from stage to stage. Pack the inputs into one tensor, or keep "
                "the layers that need several outside the pipeline."
            )
        stages = self.stages
        rows = input.shape[0] if input.dim() > 0 else 1
        count = max(1, min(self._micro_batches, rows))
        if len(stages) == 1 and count == 1:
            return self._run_stage(0, stages[0], input)

        chunks = list(torch.tensor_split(input, count)) if count > 1 else [input]
        for tick in range(count + len(stages) - 1):
            # Stages first..last at this tick hold micro-batches tick-first..tick-last.
            first = max(0, tick - count + 1)
            last = min(len(stages) - 1, tick)
            for stage in range(first, last + 1):
                micro_batch = tick - stage
                chunks[micro_batch] = self._run_stage(stage, stages[stage], chunks[micro_batch])
        return torch.cat(chunks) if count > 1 else chunks[0]

    def _run_stage(self, stage: int, layers: list[nn.Module], chunk: torch.Tensor) -> torch.Tensor:
        output = chunk.to(self._devices[stage], non_blocking=self._non_blocking[stage])
        for layer in layers:
            output = layer(output)
        if not isinstance(output, torch.Tensor):
            raise TypeError(
                f"stage {stage} of PipelinedSequential returned {type(output).__name__}, "
                "but stages pass one tensor from stage to stage. Make its last layer "
                "return a tensor, or move the split."
            )
        return output

    def extra_repr(self) -> str:
        names = list(self._modules)
        parts = []
        for (start, stop), device in zip(self._bounds, self._devices, strict=True):
            span = names[start] if stop - start == 1 else f"{names[start]}..{names[stop - 1]}"
            parts.append(f"{span} @ {device}")
        return f"micro_batches={self._micro_batches}, stages=[{', '.join(parts)}]"


def _named_layers(layers: nn.Sequential | Sequence[nn.Module]) -> list[tuple[str, nn.Module]]:
    if isinstance(layers, nn.Sequential):
        named = [(name, layer) for name, layer in layers._modules.items() if layer is not None]
    else:
        named = [(str(index), layer) for index, layer in enumerate(layers)]
    for name, layer in named:
        if not isinstance(layer, nn.Module):
            raise TypeError(
                f"layer {name!r} is a {type(layer).__name__}, not an nn.Module; "
                "PipelinedSequential takes an nn.Sequential or a sequence of modules."
            )
    if not named:
        raise ValueError("PipelinedSequential needs at least one layer; got none.")
    return named


def _check_split(
    layer_count: int,
    sizes: Sequence[int],
    devices: Sequence[torch.device | str],
    micro_batches: int,
) -> None:
    if len(sizes) == 0:
        raise ValueError("sizes is empty: give the number of layers of each stage, e.g. [4, 4].")
    if len(sizes) != len(devices):
        raise ValueError(
            f"sizes has {len(sizes)} stages but devices has {len(devices)}: give one device "
            "per stage."
        )
    if any(not isinstance(size, int) or size < 1 for size in sizes):
        raise ValueError(
            f"every stage needs a whole number of layers >= 1, got sizes={list(sizes)}; "
            "drop the empty stages and their devices."
        )
    if sum(sizes) != layer_count:
        raise ValueError(
            f"sizes={list(sizes)} add up to {sum(sizes)} layers but the model has "
            f"{layer_count}; make the stage sizes add up to {layer_count}."
        )
    if not isinstance(micro_batches, int) or micro_batches < 1:
        raise ValueError(
            f"micro_batches must be a whole number >= 1, got {micro_batches!r}; "
            "use 1 to run each batch whole."
        )


def _stage_bounds(sizes: Sequence[int]) -> tuple[tuple[int, int], ...]:
    bounds = []
    start = 0
    for size in sizes:
        bounds.append((start, start + size))
        start += size
    return tuple(bounds)

"""What each layer costs, for the stage balancer: its time or its memory.

:func:`measure_layer_times` runs each layer's forward and backward on a sample
batch and keeps the median seconds; :func:`layer_param_bytes` counts the bytes of
each layer's parameters and buffers. Measuring leaves the model and the RNG as they were.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn


def measure_layer_times(
    layers: Sequence[nn.Module], sample: torch.Tensor, *, repeats: int = 3, warmup: int = 1
) -> list[float]:
    """Forward+backward seconds of each layer, feeding each layer the previous one's output.

    Each layer runs in training mode (training is what the pipeline will run) and its
    backward is ``torch.autograd.grad`` with a random upstream gradient, so no ``.grad``
    is ever written. Buffers (e.g. batch-norm statistics), training modes and the RNG
    state are restored afterwards, so measuring leaves no trace on the model or on a
    seeded run.

    Args:
        layers: the model's layers in order, already on ``sample``'s device.
        sample: one input batch for the first layer.
        repeats: timed runs per layer; the median is kept.
        warmup: untimed runs per layer first (allocator, kernel selection).

    Returns:
        Seconds per layer, each positive.

    Example:
        >>> layers = [nn.Linear(8, 8), nn.ReLU()]
        >>> times = measure_layer_times(layers, torch.randn(4, 8))
        >>> len(times), all(t > 0 for t in times)
        (2, True)
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"Need repeats >= 1 and warmup >= 0, got {repeats=} and {warmup=}.")
    # A run shorter than the clock can see reads as 0; report the clock's tick instead.
    tick = time.get_clock_info("perf_counter").resolution
    cuda_devices = [sample.device] if sample.is_cuda else []
    times = []
    with torch.random.fork_rng(devices=cuda_devices), torch.enable_grad():
        inputs = sample.detach()
        for layer in layers:
            with _training_untouched(layer):
                for _ in range(warmup):
                    _forward_backward(layer, inputs)
                runs = []
                for _ in range(repeats):
                    _synchronize(sample)
                    start = time.perf_counter()
                    output = _forward_backward(layer, inputs)
                    _synchronize(sample)
                    runs.append(time.perf_counter() - start)
            times.append(max(statistics.median(runs), tick))
            inputs = output
    return times


def _forward_backward(layer: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """One training step's work for one layer; returns its output, detached."""
    inputs = inputs.detach().requires_grad_(inputs.is_floating_point())
    output = layer(inputs)
    if not isinstance(output, torch.Tensor):
        raise TypeError(
            f"balance='time' needs each layer to return one tensor, but {type(layer).__name__} "
            f"returned {type(output).__name__}. Use balance='params' or a list of layer counts."
        )
    wrt = [tensor for tensor in (inputs, *layer.parameters()) if tensor.requires_grad]
    if output.requires_grad and wrt:
        upstream = torch.randn_like(output)
        torch.autograd.grad(output, wrt, grad_outputs=upstream, allow_unused=True)
    return output.detach()


def _synchronize(sample: torch.Tensor) -> None:
    # CUDA kernels run asynchronously: without a sync the clock times the launch only.
    if sample.is_cuda:
        torch.cuda.synchronize(sample.device)


@contextmanager
def _training_untouched(layer: nn.Module) -> Iterator[None]:
    """Run ``layer`` in training mode, then put back every submodule's mode and buffers."""
    modes = [(module, module.training) for module in layer.modules()]
    buffers = [(buffer, buffer.detach().clone()) for buffer in layer.buffers()]
    layer.train()
    try:
        yield
    finally:
        for module, mode in modes:
            module.training = mode
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)


def layer_param_bytes(layers: Sequence[nn.Module]) -> list[float]:
    """Bytes of parameters and buffers in each layer: what a stage must hold in memory.

    A tensor shared between layers (e.g. tied embeddings) counts in each layer holding it.

    Args:
        layers: the model's layers in order.

    Example:
        >>> layer_param_bytes([nn.Linear(4, 4), nn.ReLU(), nn.BatchNorm1d(4)])
        [80.0, 0.0, 72.0]
    """
    sizes = []
    for layer in layers:
        tensors = itertools.chain(layer.parameters(), layer.buffers())
        sizes.append(float(sum(tensor.numel() * tensor.element_size() for tensor in tensors)))
    return sizes

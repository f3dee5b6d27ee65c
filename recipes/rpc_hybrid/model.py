"""The recipe's classifier (two stages), its synthetic data and its batches."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn

FEATURES = 16
HIDDEN = 32
CLASSES = 4


def build_model(seed: int, features: int = FEATURES, hidden: int = HIDDEN) -> nn.Sequential:
    """The classifier as two stages, ``model[0]`` and ``model[1]``, initialised from ``seed``.

    Args:
        seed: Seed of the initial weights; the same seed gives the same model in every process.
        features: Input features.
        hidden: Width of the hidden layer (the activation passed from stage 0 to stage 1).

    Returns:
        ``Sequential(stage0, stage1)``: stage 0 is ``Linear + ReLU``, stage 1 is
        ``Linear + ReLU + Linear`` to :data:`CLASSES` logits.
    """
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        stage0 = nn.Sequential(nn.Linear(features, hidden), nn.ReLU())
        stage1 = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, CLASSES))
    finally:
        torch.random.set_rng_state(generator_state)
    return nn.Sequential(stage0, stage1)


def blobs(n: int, seed: int, features: int = FEATURES) -> tuple[torch.Tensor, torch.Tensor]:
    """A synthetic classification task: ``n`` points, labels from a fixed random projection.

    The projection is the same for every ``seed``, so a training and a held-out
    set drawn with two seeds are the same task. Nothing is downloaded.

    Args:
        n: Number of points.
        seed: Seed of the points.
        features: Features per point.

    Returns:
        ``(x, y)``: float inputs of shape ``(n, features)`` and labels in ``[0, CLASSES)``.
    """
    x = torch.randn(n, features, generator=torch.Generator().manual_seed(seed))
    projection = torch.randn(features, CLASSES, generator=torch.Generator().manual_seed(1234))
    return x, (x @ projection).argmax(dim=1)


def batches(
    x: torch.Tensor, y: torch.Tensor, batch_size: int, steps: int, seed: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``steps`` shuffled batches of ``batch_size``, reshuffled each pass over the data.

    The order depends on ``seed`` only, so the RPC run and the single-process
    reference see the same batches.

    Args:
        x: Inputs.
        y: Labels.
        batch_size: Points per batch (the last, short batch of a pass is dropped).
        steps: Number of batches to yield.
        seed: Seed of the shuffling.

    Yields:
        ``(inputs, labels)`` for each step.
    """
    generator = torch.Generator().manual_seed(seed)
    per_pass = len(x) // batch_size
    if per_pass == 0:
        raise ValueError(f"batch_size={batch_size} is larger than the {len(x)} training points")
    step = 0
    while step < steps:
        order = torch.randperm(len(x), generator=generator)
        for i in range(min(per_pass, steps - step)):
            index = order[i * batch_size : (i + 1) * batch_size]
            yield x[index], y[index]
        step += min(per_pass, steps - step)

"""The recipes' accuracy metric: torchmetrics' top-1 accuracy, exact across processes."""

from __future__ import annotations

try:
    from torchmetrics.classification import MulticlassAccuracy
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "The recipes measure accuracy with torchmetrics, which is not installed: install "
        'the recipes\' extra, `pip install -e ".[recipes]"`, or `pip install torchmetrics`.'
    ) from error

__all__ = ["MulticlassAccuracy", "accuracy"]


def accuracy(num_classes: int = 10) -> MulticlassAccuracy:
    """Top-1 accuracy over every sample seen (all processes' samples under DDP).

    Args:
        num_classes: how many classes the model predicts.
    """
    return MulticlassAccuracy(num_classes=num_classes, average="micro")

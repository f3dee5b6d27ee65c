"""The MNIST recipe's work as a hand-written PyTorch loop: the anchor for its speed.

It does what ``trainkit fit recipes/mnist/config.yaml`` does, without trainkit:
the same network (conv16-conv32 3x3 with batch norm, pool before ReLU,
channels_last, fc128-dropout-fc10), the same data (the MNIST files normalised
once into tensors, the last 5,000 training images held out, a shuffling
DataLoader of batch 128), AdamW (lr 0.01, weight decay 1e-4) with a one-cycle
schedule stepped every batch, 2 epochs, validation accuracy after each epoch,
and the test accuracy on all 10,000 test images at the end. It keeps the
weights of the best validation epoch and tests those, as the recipe's
``ModelCheckpoint(monitor="val/acc")`` and ``test_after_fit`` do.

    TRAINKIT_DATA_DIR=../shared/data python benchmarks/mnist_anchor.py

``benchmarks/mnist_speed.py`` runs it and the recipe side by side.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from recipes.mnist.data import default_data_dir, load_mnist

VAL_SIZE = 5000


def recipe_network(dropout: float = 0.1) -> nn.Module:
    """The recipe's MNISTClassifier layers as one plain ``nn.Sequential``."""
    network = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, bias=False),
        nn.BatchNorm2d(16),
        nn.MaxPool2d(2),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1, bias=False),
        nn.BatchNorm2d(32),
        nn.MaxPool2d(2),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 128),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(128, 10),
    )
    return network.to(memory_format=torch.channels_last)


def _accuracy(network: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    network.eval()
    correct = 0
    with torch.inference_mode():
        for x, y in zip(images.split(1000), labels.split(1000), strict=True):
            logits = network(x.contiguous(memory_format=torch.channels_last))
            correct += int((logits.argmax(1) == y).sum())
    return correct / len(labels)


def run(epochs: int = 2, seed: int = 0, batch_size: int = 128, lr: float = 0.01) -> dict[str, Any]:
    """Train and test as the recipe does; return the accuracies and times."""
    start = time.perf_counter()
    torch.manual_seed(seed)
    root = default_data_dir()
    images, labels = load_mnist(root, train=True)
    split = len(images) - VAL_SIZE
    train = DataLoader(
        TensorDataset(images[:split], labels[:split]), batch_size=batch_size, shuffle=True
    )
    val_x, val_y = images[split:], labels[split:]
    test_x, test_y = load_mnist(root, train=False)
    network = recipe_network()
    optimizer = torch.optim.AdamW(network.parameters(), lr=lr, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, lr, total_steps=epochs * len(train))
    best: tuple[float, dict[str, torch.Tensor]] = (-1.0, {})
    fit_start = time.perf_counter()
    for _ in range(epochs):
        network.train()
        for x, y in train:
            x = x.contiguous(memory_format=torch.channels_last)
            loss = F.cross_entropy(network(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
        val_accuracy = _accuracy(network, val_x, val_y)
        if val_accuracy > best[0]:
            best = (val_accuracy, copy.deepcopy(network.state_dict()))
    fit_seconds = time.perf_counter() - fit_start
    network.load_state_dict(best[1])
    test_accuracy = _accuracy(network, test_x, test_y)
    return {
        "test_acc": test_accuracy,
        "best_val_acc": best[0],
        "fit_seconds": fit_seconds,
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print one JSON line only")
    args = parser.parse_args()
    result = run(epochs=args.epochs)
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"platform: {platform.platform()} | cpus: {os.cpu_count()} | torch {torch.__version__}"
        f" | threads {torch.get_num_threads()}"
    )
    print(
        f"test accuracy {result['test_acc']:.4f} | fit {result['fit_seconds']:.1f} s | "
        f"in all {result['seconds']:.1f} s (data loading and test included)"
    )


if __name__ == "__main__":
    main()

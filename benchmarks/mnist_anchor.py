"""Time-to-99% of the classic two-conv MNIST network as a plain PyTorch loop.

The anchor for the MNIST recipe (docs/recipes.md): conv32-conv64-maxpool-
dropout-fc128-dropout-fc10, Adadelta (lr 1.0, StepLR gamma 0.7), batch 64, the
standard normalisation, data read once into tensors (as the recipe does). After
every epoch it measures test accuracy and reports the training time (test
evaluation excluded) at which the accuracy first reached 99%.

    TRAINKIT_DATA_DIR=../shared/data python benchmarks/mnist_anchor.py [--max-epochs 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from recipes.mnist.data import default_data_dir, load_mnist


class ClassicNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return self.fc2(x)  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-epochs", type=int, default=5)
    args = parser.parse_args()
    print(
        f"platform: {platform.platform()} | cpus: {os.cpu_count()} | torch {torch.__version__}"
        f" | threads {torch.get_num_threads()}"
    )
    torch.manual_seed(0)
    root = default_data_dir()
    train = DataLoader(TensorDataset(*load_mnist(root, train=True)), batch_size=64, shuffle=True)
    test_x, test_y = load_mnist(root, train=False)
    model = ClassicNet()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    trained = 0.0
    for epoch in range(args.max_epochs):
        start = time.perf_counter()
        model.train()
        for x, y in train:
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        scheduler.step()
        trained += time.perf_counter() - start
        model.eval()
        with torch.inference_mode():
            correct = sum(
                int((model(x).argmax(1) == y).sum())
                for x, y in zip(test_x.split(1000), test_y.split(1000), strict=True)
            )
        accuracy = correct / len(test_y)
        print(
            f"epoch {epoch}: test accuracy {accuracy:.4f}, training time so far {trained:.1f} s",
            flush=True,
        )
        if accuracy >= 0.99:
            print(f"time to 99%: {trained:.1f} s ({epoch + 1} epochs)")
            return
    print(f"did not reach 99% in {args.max_epochs} epochs ({trained:.1f} s)")


if __name__ == "__main__":
    main()

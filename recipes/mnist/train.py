"""Train the MNIST recipe and report its test accuracy.

Run from the repository root::

    python -m recipes.mnist.train --max-epochs 2

Data: ``$TRAINKIT_DATA_DIR`` (default ``~/.cache/trainkit/data``), downloaded on
first use. Logs: ``runs/mnist/logs/version_N`` (``tensorboard --logdir runs``).
"""

from __future__ import annotations

import argparse
import time

import trainkit
from recipes.mnist.data import MNISTData
from recipes.mnist.model import MNISTClassifier


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--data-dir", default=None, help="data root (default: $TRAINKIT_DATA_DIR)")
    parser.add_argument("--root-dir", default="runs/mnist", help="where logs go")
    parser.add_argument(
        "--limit-train-batches",
        type=float,
        default=1.0,
        help="fraction of each epoch to train on (for quick checks)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    data = MNISTData(args.data_dir, batch_size=args.batch_size)
    model = MNISTClassifier(lr=args.lr)
    limit = args.limit_train_batches
    trainer = trainkit.Trainer(
        max_epochs=args.max_epochs,
        default_root_dir=args.root_dir,
        seed=args.seed,
        limit_train_batches=int(limit) if limit > 1 else limit,
        log_every_n_steps=50,
    )
    start = time.perf_counter()
    trainer.fit(model, datamodule=data)
    fit_seconds = time.perf_counter() - start
    result = trainer.test(model, datamodule=data)[0]
    print(
        f"test accuracy {result['test/acc']:.4f} | fit time {fit_seconds:.1f} s | "
        f"logs in {trainer.log_dir}"
    )
    return {**result, "fit_seconds": fit_seconds}


if __name__ == "__main__":
    main()

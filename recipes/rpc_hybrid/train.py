"""Train the RPC hybrid recipe: a master and workers on this machine, on CPU.

Run from the repository root::

    python -m recipes.rpc_hybrid.train --world-size 3 --compare

Process 0 (the master) holds the synthetic data and the weights; processes
1..N-1 (the workers) each run the two-stage classifier on their part of every
batch. ``--compare`` also trains the same model in this process on the same
batches and reports whether the weights agree and the time per step of each.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

import torch

from recipes.rpc_hybrid.hybrid import Config, launch, train_single_process


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse the command line, train, print one summary line (two with ``--compare``).

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).

    Returns:
        The master's result (see :func:`recipes.rpc_hybrid.hybrid.run_master`),
        with ``reference`` (the single-process result) and ``max_difference``
        (the largest absolute weight difference) under ``--compare``.
    """
    defaults = Config()
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--world-size", type=int, default=3, help="master + workers (>= 2)")
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds the job may take")
    parser.add_argument(
        "--compare", action="store_true", help="also train in one process and compare"
    )
    args = parser.parse_args(argv)
    if args.world_size < 2:
        parser.error(f"--world-size {args.world_size}: needs a master and at least one worker")
    if args.batch_size < args.world_size - 1:
        parser.error(f"--batch-size {args.batch_size}: smaller than the number of workers")
    config = replace(
        defaults, steps=args.steps, batch_size=args.batch_size, lr=args.lr, seed=args.seed
    )
    result = launch(config, world_size=args.world_size, timeout=args.timeout)
    print(
        f"test accuracy {result['accuracy']:.4f} after {config.steps} steps | "
        f"{1000 * result['seconds_per_step']:.2f} ms per step over RPC "
        f"({args.world_size} processes)"
    )
    if args.compare:
        torch.set_num_threads(1)  # as each RPC process runs
        reference = train_single_process(config)
        difference = max(
            (result["state_dict"][k] - v).abs().max().item()
            for k, v in reference["state_dict"].items()
        )
        print(
            f"single process: test accuracy {reference['accuracy']:.4f} | "
            f"{1000 * reference['seconds_per_step']:.2f} ms per step | "
            f"largest weight difference {difference:.1e}"
        )
        result = {**result, "reference": reference, "max_difference": difference}
    sys.stdout.flush()
    return result


if __name__ == "__main__":
    main()

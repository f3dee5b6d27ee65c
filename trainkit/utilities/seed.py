"""Seeding and deterministic settings."""

from __future__ import annotations

import array
import os
import random
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from trainkit.utilities.rank_zero import rank_zero_print

#: Where :func:`seed_everything` records the seed and the ``workers`` choice, for
#: :func:`reset_seed` and the processes started later.
SEED_VARIABLE, WORKERS_VARIABLE = "TRAINKIT_GLOBAL_SEED", "TRAINKIT_SEED_WORKERS"


def seed_everything(
    seed: int | str | None = None, workers: bool = False, verbose: bool = False
) -> int:
    """Seed Python's, NumPy's (when installed) and torch's random generators.

    Every process gets the same streams (so models start identical on every rank).
    With ``workers=True``, the Trainer also gives each DataLoader worker a stream
    of its own, derived from the seed, the global rank and the worker (see
    :func:`seed_worker`): distinct across ranks and workers, new every epoch, and
    the same on every run.

    Args:
        seed: the seed, an integer in [0, 2**32 - 1] (a string of digits is read as one).
            None takes it from the ``TRAINKIT_GLOBAL_SEED`` environment variable (which
            this function sets, so processes started later inherit it), else 0 with a
            warning.
        workers: seed DataLoader workers per rank and worker.
        verbose: print the seed used.

    Returns:
        The seed.

    Example:
        >>> import torch
        >>> _ = seed_everything(7); a = torch.rand(1)
        >>> _ = seed_everything(7); bool(torch.equal(a, torch.rand(1)))
        True
    """
    if seed is None:
        found = os.environ.get(SEED_VARIABLE)
        if found is None:
            warnings.warn(
                "seed_everything(): no seed given or found; seeding with 0.", stacklevel=2
            )
            seed = 0
        elif not found.strip().isdigit():
            raise ValueError(
                f"{SEED_VARIABLE}={found!r} is not a seed; set it to an integer in "
                "[0, 2**32 - 1], or pass seed_everything(seed)."
            )
        else:
            seed = int(found)
    if isinstance(seed, str) and seed.strip().isdigit():
        seed = int(seed)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an integer in [0, 2**32 - 1], got {seed!r}.")
    if verbose:
        rank_zero_print(f"trainkit: seed set to {seed}")
    os.environ[SEED_VARIABLE] = str(seed)
    if workers:
        os.environ[WORKERS_VARIABLE] = "1"
    else:
        os.environ.pop(WORKERS_VARIABLE, None)
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:  # numpy is optional
        pass
    torch.manual_seed(seed)  # seeds CUDA generators too
    return seed


def set_deterministic(enabled: bool) -> None:
    """Make torch choose deterministic kernels (and fail on ops that have none).

    Args:
        enabled: turn determinism on (True) or leave torch's defaults (False).
    """
    if not enabled:
        return
    # cuBLAS needs a fixed workspace to be deterministic; it must be set before
    # the first cuBLAS call, so set it here rather than leave it to the user.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def capture_rng_states() -> dict[str, Any]:
    """The states of Python's, NumPy's and torch's (CPU and CUDA) generators.

    Everything is a tensor or a plain container, so the result can be saved in a
    checkpoint and loaded with ``torch.load(weights_only=True)``.

    Example:
        >>> import torch
        >>> states = capture_rng_states()
        >>> a = torch.rand(1)
        >>> restore_rng_states(states)
        >>> bool(torch.equal(a, torch.rand(1)))
        True
    """
    version, internal, gauss = random.getstate()
    states: dict[str, Any] = {
        # One int64 tensor, not a list of 625 ints: a checkpoint pickles and
        # digests it as one value instead of 625 (an end-of-epoch save was ~0.7 ms
        # slower with the lists). Every word fits: they are 32-bit, the index <= 624.
        "python": {
            "version": version,
            "state": torch.frombuffer(array.array("q", internal), dtype=torch.int64),
            "gauss": gauss,
        },
        "torch": torch.get_rng_state(),
    }
    try:
        import numpy

        numpy_state = numpy.random.get_state(legacy=False)
        states["numpy"] = {
            "bit_generator": numpy_state["bit_generator"],
            "key": torch.from_numpy(numpy_state["state"]["key"].astype("int64")),
            "pos": int(numpy_state["state"]["pos"]),
            "has_gauss": int(numpy_state["has_gauss"]),
            "gauss": float(numpy_state["gauss"]),
        }
    except ImportError:  # numpy is optional
        pass
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict[str, Any]) -> None:
    """Restore generator states saved by :func:`capture_rng_states`.

    Args:
        states: what :func:`capture_rng_states` returned.
    """
    python = states["python"]
    internal = python["state"]  # a tensor; a list of ints in older checkpoints
    words = internal.tolist() if isinstance(internal, torch.Tensor) else internal
    random.setstate((python["version"], tuple(words), python["gauss"]))
    torch.set_rng_state(states["torch"])
    if "numpy" in states:
        try:
            import numpy

            saved = states["numpy"]
            numpy.random.set_state(
                {
                    "bit_generator": saved["bit_generator"],
                    "state": {"key": saved["key"].numpy().astype("uint32"), "pos": saved["pos"]},
                    "has_gauss": saved["has_gauss"],
                    "gauss": saved["gauss"],
                }
            )
        except ImportError:
            pass
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


@contextmanager
def isolated_rng(include_cuda: bool = True) -> Iterator[None]:
    """Run a block without changing any generator's state afterwards.

    Evaluation runs inside this inside ``fit``: a dataloader draws a seed from
    torch's generator each time it is iterated, so without it, how often one
    validates would change the training that follows (and a resumed run, which
    skips a validation it did not need, would drift). Lightning's ``isolate_rng``.

    Args:
        include_cuda: also restore the CUDA generators (where CUDA is in use).
    """
    states = capture_rng_states()
    if not include_cuda:
        states.pop("cuda", None)
    try:
        yield
    finally:
        restore_rng_states(states)


def seed_worker(worker_id: int, rank: int | None = None) -> None:
    """DataLoader ``worker_init_fn``: seed this worker from its torch seed and the global rank.

    torch already gives worker w of an epoch the seed ``base + w``, with ``base``
    drawn from the main process's generator: reproducible, but equal on every
    rank when all ranks were seeded alike. Mixing in the rank makes the streams
    distinct across ranks too. Python's, NumPy's and torch's generators are seeded.

    Args:
        worker_id: the worker's index (given by the DataLoader).
        rank: the process's global rank (None: this process's).
    """
    import hashlib

    from trainkit.utilities.rank_zero import global_rank

    rank = global_rank() if rank is None else rank
    material = f"{torch.initial_seed()}:{rank}:{worker_id}".encode()
    derived = int.from_bytes(hashlib.sha256(material).digest()[:8], "little")
    torch.manual_seed(derived)
    random.seed(derived)
    try:
        import numpy

        numpy.random.seed(derived % 2**32)
    except ImportError:
        pass


def seeding_workers() -> bool:
    """Whether ``seed_everything(..., workers=True)`` asked for per-worker seeding."""
    return os.environ.get(WORKERS_VARIABLE) == "1"


def reset_seed() -> None:
    """Seed again with what :func:`seed_everything` last set (nothing, if it was never called).

    The seed and the ``workers`` choice are read from the environment, where
    ``seed_everything`` records them (so a process started later resets to them too).
    """
    seed = os.environ.get(SEED_VARIABLE)
    if seed is not None:
        seed_everything(seed, workers=seeding_workers())

"""The batch size finder: the largest batch size whose training steps fit in memory.

Lightning's ``scale_batch_size`` (its documentation: *Batch Size Finder*): each
trial sets the batch size (``batch_arg_name`` on the Module, its ``hparams``, the
DataModule or its ``hparams``), builds the dataloaders again from their hooks
and trains ``steps_per_trial`` steps (then validates as many batches, if the
fit validates). ``power`` doubles the size after each success until a trial
runs out of memory; ``binsearch`` then bisects between the last success and
the failure. The largest size that ran is the result; afterwards the run is as
it was (see ``trainkit.tuner.trial``), with the batch size set to the result.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch

from trainkit.core.module import overrides
from trainkit.loops.dataloaders import fit_loaders
from trainkit.tuner.trial import Snapshot, free_memory, should_skip, train_trial
from trainkit.tuner.values import find_attribute, get_attribute, set_attribute

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

__all__ = ["MODES", "is_oom_error", "scale_batch_size"]

#: The search modes.
MODES = ("power", "binsearch")

# The messages of out-of-memory errors that arrive as plain RuntimeErrors: the parts
# each holds.
CUDA_OOM = ("CUDA", "out of memory")
CUDNN_OOM = ("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED.",)  # cuDNN's way of running out
CPU_OOM = ("DefaultCPUAllocator: can't allocate memory",)
_OOM_MESSAGES = (CUDA_OOM, CUDNN_OOM, CPU_OOM)


def says(error: BaseException, parts: tuple[str, ...]) -> bool:
    """Whether ``error`` is a RuntimeError with one message holding every one of ``parts``.

    Example:
        >>> says(RuntimeError("CUDA out of memory."), CUDA_OOM), says(ValueError("CUDA"), CUDA_OOM)
        (True, False)
    """
    if not isinstance(error, RuntimeError) or len(error.args) != 1:
        return False
    message = error.args[0]
    return isinstance(message, str) and all(part in message for part in parts)


def is_oom_error(exception: BaseException) -> bool:
    """Whether ``exception`` means the device (or host) ran out of memory.

    Lightning's ``is_oom_error``: a CUDA out-of-memory error, cuDNN's
    CUDNN_STATUS_NOT_SUPPORTED, or the CPU allocator failing.

    Args:
        exception: the exception a trial raised.

    Example:
        >>> is_oom_error(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
        True
        >>> is_oom_error(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
        False
    """
    if isinstance(exception, torch.cuda.OutOfMemoryError):
        return True
    return any(says(exception, parts) for parts in _OOM_MESSAGES)


def check_search(
    mode: str,
    steps_per_trial: int,
    init_val: int,
    max_trials: int,
    margin: float = 0.05,
    max_val: int = 8192,
) -> None:
    """Refuse search settings that cannot work, naming the fix.

    Args:
        mode: "power" or "binsearch".
        steps_per_trial: training steps per trial.
        init_val: the first batch size tried.
        max_trials: the most trials.
        margin: the fraction "binsearch" takes off the size found, in [0, 1).
        max_val: the largest size tried.
    """
    if mode not in MODES:
        raise ValueError(f"`mode` should be either of {MODES}, got {mode!r}.")
    for name, value in (("steps_per_trial", steps_per_trial), ("init_val", init_val)):
        if value < 1:
            raise ValueError(f"{name}={value}: it must be at least 1.")
    if max_trials < 1:
        raise ValueError(f"max_trials={max_trials}: the search needs at least one trial.")
    if isinstance(margin, bool) or not 0.0 <= margin < 1.0:
        raise ValueError(
            f"margin={margin!r} must be at least 0 and below 1 (the fraction the batch size "
            "found is reduced by; 0.05 is 5%)."
        )
    if isinstance(max_val, bool) or not isinstance(max_val, int) or max_val < 1:
        raise ValueError(f"max_val={max_val!r} must be a positive integer.")
    if init_val > max_val:
        raise ValueError(
            f"init_val={init_val}, max_val={max_val}: the first size tried exceeds the "
            "largest allowed; lower init_val or raise max_val."
        )


def scale_batch_size(
    trainer: Trainer,
    module: Module,
    mode: str = "power",
    steps_per_trial: int = 3,
    init_val: int = 2,
    max_trials: int = 25,
    batch_arg_name: str = "batch_size",
    margin: float = 0.05,
    max_val: int = 8192,
) -> int | None:
    """Find the largest batch size that trains in a set-up fit; set it and return it.

    Called from ``on_fit_start`` (the BatchSizeFinder callback) or by
    :meth:`trainkit.tuner.Tuner.scale_batch_size`; the arguments are theirs.
    The dataloaders must come from the Module's or DataModule's hooks, which
    read the batch size from ``batch_arg_name``.

    Args:
        trainer: the Trainer, its fit set up.
        module: the Module.
        mode: "power" (double until out of memory) or "binsearch" (then bisect).
        steps_per_trial: training steps per trial.
        init_val: the first batch size tried.
        max_trials: the most trials (sizes tried).
        batch_arg_name: the attribute (or hparams key) holding the batch size.
        margin: in "binsearch" mode, the fraction the size found is reduced by (a
            safety buffer): ``max(1, int(found * (1 - margin)))``.
        max_val: the largest size tried (and so returned).

    Returns:
        The largest batch size that ran (less ``margin`` in "binsearch" mode), or
        None when skipped (``fast_dev_run``).

    Raises:
        RuntimeError: no batch size ran (every trial ran out of memory).
    """
    check_search(mode, steps_per_trial, init_val, max_trials, margin, max_val)
    if not find_attribute(trainer, module, batch_arg_name):
        raise AttributeError(
            f"Field {batch_arg_name!r} not found in the model, the DataModule, nor their "
            "hparams: the batch size finder sets the batch size there and the dataloader hooks "
            "read it. Store it (e.g. self.batch_size = batch_size) or pass batch_arg_name=..."
        )
    if should_skip(trainer, "batch size scaler"):
        return None
    original = get_attribute(trainer, module, batch_arg_name)
    snapshot = Snapshot(trainer)
    try:
        found = _search(
            trainer, module, mode, steps_per_trial, init_val, max_trials, batch_arg_name, max_val
        )
    finally:
        # As before the search (the checkpoint's hyperparameters match), then the result.
        set_attribute(trainer, module, batch_arg_name, original)
        snapshot.restore(trainer)
    if mode == "binsearch" and margin > 0:
        found = max(1, int(found * (1 - margin)))
    set_attribute(trainer, module, batch_arg_name, found)
    # The fit that follows uses the new size: a request to the run (whose state the loops own).
    run = trainer.optimization.run
    run.state.reload_dataloaders = True
    return found


def _search(
    trainer: Trainer,
    module: Module,
    mode: str,
    steps: int,
    size: int,
    max_trials: int,
    name: str,
    max_val: int,
) -> int:
    # good: the largest size that ran; bad: the smallest that ran out of memory.
    good: int | None = None
    bad: int | None = None
    for _ in range(max_trials):
        ran, cap = _trial(trainer, module, steps, size, name)
        if ran:
            good = size
            if bad is None or mode == "power":
                following = min(size * 2, cap or size * 2, max_val)
            else:
                following = (good + bad) // 2
            if following == size or (bad is not None and following >= bad):
                break  # the whole dataset in one batch, nothing left between the bounds,
                # or (power, after halving) the next size is one that ran out of memory
        else:
            bad = size
            if mode == "power" and good is not None:
                break
            low = good or 0
            following = (low + bad) // 2
            if following == low:
                break
        size = following
    if good is None:
        raise RuntimeError(
            f"The batch size finder found no batch size that fits: the smallest tried, "
            f"{bad}, ran out of memory. Shrink the model or its inputs, or start lower "
            "(init_val) with more trials (max_trials)."
        )
    return good


def _trial(
    trainer: Trainer, module: Module, steps: int, size: int, name: str
) -> tuple[bool, int | None]:
    # One trial: whether `size` trained (and validated) without running out of
    # memory, and how many samples the training set has (None: unknown).
    set_attribute(trainer, module, name, size)
    # The loaders again from their hooks, as fit builds them (limits, sampler, seeding).
    train, val = fit_loaders(trainer.optimization.run, None, None)
    validates = any(total > 0 for total in trainer.state.num_val_batches)
    val_loaders = val if validates and overrides(module, "validation_step") else None
    try:
        train_trial(trainer, module, steps, train, [], val_loaders)
    except RuntimeError as error:  # torch.cuda.OutOfMemoryError is one
        if not is_oom_error(error):
            raise
        failed = True
    else:
        failed = False
    # Outside the except block, where the error's frames (holding tensors) are gone.
    if failed:
        module.zero_grad(set_to_none=True)
        free_memory()
    return not failed, _dataset_size(train)


def _dataset_size(loader: Iterable[Any]) -> int | None:
    # A batch larger than the training set holds the same samples as the whole set.
    dataset = getattr(loader, "dataset", None)
    try:
        return len(dataset) if dataset is not None else None
    except TypeError:
        return None  # an iterable dataset

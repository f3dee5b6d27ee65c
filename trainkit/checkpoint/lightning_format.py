"""Lightning's checkpoint layout: its loop progress written from trainkit's state, and
a Lightning file's state restored into a trainkit run."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trainkit.checkpoint.callback_state import callback_state_key, load_callback_state
from trainkit.checkpoint.files import CheckpointError
from trainkit.checkpoint.weights import restore_datamodule

if TYPE_CHECKING:
    from trainkit.loops.run import Run
    from trainkit.loops.state import RunState


# ------------------------------------------------------- Lightning's layout
#: Where Lightning's precision plugin keeps the float16 loss scaler's state (the
#: plugin's class name; trainkit's precision callback keeps it under its own key).
PRECISION_KEY = "MixedPrecision"
#: Where Lightning 1.x kept the loss scaler's state.
_LEGACY_SCALER_KEY = "native_amp_scaling_state"


def resumed_inside_epoch(state: RunState, checkpoint: Mapping[str, Any]) -> None:
    """After the counters are restored: mark an epoch resumed in its middle
    (``fit_loop.restarting``), and keep the positions of the training loaders that
    keep their own, saved where Lightning saves them, for it.

    Example:
        >>> from trainkit.loops.state import RunState
        >>> state = RunState(epoch=2, batch_idx=3)
        >>> saved = {"loops": {"fit_loop": {"state_dict": {"combined_loader": [{"index": 3}]}}}}
        >>> resumed_inside_epoch(state, saved)
        >>> state.restarted_epoch, state.loader_states
        (2, [{'index': 3}])
    """
    inside = state.batch_idx > 0
    state.restarted_epoch = state.epoch if inside else None
    fit_loop = _entry(_entry(checkpoint, "loops"), "fit_loop")
    saved = _entry(_entry(fit_loop, "state_dict"), "combined_loader")
    state.loader_states = list(saved) if inside and isinstance(saved, list) else []


def _entry(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else None


def restore_lightning_state(run: Run, checkpoint: dict[str, Any], source: str) -> None:
    """The part of :func:`restore_state` that reads what only Lightning's files hold."""
    callback_states = dict(checkpoint.get("callbacks") or {})
    scaler = checkpoint.get(PRECISION_KEY, checkpoint.get(_LEGACY_SCALER_KEY))
    if scaler and (precision := run.step_slots.precision) is not None:
        callback_states.setdefault(callback_state_key(precision), {"scaler": scaler})
    restored: set[str] = set()
    for callback in run.callbacks:
        key = callback_state_key(callback)
        if key not in callback_states:
            continue
        restored.add(key)
        try:
            load_callback_state(callback, dict(callback_states[key]))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            run.warn(
                f"The Lightning checkpoint {source} holds a state for {key} that it cannot "
                f"read ({type(error).__name__}: {error}); that callback starts afresh."
            )
    ignored = sorted(set(callback_states) - restored)
    if ignored:
        run.warn(
            f"The Lightning checkpoint {source} holds the state of callbacks this Trainer "
            f"does not have: {ignored}; their state is ignored. To restore it, pass "
            "callbacks whose state_key matches (the same class and arguments)."
        )
    progress = lightning_progress(checkpoint)
    state = run.state
    for name in ("epoch", "global_step", "batch_idx", "batches_seen"):
        setattr(state, name, progress[name])
    state.should_stop = False
    state.epoch_start_rng = None  # a Lightning file has no record of the epoch's order
    resumed_inside_epoch(state, checkpoint)
    if progress["batch_idx"] > 0 and not state.loader_states:  # else they go on from there
        run.warn(
            f"The Lightning checkpoint {source} was saved {progress['batch_idx']} batches "
            f"into epoch {progress['epoch']}. trainkit continues that epoch at batch "
            f"{progress['batch_idx']} of a newly drawn order, so with a shuffling dataloader "
            "some samples of the epoch are seen twice and others not at all, and the random "
            "state is not the saved run's (Lightning files do not record the data order). "
            "For an exact resume, resume from a checkpoint saved at an epoch's end or from "
            "one written by trainkit."
        )
    elif "loops" not in checkpoint:
        run.warn(
            f"The Lightning checkpoint {source} has no 'loops' entry (loop progress); "
            f"assuming it was saved at the end of epoch {progress['epoch'] - 1}, training "
            f"continues at epoch {progress['epoch']}."
        )
    restore_datamodule(run.datamodule, checkpoint)


def lightning_progress(checkpoint: Mapping[str, Any]) -> dict[str, int]:
    """Where a Lightning checkpoint resumes, in trainkit's counters.

    Lightning's fit-loop progress says whether the file was saved at an epoch's
    end (training continues at the next epoch) or during one (it continues at
    the next batch). Without it, the file is taken as saved at an epoch's end,
    ModelCheckpoint's default.

    Args:
        checkpoint: a checkpoint written by Lightning.

    Returns:
        ``epoch``, ``batch_idx`` (batches of that epoch already run),
        ``global_step`` and ``batches_seen`` (training batches run in all).

    Example:
        >>> lightning_progress({"epoch": 3, "global_step": 40})
        {'epoch': 4, 'batch_idx': 0, 'global_step': 40, 'batches_seen': 40}
    """
    global_step = int(checkpoint.get("global_step", 0))
    fit = (checkpoint.get("loops") or {}).get("fit_loop")
    if not fit:
        epoch = int(checkpoint.get("epoch", 0)) + 1
        return {
            "epoch": epoch,
            "batch_idx": 0,
            "global_step": global_step,
            "batches_seen": global_step,
        }
    epochs = fit["epoch_progress"]["current"]
    batches = fit["epoch_loop.batch_progress"]
    epoch = int(epochs["processed"])
    batch_idx = 0
    mid_epoch = int(epochs["started"]) > epoch
    if mid_epoch and not batches.get("is_last_batch", False):
        batch_idx = int(batches["current"]["processed"])
    elif mid_epoch:
        epoch += 1  # saved after the epoch's last batch: the epoch is done
    return {
        "epoch": epoch,
        "batch_idx": batch_idx,
        "global_step": global_step,
        "batches_seen": int(batches["total"]["processed"]),
    }


def lightning_epoch(epoch: int, batch_idx: int, finished: bool) -> int:
    # Lightning's "epoch" is its current_epoch: during fit, a file saved at an
    # epoch's end names that epoch (trainkit's counter already names the next).
    return epoch - 1 if epoch > 0 and batch_idx == 0 and not finished else epoch


def lightning_loops(
    loop_state: Mapping[str, Any], batches_per_epoch: float, automatic: bool, finished: bool
) -> dict[str, Any]:
    """Lightning's ``loops`` entry for a run at ``loop_state``, so Lightning resumes there.

    Lightning's fit-loop progress is rebuilt from trainkit's counters: the epoch,
    the batch position and the global step. Counters trainkit does not keep
    (optimizer steps within the current epoch, scheduler steps, validation
    batches) are derived from those or zero.

    Args:
        loop_state: a :class:`~trainkit.loops.state.RunState`'s ``state_dict()``.
        batches_per_epoch: training batches in an epoch (inf when unknown).
        automatic: whether the Module uses automatic optimization.
        finished: whether fit has ended (Lightning then counts the last epoch done).

    Returns:
        A dict shaped like the ``loops`` entry of a Lightning 2.x checkpoint.
    """
    epoch, batch = int(loop_state["epoch"]), int(loop_state["batch_idx"])
    seen, steps = int(loop_state["batches_seen"]), int(loop_state["global_step"])
    per_epoch = int(batches_per_epoch) if math.isfinite(batches_per_epoch) else batch
    if batch > 0:  # during an epoch, as Lightning saves at on_train_batch_end
        epochs = _counts(epoch + 1, epoch + 1, epoch, epoch)
        current = _counts(batch, batch, batch, batch - 1)
        total = _counts(seen, seen, seen, seen - 1)
    elif epoch > 0 and not finished:  # at an epoch's end, as Lightning saves at on_train_epoch_end
        epochs = _counts(epoch, epoch, epoch, epoch - 1)
        current, total = _counts(*[per_epoch] * 4), _counts(*[seen] * 4)
    else:  # before training, or after fit ended
        epochs = _counts(*[epoch] * 4)
        current, total = _counts(*[per_epoch if epoch > 0 else 0] * 4), _counts(*[seen] * 4)
    last = batch == 0 and epoch > 0
    zero = _counts(0, 0, 0, 0)
    automatic_steps, manual_steps = (steps, 0) if automatic else (0, steps)
    return {
        "fit_loop": {
            "state_dict": {},
            "epoch_progress": {"current": epochs, "total": dict(epochs)},
            "epoch_loop.state_dict": {"_batches_that_stepped": steps},
            "epoch_loop.batch_progress": {
                "current": current,
                "total": total,
                "is_last_batch": last,
            },
            "epoch_loop.scheduler_progress": _steps(0, 0),
            "epoch_loop.automatic_optimization.state_dict": {},
            "epoch_loop.automatic_optimization.optim_progress": {
                "optimizer": {
                    "step": _steps(0, automatic_steps),
                    "zero_grad": {
                        "current": {"ready": 0, "started": 0, "completed": 0},
                        "total": {
                            "ready": automatic_steps,
                            "started": automatic_steps,
                            "completed": automatic_steps,
                        },
                    },
                }
            },
            "epoch_loop.manual_optimization.state_dict": {},
            "epoch_loop.manual_optimization.optim_step_progress": _steps(0, manual_steps),
            "epoch_loop.val_loop.state_dict": {},
            "epoch_loop.val_loop.batch_progress": {
                "current": zero,
                "total": dict(zero),
                "is_last_batch": False,
            },
        },
        **{
            name: {
                "state_dict": {},
                "batch_progress": {
                    "current": dict(zero),
                    "total": dict(zero),
                    "is_last_batch": False,
                },
            }
            for name in ("validate_loop", "test_loop", "predict_loop")
        },
    }


def _counts(ready: int, started: int, processed: int, completed: int) -> dict[str, int]:
    return {"ready": ready, "started": started, "processed": processed, "completed": completed}


def _steps(current: int, total: int) -> dict[str, dict[str, int]]:
    return {
        "current": {"ready": current, "completed": current},
        "total": {"ready": total, "completed": total},
    }


def batches_to_skip(loop_state: dict[str, Any], current: int | None, source: str) -> int:
    """The resumed epoch's position in batches of *this* run.

    A distributed sampler deals the epoch's permutation out in order: after k
    batches of b samples on each of W processes, exactly the first k*b*W are
    consumed, whatever W is. So a run with W' processes at b' samples continues
    the epoch exactly after k*b*W / (b'*W') batches, when that is whole.
    """
    batch_idx = int(loop_state["batch_idx"])
    saved = loop_state.get("samples_per_step")
    if batch_idx == 0 or saved is None or current is None or saved == current:
        return batch_idx
    consumed = batch_idx * int(saved)
    if consumed % current:
        raise CheckpointError(
            f"The checkpoint {source} was saved {batch_idx} batches into epoch "
            f"{loop_state['epoch']}, after {consumed} samples ({saved} per step); this run "
            f"takes {current} samples per step (batch size x data-parallel processes), and "
            f"{consumed} is not a whole number of such steps, so resuming would repeat or "
            "skip samples. Resume with a batch size and number of processes whose product "
            f"divides {consumed}, or from a checkpoint saved at an epoch's end."
        )
    return consumed // current

"""Assigning a built Trainer's step options: ``trainer.gradient_clip_val = None``.

Lightning keeps ``accumulate_grad_batches``, ``gradient_clip_val`` and
``gradient_clip_algorithm`` as plain Trainer attributes that code assigns:
callbacks at an epoch's start (an accumulation schedule of their own), projects
before ``fit`` (taking the clipping into a manual step of their own, say). In
trainkit each option is shorthand for a step callback (GradientAccumulation,
GradientClipping: ``trainkit/callbacks/defaults.py``), so assigning one replaces
the callback the Trainer made from it, or adds or removes it.

A running fit shapes its step anew at its next epoch's start, after the
``on_train_epoch_start`` hooks: a value a callback assigns there holds for that
epoch, as in Lightning. One assigned in the middle of an epoch waits for the
next epoch, where Lightning applies it from the next batch.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from trainkit.callbacks.base import Callback
from trainkit.callbacks.defaults import option_callback, step_slots, swap_callback

# The step slot each option is shorthand for.
_SLOTS = {
    "accumulate_grad_batches": "accumulation",
    "gradient_clip_val": "clipping",
    "gradient_clip_algorithm": "clipping",
}


def change_step_options(trainer: Any, **changes: Any) -> None:
    """Change the Trainer's step options, for the fit running now (if any) and later runs.

    Args:
        trainer: the Trainer.
        changes: the options' new values.

    Raises:
        ValueError, TypeError: a value ``Trainer(...)`` would refuse; a step the
            strategy cannot run (or accumulation in manual optimization); or a
            change to a slot a callback of the user's own fills (change that
            callback instead).
    """
    old = trainer.step_options
    new = replace(old, **changes)  # checked as Trainer(...) checks
    lists = {id(kept): kept for kept in (trainer.callbacks, trainer._user_callbacks)}
    edited = {key: list(kept) for key, kept in lists.items()}
    for slot in dict.fromkeys(_SLOTS[name] for name in changes):
        held = getattr(trainer.step_slots, slot)
        if held is not None and not _made_by_trainer(trainer, held, slot, old):
            asked = {name: value for name, value in changes.items() if _SLOTS[name] == slot}
            if all(getattr(trainer, name) == value for name, value in asked.items()):
                new = replace(new, **{name: getattr(old, name) for name in asked})
                continue  # what it does already: nothing to change
            raise ValueError(
                f"The training step's {slot} comes from your {type(held).__name__} callback, "
                f"so trainer.{' and '.join(asked)} cannot change it: change that callback's "
                "settings, or remove it and set the Trainer option."
            )
        replacement = option_callback(slot, new)
        for callbacks in edited.values():
            swap_callback(callbacks, held, replacement)
    slots = step_slots(edited[id(trainer.callbacks)])
    run = trainer._current
    if run is not None and run.fit is not None:
        run.fit.optimization.reshape(slots)  # may refuse: nothing has changed yet
    for key, callbacks in edited.items():
        lists[key][:] = callbacks  # the same lists: the running fit holds them
    trainer.step_options, trainer.step_slots = new, slots


def _made_by_trainer(trainer: Any, held: Callback, slot: str, options: Any) -> bool:
    # The slot's callback is the one the options made when it is among the Trainer's
    # own (not a Module's configure_callbacks one) and the options ask for one.
    mine = any(callback is held for callback in trainer._user_callbacks)
    return mine and option_callback(slot, options) is not None

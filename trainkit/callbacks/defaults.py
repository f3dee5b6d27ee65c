"""The Trainer's callback list: the user's callbacks plus those its arguments ask for.

``Trainer(precision=..., gradient_clip_val=..., accumulate_grad_batches=...)`` is
another spelling of the MixedPrecision, GradientClipping and
GradientAccumulation callbacks, and every Trainer watches the loss with
NonFiniteLoss: one mechanism, whichever way it is asked for. The
``enable_*`` flags add ModelSummary, ModelCheckpoint and TQDMProgressBar unless
the user passed their own (any ProgressBar, a RichProgressBar say, is their
bar). Every run (but a barebones one) gets a RunSummary, which warns when the
run is too short to log a step; it prints the end-of-run summary when the
Trainer adds its own progress bar too (the user's RunSummary
decides for itself). Installed packages may add callbacks to every Trainer
through an entry-point group (:data:`CALLBACKS_FACTORY`, as Lightning's
``lightning.pytorch.callbacks_factory``): they count as the user's.
"""

from __future__ import annotations

import functools
import importlib.metadata
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from trainkit.callbacks.accumulation import GradientAccumulation
from trainkit.callbacks.base import Callback, Checkpoint, base_method
from trainkit.callbacks.checkpoint import ModelCheckpoint
from trainkit.callbacks.clipping import GradientClipping
from trainkit.callbacks.early_stopping import EarlyStopping
from trainkit.callbacks.model_summary import ModelSummary
from trainkit.callbacks.nonfinite import NonFiniteLoss
from trainkit.callbacks.on_exception_checkpoint import OnExceptionCheckpoint
from trainkit.callbacks.precision import MixedPrecision
from trainkit.callbacks.progress import ProgressBar, TQDMProgressBar
from trainkit.callbacks.slots import StepSlots
from trainkit.callbacks.summary import RunSummary
from trainkit.checkpoint.callback_state import callback_state_key
from trainkit.core.module import overrides
from trainkit.trainer.options import OutputOptions, StepOptions
from trainkit.utilities.rank_zero import rank_zero_warn

if TYPE_CHECKING:
    import torch


#: The entry-point group whose factories add callbacks to every ``trainkit.Trainer``
#: (a factory returns a callback or a list of them); the ported Trainer of
#: ``trainkit.lightning`` also reads Lightning's groups.
CALLBACKS_FACTORY = "trainkit.callbacks_factory"


def external_callbacks(groups: Sequence[str]) -> list[Callback]:
    """The callbacks the installed packages' factories give, group by group, as
    Lightning adds those of ``lightning.pytorch.callbacks_factory``.

    A factory that cannot be imported (one written for a framework that is not
    installed, say) is skipped with a warning that names it.

    Args:
        groups: the entry-point groups to read.
    """
    found: list[Callback] = []
    for group in groups:
        for entry in _entry_points(group, tuple(sys.path)):
            try:
                factory = entry.load()
            except ImportError as error:
                warnings.warn(
                    f"The callbacks factory {entry.name} = {entry.value} (entry-point group "
                    f"{group}) cannot be imported ({error}); its callbacks are not added. "
                    "Install what it needs, or uninstall the package that registers it.",
                    stacklevel=4,
                )
                continue
            made = factory()
            found.extend(made if isinstance(made, list) else [] if made is None else [made])
    return found


@functools.lru_cache(maxsize=16)
def _entry_points(group: str, path: tuple[str, ...]) -> tuple[importlib.metadata.EntryPoint, ...]:
    # Scanning the installed packages takes milliseconds: once per group and sys.path.
    del path  # part of the cache's key only
    return tuple(importlib.metadata.entry_points(group=group))


def assemble_callbacks(
    callbacks: Callback | list[Callback] | None,
    step: StepOptions,
    output: OutputOptions,
    *,
    fast_dev_run: bool,
    barebones: bool = False,
    scaler: torch.amp.GradScaler | None = None,
    groups: Sequence[str] = (CALLBACKS_FACTORY,),
    nonfinite: str = "raise",
) -> list[Callback]:
    """The Trainer's callbacks, in the order their hooks run.

    As Lightning orders them: the user's first, as given, then the Trainer's own
    (the step callbacks its arguments ask for, the progress bar, the model
    summary, the run summary, whose ``teardown`` prints after the bar is closed),
    and every checkpointing callback last (after the others' epoch-end hooks).

    Args:
        callbacks: what the user passed as ``callbacks``.
        step: the step options (precision, clipping, accumulation shorthands).
        output: which default callbacks are enabled.
        fast_dev_run: a fast dev run adds no model summary and no checkpointing.
        barebones: add no model summary, checkpointing or progress bar.
        scaler: a precision plugin's own float16 gradient scaler.
        groups: the entry-point groups whose factories add callbacks after the user's.
        nonfinite: the action of the default ``NonFiniteLoss`` ("raise"; the ported
            Trainer's "warn" trains on, as Lightning does).
    """
    if callbacks is not None and not isinstance(callbacks, (list, tuple)):
        callbacks = [callbacks]
    user = list(callbacks or []) + external_callbacks(groups)
    for callback in user:
        _check_callback(callback)
        _refuse_old_step_hooks(callback)
    bars = _of_type(user, ProgressBar)
    if len(bars) > 1:
        raise ValueError(
            f"Trainer(callbacks=...) holds {len(bars)} progress bars "
            f"({', '.join(type(bar).__name__ for bar in bars)}): only one progress bar is "
            "supported at a time (each would draw every batch). Keep one of them."
        )
    if bars and not output.enable_progress_bar:
        # Lightning refuses this combination; trainkit keeps the user's bar.
        warnings.warn(
            "Trainer(enable_progress_bar=False) only turns off the default progress bar: "
            f"the {type(bars[0]).__name__} in callbacks still draws.",
            stacklevel=3,
        )
    if not output.enable_checkpointing and _has(user, ModelCheckpoint):
        # Lightning refuses this combination; trainkit keeps the user's callback.
        warnings.warn(
            "Trainer(enable_checkpointing=False) only turns off the default ModelCheckpoint: "
            "the ModelCheckpoint in callbacks still saves.",
            stacklevel=3,
        )
    quiet = fast_dev_run or barebones
    built = list(user)
    # Every run watches the loss for NaN, unless a user's callback already does.
    if step_slots(user).nonfinite is None:
        built.append(NonFiniteLoss(nonfinite))
    if step.canonical_precision != "32-true":
        built.append(MixedPrecision(step.canonical_precision, scaler=scaler))
    built += [
        made for slot in ("accumulation", "clipping") if (made := option_callback(slot, step))
    ]
    own_bar = output.enable_progress_bar and not barebones and not _has(user, ProgressBar)
    if own_bar:
        # The Trainer's bar is the one whose log lines carry timing (see TQDMProgressBar).
        built.append(TQDMProgressBar(timing=True))
    if output.enable_model_summary and not barebones and not _has(user, ModelSummary):
        built.append(ModelSummary())
    if not barebones and not _has(user, RunSummary):
        # The summary prints with the Trainer's own bar: a user who passes a bar, or
        # turns it off, has chosen what the console shows (and may add RunSummary()).
        built.append(RunSummary(verbose=own_bar))
    if output.enable_checkpointing and not quiet and not _has(user, Checkpoint):
        # trainkit's own default keeps last.ckpt: ckpt_path="last" resumes any run. Any
        # checkpoint callback of the user's (OnExceptionCheckpoint, a Checkpoint subclass of
        # their own) is their choice of what to save, as in Lightning: no default is added.
        built.append(ModelCheckpoint(save_last=True))
    step_slots(built)  # first: a step callback given twice is named as such
    _check_state_keys(built)
    return _checkpoints_last(built)


def _check_state_keys(callbacks: list[Callback]) -> None:
    # Two stateful callbacks under one state_key would share one checkpoint entry: the
    # last one's state would replace the other's, and a resume would give both the same.
    seen: dict[str, Callback] = {}
    for callback in callbacks:
        method = getattr(callback, "state_dict", None)
        if type(method).__module__ == "unittest.mock":
            continue  # a test's mock callback: it keeps no state
        if not overrides(callback, "state_dict", base=Callback):
            continue
        key = callback_state_key(callback)
        if key in seen:
            raise RuntimeError(
                f"Found more than one stateful callback of type `{type(callback).__name__}` "
                f"(state_key {key!r}): a checkpoint keeps one state per key, so one of them "
                "would be lost on resume. Give each its own settings (its state_key is made "
                "from them), override `state_key` to tell them apart, or keep one."
            )
        seen[key] = callback


def option_callback(slot: str, step: StepOptions) -> Callback | None:
    """The callback the Trainer makes from its step options for ``slot``, if they ask for one.

    Args:
        slot: "accumulation" (``accumulate_grad_batches``) or "clipping"
            (``gradient_clip_val``, ``gradient_clip_algorithm``).
        step: the step options.

    Example:
        >>> option_callback("clipping", StepOptions(gradient_clip_val=0.5)).max_norm
        0.5
        >>> option_callback("accumulation", StepOptions()) is None
        True
    """
    if slot == "accumulation":
        k = step.accumulate_grad_batches
        return GradientAccumulation(k) if k != 1 else None
    value = step.gradient_clip_val
    if not value:  # None and 0 mean no clipping (as in Lightning)
        return None
    if step.gradient_clip_algorithm == "norm":
        return GradientClipping(max_norm=value)
    return GradientClipping(max_value=value)


def swap_callback(callbacks: list[Callback], old: Callback | None, new: Callback | None) -> None:
    """Put ``new`` where ``old`` is in ``callbacks`` (in place); either may be None.

    A new callback without an old one goes before the checkpointing callbacks,
    which run last.

    Args:
        callbacks: the list to change.
        old: the callback to take out (None, or one not in the list: none).
        new: the callback to put in (None: none).
    """
    at = next((i for i, callback in enumerate(callbacks) if callback is old), None)
    if at is not None:
        del callbacks[at]
    else:
        at = next((i for i, c in enumerate(callbacks) if isinstance(c, Checkpoint)), len(callbacks))
    if new is not None:
        callbacks.insert(at, new)


def merge_configured(
    callbacks: list[Callback], configured: Callback | list[Callback] | None
) -> list[Callback]:
    """The Trainer's callbacks with those of ``Module.configure_callbacks()`` merged in.

    A configured callback replaces the Trainer's callbacks of its type;
    checkpointing callbacks (every :class:`Checkpoint`, as in Lightning) stay
    last, so they see what the others logged.

    Args:
        callbacks: the Trainer's callbacks.
        configured: what ``configure_callbacks`` returned (a callback or a list).
    """
    if configured is not None and not isinstance(configured, (list, tuple)):
        configured = [configured]
    if not configured:
        return callbacks
    kinds = {type(callback) for callback in configured}
    kept = [callback for callback in callbacks if type(callback) not in kinds]
    _check_state_keys(kept + list(configured))
    return _checkpoints_last(kept + list(configured))


def _checkpoints_last(callbacks: list[Callback]) -> list[Callback]:
    # Checkpointing callbacks (every Checkpoint) run last, as Lightning documents,
    # so that they see what the others logged; the others keep their order.
    checkpoints = _of_type(callbacks, Checkpoint)
    return [c for c in callbacks if c not in checkpoints] + checkpoints


def step_slots(callbacks: list[Callback]) -> StepSlots:
    """What the callbacks contribute to the training step (each slot filled at most once).

    Args:
        callbacks: the Trainer's callbacks.
    """
    slots = StepSlots()
    for callback in callbacks:
        # Through the class: trainkit's own calls do not show in a callback whose
        # instance attributes wrap its hooks (a hook recorder, as in ported tests).
        base_method(callback, "configure_step")(callback, slots)
    return slots


def last_checkpoint_paths(callbacks: list[Callback], default_root_dir: str) -> list[Path]:
    """Where ``last.ckpt`` lives: each ModelCheckpoint's, else under ``default_root_dir``.

    Each OnExceptionCheckpoint's file is a candidate too (as in Lightning):
    ``ckpt_path="last"`` resumes from the newest of them.

    Args:
        callbacks: the Trainer's callbacks.
        default_root_dir: the Trainer's root folder.
    """
    paths = [
        Path(callback.last_checkpoint_path(default_root_dir))
        for callback in checkpoint_callbacks(callbacks)
    ] or [Path(default_root_dir) / "checkpoints" / "last.ckpt"]
    return paths + [
        Path(callback.ckpt_path) for callback in _of_type(callbacks, OnExceptionCheckpoint)
    ]


def best_checkpoint_path(callbacks: list[Callback], fn: str = "test") -> str:
    """The best checkpoint the first ModelCheckpoint kept (``ckpt_path="best"``).

    Args:
        callbacks: the Trainer's callbacks.
        fn: the entry point asking (``"validate"``, ``"test"``, ``"predict"``), for messages.

    Raises:
        ValueError: there is no ModelCheckpoint, or it has saved nothing yet
            (Lightning's words first).
    """
    found = checkpoint_callbacks(callbacks)
    asked = f'`.{fn}(ckpt_path="best")` is set but `ModelCheckpoint` is not configured'
    if not found:
        raise ValueError(
            f"{asked}. Give the Trainer one (enable_checkpointing=True adds it) and fit, "
            "or pass the path of a checkpoint."
        )
    if len(found) > 1:  # Lightning's words
        rank_zero_warn(
            f'`.{fn}(ckpt_path="best")` is called with Trainer configured with multiple '
            "`ModelCheckpoint` callbacks. It will use the best checkpoint path from first "
            "checkpoint callback."
        )
    if not found[0].best_model_path:
        raise ValueError(
            f"{asked} to save the best model: it has saved no checkpoint in this Trainer's "
            "fit. Fit first, or pass the path of a checkpoint."
        )
    return str(found[0].best_model_path)


def checkpoint_callbacks(callbacks: list[Callback]) -> list[ModelCheckpoint]:
    """The ModelCheckpoint callbacks among ``callbacks`` (``Trainer.checkpoint_callbacks``).

    ModelCheckpoints only, not every :class:`Checkpoint` (Lightning's property
    lists those): the callers read ModelCheckpoint's ``best_model_path`` and
    ``last.ckpt``, which an OnExceptionCheckpoint or a user's Checkpoint lacks.

    Args:
        callbacks: the Trainer's callbacks.

    Returns:
        Each ModelCheckpoint, in order (the first is ``Trainer.checkpoint_callback``).
    """
    return _of_type(callbacks, ModelCheckpoint)


def early_stopping_callbacks(callbacks: list[Callback]) -> list[EarlyStopping]:
    """The EarlyStopping callbacks among ``callbacks`` (``Trainer.early_stopping_callbacks``).

    Args:
        callbacks: the Trainer's callbacks.

    Returns:
        Each EarlyStopping, in order (the first is ``Trainer.early_stopping_callback``).
    """
    return _of_type(callbacks, EarlyStopping)


def progress_bar_callback(callbacks: list[Callback]) -> ProgressBar | None:
    """The progress bar among ``callbacks``, or None (``Trainer.progress_bar_callback``).

    Args:
        callbacks: the Trainer's callbacks.

    Returns:
        The first ProgressBar (TQDMProgressBar, RichProgressBar, a user's own), or None.
    """
    bars = _of_type(callbacks, ProgressBar)
    return bars[0] if bars else None


# The step hooks of trainkit 0.1's first releases, replaced by the step's slots.
_OLD_STEP_HOOKS = (
    "forward_context",
    "scale_loss",
    "should_optimizer_step",
    "prepare_optimizer_step",
    "optimizer_step",
)


def _check_callback(callback: object) -> None:
    # Any object with hooks is a callback, as in Lightning (which calls the hooks an
    # object has); a class, or an object with no hook at all, is a mistake.
    if isinstance(callback, Callback):
        return
    hooks = [name for name in _HOOKS if callable(getattr(callback, name, None))]
    if isinstance(callback, type) or not hooks:
        what = f"the class {callback.__name__}" if isinstance(callback, type) else repr(callback)
        raise TypeError(
            f"callbacks=[...] holds {what}, which is not a callback: pass instances of "
            "trainkit.Callback subclasses (or objects with Callback's hook methods, such as "
            "on_train_epoch_end(trainer, module))."
        )


# The hooks a callback may have (Callback's methods but trainkit's own helpers).
_HOOKS = tuple(
    name
    for name in vars(Callback)
    if name.startswith("on_") or name in ("setup", "teardown", "state_dict", "load_state_dict")
)


def _refuse_old_step_hooks(callback: Callback) -> None:
    # Such a hook would never be called: say so rather than train differently.
    if overrides(callback, "configure_step", Callback):
        return
    found = [name for name in _OLD_STEP_HOOKS if hasattr(type(callback), name)]
    if found:
        raise TypeError(
            f"{type(callback).__name__} defines {', '.join(found)}: step hooks that trainkit "
            "no longer calls. A callback now shapes the training step by filling one of its "
            "slots in configure_step(slots) (precision, clipping, accumulation, nonfinite); "
            "see docs/callbacks.md, 'Writing your own'."
        )


def _has(callbacks: list[Callback], kind: type[Callback]) -> bool:
    return bool(_of_type(callbacks, kind))


CallbackT = TypeVar("CallbackT", bound=Callback)


def _of_type(callbacks: list[Callback], kind: type[CallbackT]) -> list[CallbackT]:
    # The callbacks of one kind (subclasses included), in order.
    return [callback for callback in callbacks if isinstance(callback, kind)]


def is_monitoring(callback: Callback) -> bool:
    """Whether ``callback`` acts on monitored values (checkpointing, early stopping).

    Their ``on_train_epoch_end`` and ``on_*_epoch_end`` hooks run after the
    Module's, so that they see what the Module logged there (as in Lightning);
    every other callback hook runs before the Module's.

    Args:
        callback: a callback of the run.
    """
    # Any object can be a callback: one without the declaration is not monitoring.
    return getattr(callback, "monitors_epoch_end", False) is True

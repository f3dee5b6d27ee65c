"""A run's state to a checkpoint and back: what ``save_checkpoint`` collects and what
``fit(ckpt_path=...)`` restores, from trainkit's files and Lightning's.

Both take the :class:`~trainkit.loops.run.Run` (its module, optimizers,
schedulers, callbacks, loggers, state and results), never the Trainer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from trainkit.checkpoint.callback_state import (
    call_hook,
    callback_state,
    callback_state_key,
    load_callback_state,
)
from trainkit.checkpoint.files import (
    CHECKPOINT_HYPER_PARAMS_KEY,
    CHECKPOINT_HYPER_PARAMS_NAME,
    CHECKPOINT_HYPER_PARAMS_TYPE,
    DATAMODULE_PREFIX,
    FORMAT,
    FORMAT_VERSION,
    LIGHTNING_FORMAT_VERSION,
    LIGHTNING_VERSION_KEY,
    OBJECT_HYPER_PARAMS_KEY,
    CheckpointError,
    first_line,
    is_lightning_checkpoint,
)
from trainkit.checkpoint.lightning_format import (
    PRECISION_KEY,
    batches_to_skip,
    lightning_epoch,
    lightning_loops,
    lightning_progress,
    restore_lightning_state,
    resumed_inside_epoch,
)
from trainkit.checkpoint.resume_check import OPTIONS_KEY, compare, run_settings
from trainkit.checkpoint.weights import (
    hparams_entries,
    load_module_state,
    plain_hparams,
    plain_value,
    restore_datamodule,
    saved_hparams_plain,
)
from trainkit.utilities.seed import capture_rng_states, restore_rng_states
from trainkit.version import __version__

if TYPE_CHECKING:
    from trainkit.loops.run import Run


# ------------------------------------------------------------ a run's state
def collect_state(
    run: Run, weights_only: bool = False, loader_states: list[Any] | None = None
) -> dict[str, Any]:
    """The full training state of ``run``, as a weights-only-safe dict.

    Lightning's keys come first (so ``on_save_checkpoint`` hooks and tools that
    read Lightning checkpoints find them), then trainkit's own.

    Args:
        run: the run (during or after it).
        weights_only: leave out what only resuming training needs (optimizer,
            LR scheduler and callback states, random states, logged metrics), as
            Lightning's ``save_checkpoint(..., weights_only=True)`` does. Such a
            file loads with ``load_from_checkpoint`` but cannot resume ``fit``.
        loader_states: the states of the training loaders that keep their own
            position, saved where Lightning saves them (a mid-epoch resume loads them).

    Returns:
        The checkpoint dict, after the Module's and the callbacks'
        ``on_save_checkpoint`` hooks have seen it.
    """
    module = run.module
    state = run.state
    finished = state.status != "running"
    callback_states = {callback_state_key(cb): callback_state(cb) for cb in run.callbacks}
    checkpoint: dict[str, Any] = {
        # Lightning's layout (a Lightning 2.x tool reads these).
        "epoch": lightning_epoch(state.epoch, state.batch_idx, finished),
        "global_step": state.global_step,
        LIGHTNING_VERSION_KEY: LIGHTNING_FORMAT_VERSION,
        "state_dict": module.state_dict(),
        "loops": lightning_loops(
            state.state_dict(), state.num_training_batches, module.automatic_optimization, finished
        ),
        "callbacks": callback_states,
        "optimizer_states": [optimizer.state_dict() for optimizer in run.optimizers],
        OPTIMIZER_TYPES_KEY: [type(unwrapped_optimizer(o)).__qualname__ for o in run.optimizers],
        "lr_schedulers": [c.scheduler.state_dict() for c in run.lr_scheduler_configs],
        # trainkit's own: what the exact resume needs beyond Lightning's keys.
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "versions": {"trainkit": __version__, "torch": str(torch.__version__)},
        "lineage": state.lineage,
        "loop": state.state_dict(),
        "rng": capture_rng_states(),
        **run.results.state_dict(),
        # Only rank 0 logs: reading a logger's version elsewhere would claim a folder.
        # (A logger whose state is not a dict, a test's Mock(spec=Logger), keeps none.)
        "loggers": [_state_of(logger) for logger in run.loggers] if run.is_global_zero else [],
        "config": None,  # the trainkit command's run config (its callback fills it in)
        OPTIONS_KEY: trainer_options(run),
    }
    # The precision slot's callback holds the float16 scaler, under its own state key.
    precision = run.step_slots.precision
    own = callback_states.get(callback_state_key(precision), {}) if precision is not None else {}
    scaler = own.get("scaler")
    if scaler and not weights_only:
        # Where Lightning keeps the float16 loss scaler's state (its precision plugin's name).
        checkpoint[PRECISION_KEY] = scaler
    if loader_states:
        checkpoint["loops"]["fit_loop"]["state_dict"]["combined_loader"] = loader_states
    if weights_only:
        checkpoint = without_resume_state(checkpoint)
    if module.hparams:
        # "kwargs": the hyperparameters are __init__'s keyword arguments; a Module that
        # saved one config dict records that argument's name (as Lightning does).
        checkpoint[CHECKPOINT_HYPER_PARAMS_NAME] = getattr(module, "_hparams_name", "kwargs")
        _put_hparams_type(checkpoint, "", module)
    _put_hparams(checkpoint, "", module.hparams)
    datamodule = run.datamodule
    if datamodule is not None:
        datamodule_state = datamodule.state_dict()
        if datamodule_state:  # under its class's name, as Lightning keeps it
            checkpoint[type(datamodule).__qualname__] = datamodule_state
        if datamodule.hparams:
            # Lightning's keys for a DataModule's hyperparameters (DataModule.load_from_checkpoint).
            name = getattr(datamodule, "_hparams_name", "kwargs")
            checkpoint[DATAMODULE_PREFIX + CHECKPOINT_HYPER_PARAMS_NAME] = name
            _put_hparams_type(checkpoint, DATAMODULE_PREFIX, datamodule)
            _put_hparams(checkpoint, DATAMODULE_PREFIX, datamodule.hparams)
    # Lightning's order: the callbacks' hooks, then the Module's (which sees what they added).
    if not weights_only:  # as in Lightning, callbacks add nothing to a weights-only file
        for callback in run.callbacks:
            call_hook(callback, "on_save_checkpoint", run.trainer, module, checkpoint)
    module.on_save_checkpoint(checkpoint)
    return checkpoint


#: What a weights-only checkpoint leaves out (see :func:`collect_state`).
_RESUME_ONLY_KEYS = frozenset(
    {
        "callbacks",
        "optimizer_states",
        "lr_schedulers",
        "rng",
        "loggers",
        "optimizer_types",
        PRECISION_KEY,
        "train_metrics",  # the logged metrics (Results.state_dict)
        "callback_metrics",
    }
)


def _put_hparams_type(checkpoint: dict[str, Any], prefix: str, owner: Any) -> None:
    # The type of the one object save_hyperparameters(obj) was given (as Lightning
    # records it), so that load_from_checkpoint passes back a DictConfig or Namespace.
    kind = getattr(owner, "_hparams_type", None)
    if kind is not None:
        checkpoint[prefix + CHECKPOINT_HYPER_PARAMS_TYPE] = kind


def _put_hparams(checkpoint: dict[str, Any], prefix: str, hparams: Mapping[str, Any]) -> None:
    # The values (objects pickled as they are, as Lightning stores them), and how each
    # object was kept (see hparams_entries).
    values, objects = hparams_entries(hparams)
    checkpoint[prefix + CHECKPOINT_HYPER_PARAMS_KEY] = values
    if objects:
        checkpoint[prefix + OBJECT_HYPER_PARAMS_KEY] = objects


def without_resume_state(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """What a weights-only file keeps of ``checkpoint``, as Lightning's does.

    The weights, counters (``epoch``, ``global_step``, ``loops``), hyperparameters
    and DataModule state stay (``load_from_checkpoint`` reads them, and so do tools
    that print a file's epoch); what only resuming ``fit`` reads goes: optimizer,
    LR scheduler, float16 scaler and callback states, random states, logged
    metrics, logger versions.

    Args:
        checkpoint: a full checkpoint dict.
    """
    return {key: value for key, value in checkpoint.items() if key not in _RESUME_ONLY_KEYS}


#: Where a trainkit checkpoint names each optimizer's class (checked on resume).
OPTIMIZER_TYPES_KEY = "optimizer_types"


def restore_state(run: Run, checkpoint: dict[str, Any], source: str) -> None:
    """Put ``run`` back in the state ``checkpoint`` was saved in.

    A trainkit checkpoint resumes exactly (data position, random states, logged
    metrics, loggers). A Lightning checkpoint restores the weights, optimizers,
    LR schedulers, the callbacks whose ``state_key`` matches, the float16
    loss scaler, the DataModule's state and the counters; saved at an epoch's
    end it resumes at the next epoch, saved mid-epoch it continues at the next
    batch of a newly drawn order (with a warning: see :func:`lightning_progress`).

    Args:
        run: the run, set up for fit (module, optimizers, callbacks).
        checkpoint: a loaded checkpoint.
        source: where it came from, for messages.

    Raises:
        CheckpointError: the checkpoint does not fit the model or the optimizers.
    """
    module = run.module
    if not isinstance(checkpoint.get("state_dict"), Mapping):
        raise CheckpointError(
            f"The checkpoint {source} has no 'state_dict' entry (the model's weights), so "
            "nothing can be resumed from it; use a checkpoint written by ModelCheckpoint or "
            "Trainer.save_checkpoint."
        )
    _check_epoch_limit(run, checkpoint, source)
    _check_settings(run, checkpoint, source)
    module.on_load_checkpoint(checkpoint)
    for callback in run.callbacks:
        call_hook(callback, "on_load_checkpoint", run.trainer, module, checkpoint)
    load_module_state(module, checkpoint["state_dict"], source, strict=module.strict_loading)
    if "optimizer_states" not in checkpoint:
        raise CheckpointError(
            f"The checkpoint {source} holds only the model's weights (it was saved with "
            "save_weights_only=True), so training cannot resume from it. Load the weights "
            "with Module.load_from_checkpoint and call fit without ckpt_path, or resume from "
            "a full checkpoint."
        )
    saved_types = checkpoint.get(OPTIMIZER_TYPES_KEY)
    load_each(
        "optimizer",
        run.optimizers,
        checkpoint["optimizer_states"],
        source,
        saved_types if isinstance(saved_types, list) else None,
    )
    schedulers = [config.scheduler for config in run.lr_scheduler_configs]
    load_each("LR scheduler", schedulers, checkpoint.get("lr_schedulers", []), source)
    if is_lightning_checkpoint(checkpoint):
        restore_lightning_state(run, checkpoint, source)
        return
    missing = [key for key in _RESUME_KEYS if key not in checkpoint]
    if missing:
        raise CheckpointError(
            f"The checkpoint {source} has no {' and no '.join(repr(k) for k in missing)} entry "
            f"({', '.join(_RESUME_KEYS[k] for k in missing)}), which resuming needs: it was "
            "written by another tool or edited; resume from a file ModelCheckpoint or "
            "Trainer.save_checkpoint wrote, or load only its weights with "
            "Module.load_from_checkpoint."
        )
    try:
        _restore_trainkit_state(run, checkpoint, source)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
        raise CheckpointError(
            f"The checkpoint {source} cannot be resumed: restoring it failed with "
            f"{type(error).__name__}: {error} (an entry is missing or has another layout than "
            "this trainkit writes); resume from a file this trainkit version wrote."
        ) from error


def resumed_counters(checkpoint: Mapping[str, Any]) -> tuple[int, int]:
    """The epoch and global step a fit resumed from ``checkpoint`` continues at.

    ``(0, 0)`` for a file that does not say: :func:`restore_state` refuses it, saying why.

    Args:
        checkpoint: a loaded checkpoint, trainkit's or Lightning's.

    Example:
        >>> resumed_counters({"loop": {"epoch": 3, "global_step": 30}})
        (3, 30)
    """
    try:
        lightning = is_lightning_checkpoint(checkpoint)
        progress = lightning_progress(checkpoint) if lightning else checkpoint["loop"]
        return int(progress["epoch"]), int(progress["global_step"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return 0, 0


def trainer_options(run: Run) -> dict[str, Any]:
    """The Trainer's hardware, loop and step options as plain values (a checkpoint entry).

    Args:
        run: the run whose options to record.
    """
    options: dict[str, Any] = {}
    for group in (run.hardware, run.options, run.step_options):
        options.update(dataclasses.asdict(group))
    return {key: plain_value(value) for key, value in options.items()}


def _check_epoch_limit(run: Run, checkpoint: dict[str, Any], source: str) -> None:
    # As Lightning: a checkpoint saved in an epoch past max_epochs would train nothing,
    # and the limit is most likely a slip (a file of another, longer run). One saved
    # at the limit (a finished run started again) just trains nothing, with a warning.
    saved = int(checkpoint.get("epoch", 0))  # Lightning's current_epoch, in both formats
    limit = run.options.resolved_max_epochs
    if saved > limit:
        raise CheckpointError(
            f"The checkpoint {source} was saved in epoch {saved}, past this run's "
            f"max_epochs={int(limit)}, so resuming it would train nothing. Raise max_epochs "
            f"above {saved} to train on from it, or fit without ckpt_path to start over."
        )


def _check_settings(run: Run, checkpoint: dict[str, Any], source: str) -> None:
    # Before anything is restored: a refused resume changes nothing (see resume_check.py).
    saved_options = checkpoint.get(OPTIONS_KEY)
    if not isinstance(saved_options, Mapping):
        return  # another tool's file, or an older trainkit's: nothing to compare
    datamodule = run.datamodule
    error, warning = compare(
        run.options.resume_mismatch,
        source,
        run_settings(
            saved_options,
            saved_hparams_plain(checkpoint),
            saved_hparams_plain(checkpoint, DATAMODULE_PREFIX),
        ),
        run_settings(
            trainer_options(run),
            plain_hparams(run.module.hparams),
            plain_hparams(datamodule.hparams) if datamodule is not None else None,
        ),
        has_schedule=bool(checkpoint.get("lr_schedulers")),
    )
    if error:
        raise CheckpointError(error)
    if warning:
        run.warn(warning)


def _holds_state(saved: Any) -> bool:
    # A callback state worth restoring: not {} (a stateless callback's), nor only Nones.
    return isinstance(saved, dict) and any(value is not None for value in saved.values())


#: The entries a trainkit checkpoint needs beyond the weights and optimizers to resume.
_RESUME_KEYS = {"loop": "the loop's progress", "rng": "the random generators' states"}


def _restore_trainkit_state(run: Run, checkpoint: dict[str, Any], source: str) -> None:
    """The part of :func:`restore_state` that reads what only trainkit's files hold."""
    callback_states = checkpoint.get("callbacks", {})
    restored: set[str] = set()
    for callback in run.callbacks:
        key = callback_state_key(callback)
        if key in callback_states:
            load_callback_state(callback, callback_states[key])
            restored.add(key)
    missing = sorted(
        key for key, saved in callback_states.items() if key not in restored and _holds_state(saved)
    )
    if missing:  # Lightning's words first
        run.warn(
            "Be aware that when using `ckpt_path`, callbacks used to create the checkpoint need "
            f"to be provided during `Trainer` instantiation. Please add the following callbacks: "
            f"{missing}. Their state in {source} is not restored (pass callbacks whose "
            "state_key matches: the same class and arguments)."
        )
    state = run.state
    loop_state = checkpoint["loop"]
    # The position is counted in this run's batches, which may hold another
    # number of samples than the saved run's.
    current_samples = state.samples_per_step
    batch_idx = batches_to_skip(loop_state, current_samples, source)
    state.load_state_dict(loop_state)
    state.batch_idx = batch_idx
    resumed_inside_epoch(state, checkpoint)
    state.samples_per_step = current_samples
    state.lineage = checkpoint.get("lineage") or state.lineage
    run.results.load_state_dict(checkpoint)
    for logger, saved in zip(run.loggers, checkpoint.get("loggers", []), strict=False):
        logger.load_state_dict(saved)
    restore_datamodule(run.datamodule, checkpoint)
    restore_rng_states(checkpoint["rng"])


def _state_of(logger: Any) -> dict[str, Any]:
    state = logger.state_dict()
    return state if isinstance(state, dict) else {}


def load_each(
    kind: str,
    targets: list[Any],
    states: list[Any],
    source: str,
    saved_types: list[str] | None = None,
) -> None:
    """``load_state_dict`` into each target, after checking that they fit."""
    if len(states) != len(targets):
        raise CheckpointError(
            f"The checkpoint {source} has {len(states)} {kind} states, but "
            f"configure_optimizers returned {len(targets)} {kind}s."
        )
    for index, (target, state) in enumerate(zip(targets, states, strict=True)):
        name = f"{kind} {index} ({type(unwrapped_optimizer(target)).__name__})"
        if kind == "optimizer":
            saved_type = saved_types[index] if saved_types and index < len(saved_types) else None
            _check_optimizer_state(target, state, name, saved_type, source)
        try:
            target.load_state_dict(state)
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as error:
            raise CheckpointError(
                f"The checkpoint {source} holds a state that {name} cannot load "
                f"({type(error).__name__}: {first_line(error)}): configure_optimizers returns "
                f"another {kind} than the run that saved it did; resume with the same one, or "
                "load only the weights with Module.load_from_checkpoint."
            ) from error


def unwrapped_optimizer(target: Any) -> Any:
    # A strategy may wrap an optimizer (as Lightning's LightningOptimizer does).
    return getattr(target, "optimizer", target) if not hasattr(target, "param_groups") else target


def _check_optimizer_state(
    optimizer: Any, state: Any, name: str, saved_type: str | None, source: str
) -> None:
    """Refuse an optimizer state saved by another kind of optimizer, or for other parameters.

    torch loads such a state without a word and fails at the first step (an
    SGD state in AdamW: ``KeyError: 'step'``), or trains with the wrong state.
    trainkit's files name each optimizer's class (``optimizer_types``); files
    without it are checked for the number of groups and parameters only.
    """
    own_type = type(unwrapped_optimizer(optimizer)).__qualname__
    if saved_type is not None and saved_type != own_type:
        raise CheckpointError(
            f"The checkpoint {source} holds the state of a {saved_type} optimizer, but "
            f"configure_optimizers returns a {own_type} for optimizer {name.split()[1]}; resume "
            f"with the {saved_type} the run was saved with, or load only the weights with "
            "Module.load_from_checkpoint and start a new fit."
        )
    groups = getattr(optimizer, "param_groups", None)
    saved_groups = state.get("param_groups") if isinstance(state, Mapping) else None
    if not isinstance(groups, list) or not isinstance(saved_groups, list):
        return
    if len(groups) != len(saved_groups):
        raise CheckpointError(
            f"The checkpoint {source} holds {len(saved_groups)} parameter groups for {name}, "
            f"which has {len(groups)}: configure_optimizers builds another optimizer than the "
            "run that saved it did; resume with the same one, or load only the weights with "
            "Module.load_from_checkpoint."
        )
    for index, (group, saved) in enumerate(zip(groups, saved_groups, strict=True)):
        count, saved_count = len(group["params"]), len(saved.get("params", []))
        if count != saved_count:
            raise CheckpointError(
                f"The checkpoint {source} holds {saved_count} parameters in group {index} of "
                f"{name}, which has {count}: the model or configure_optimizers differs from the "
                "run that saved it; resume with the same model and optimizer."
            )

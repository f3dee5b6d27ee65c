"""The Trainer's options, grouped in small frozen dataclasses and checked in one place.

``Trainer(max_epochs=..., precision=...)`` keeps Lightning's flat spelling; the
values land in four groups, each a frozen dataclass whose ``__post_init__``
rejects a bad value before anything runs, with a message that names the fix:

- :class:`HardwareOptions`: where the run computes and how reproducibly;
- :class:`LoopOptions`: how long to train, how much data, when to validate and log;
- :class:`StepOptions`: how one optimization step is shaped (precision, clipping,
  accumulation);
- :class:`OutputOptions`: what the run writes and shows.

Every field carries its documentation (``option(default, doc)``). The
``trainkit`` command builds its config schema and its ``--help`` text from these
fields, so the Python API and the command line cannot drift apart. The
Trainer's other arguments (``strategy``, ``callbacks``, ``logger``) are
components, objects rather than values, and are documented on the Trainer.
"""

from __future__ import annotations

import math
import typing
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from typing import Any, TypeVar

from trainkit.utilities.messages import did_you_mean

# When neither max_epochs nor max_steps is given, training stops after this many
# epochs rather than running forever.
DEFAULT_MAX_EPOCHS = 1000

ACCELERATORS = ("auto", "cpu", "cuda", "gpu")

#: What a resume under other hyperparameters or options does (see LoopOptions.resume_mismatch).
RESUME_MISMATCH = ("error", "warn", "ignore")

#: Accepted precision spellings, mapped to the canonical name.
PRECISIONS: dict[str | int, str] = {
    "32-true": "32-true",
    "32": "32-true",
    32: "32-true",
    "bf16-mixed": "bf16-mixed",
    "bf16": "bf16-mixed",
    "16-mixed": "16-mixed",
    "16": "16-mixed",
    16: "16-mixed",
    "bf16-true": "bf16-true",
    "16-true": "16-true",
    "64-true": "64-true",
    "64": "64-true",
    64: "64-true",
}


def option(default: Any, doc: str) -> Any:
    """A dataclass field with its documentation (read by the CLI's schema and ``--help``).

    Args:
        default: the field's default value (immutable).
        doc: one plain-text sentence or two: what the option does, its units and
            special values.
    """
    return field(default=default, metadata={"doc": doc})


def option_docs(options: type) -> dict[str, str]:
    """Field name -> documentation of an options dataclass.

    Args:
        options: one of the option classes of this module.

    Example:
        >>> option_docs(StepOptions)["gradient_clip_algorithm"]
        "'norm' (the total norm) or 'value' (each element)."
    """
    return {f.name: f.metadata.get("doc", "") for f in fields(options)}


OptionsT = TypeVar("OptionsT")


def from_keywords(options: type[OptionsT], given: Mapping[str, Any]) -> OptionsT:
    """An option group built from the Trainer's keywords: its fields, taken by name.

    None given for an option that has no None value means its default, as
    Lightning's ``Optional`` Trainer arguments do (``precision=None`` is
    ``"32-true"``, ``limit_train_batches=None`` is 1.0): a configuration written
    by Lightning, which lists them as ``null``, means the defaults.

    Args:
        options: one of the option classes of this module.
        given: the Trainer's keywords (those of other groups are left alone).

    Example:
        >>> from_keywords(StepOptions, {"precision": 16, "seed": 0}).canonical_precision
        '16-mixed'
        >>> from_keywords(StepOptions, {"precision": None}).canonical_precision
        '32-true'
    """
    taken = {f.name: given[f.name] for f in fields(options) if f.name in given}  # type: ignore[arg-type]
    for name in _without_none(options) & {name for name, value in taken.items() if value is None}:
        del taken[name]
    return options(**taken)


_NO_NONE: dict[type, frozenset[str]] = {}


def _without_none(options: type) -> frozenset[str]:
    # The fields of an option class whose type has no None (looked up once a class).
    names = _NO_NONE.get(options)
    if names is None:
        hints = typing.get_type_hints(options)
        names = frozenset(
            f.name
            for f in fields(options)
            if type(None) not in typing.get_args(hints[f.name]) and hints[f.name] is not type(None)
        )
        _NO_NONE[options] = names
    return names


# ----------------------------------------------------------------- hardware
@dataclass(frozen=True)
class HardwareOptions:
    """Where the run computes, and how reproducibly."""

    accelerator: str = option(
        "auto", "'cpu', 'cuda' (alias 'gpu') or 'auto' (CUDA when available)."
    )
    devices: int | list[int] | str = option(
        "auto",
        "How many devices (or a list of CUDA indices); 'auto' is one, -1 every GPU. As in "
        "Lightning, a string is read as given on a command line: '2' is two devices, "
        "'0,2' (or '2,') a list of indices.",
    )
    process_group_timeout: float = option(
        1800.0,
        "Seconds a collective waits for the other processes before the job fails with an "
        "error instead of hanging (multi-process strategies).",
    )
    seed: int | None = option(
        None,
        "Seed every random generator before anything is built (None: do not seed); an "
        "integer in [0, 2**32 - 1], checked by seed_everything.",
    )
    deterministic: bool = option(
        False, "Make torch use deterministic kernels (and fail on operations that have none)."
    )
    num_nodes: int = option(
        1,
        "Machines in the job; a multi-node job is started by torchrun or SLURM, which tell "
        "each process its place (see docs/multi-node.md).",
    )
    benchmark: bool | None = option(
        None,
        "Set torch.backends.cudnn.benchmark (None: leave it as it is, off when deterministic).",
    )
    sync_batchnorm: bool = option(
        False, "Replace BatchNorm layers by SyncBatchNorm under multi-process strategies."
    )
    use_distributed_sampler: bool = option(
        True,
        "Give the dataloaders a DistributedSampler under data-parallel strategies, which "
        "shuffles the training data when its DataLoader does (False: the dataloaders split "
        "the data themselves).",
    )
    detect_anomaly: bool = option(
        False, "Run fit under torch.autograd.detect_anomaly (slow; finds the op making NaNs)."
    )
    compile: bool | dict[str, Any] = option(
        False,
        "Compile the module's forward with torch.compile once the strategy has wrapped it: "
        "true, or a mapping of torch.compile keyword arguments (e.g. {backend: inductor, "
        "mode: max-autotune, dynamic: true}); see docs/compile.md.",
    )

    def __post_init__(self) -> None:
        compile_options(self.compile)
        named = getattr(self.accelerator, "name", None)
        if not isinstance(self.accelerator, str) and callable(named):
            # An Accelerator object (Lightning's Trainer(accelerator=CUDAAccelerator())).
            object.__setattr__(self, "accelerator", named())
        if self.accelerator not in ACCELERATORS:
            hint = did_you_mean(str(self.accelerator), ACCELERATORS)
            raise ValueError(
                f"Unknown accelerator {self.accelerator!r}; valid accelerators are "
                f"{list(ACCELERATORS)}.{hint}"
            )
        devices = parse_devices(self.devices)
        object.__setattr__(self, "devices", devices)
        if isinstance(devices, list):
            if not devices or not all(_is_int(i) and i >= 0 for i in devices):
                raise ValueError(f"devices={devices!r} must be a non-empty list of device indices.")
        elif _is_int(devices):
            if devices < 1 and devices != -1:
                raise ValueError(f"devices={devices} must be at least 1 (or -1: every GPU).")
        elif devices != "auto":
            raise TypeError(
                f"devices must be 'auto', an int, a list of ints or such a string ('2', "
                f"'0,1'), got {devices!r}."
            )
        _check_int("num_nodes", self.num_nodes, minimum=1, hint="")
        timeout = self.process_group_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(
                f"process_group_timeout={timeout!r} must be a positive number of seconds."
            )

    @property
    def compile_options(self) -> dict[str, Any] | None:
        """``torch.compile``'s keyword arguments for ``compile`` (None: do not compile)."""
        return compile_options(self.compile)


def parse_devices(devices: Any) -> Any:
    """``devices`` in one of its checked forms: "auto", an int or a list of ints.

    As Lightning reads them: a string of a number is that number ("2", "-1"); a
    string with commas lists indices ("0,2", "2,"); a list-like config value (an
    OmegaConf ``ListConfig``) becomes a list. Anything else is returned as given,
    for the caller's check to name.

    Args:
        devices: ``Trainer(devices=...)``.

    Example:
        >>> parse_devices("2"), parse_devices("0, 2"), parse_devices("1,"), parse_devices("auto")
        (2, [0, 2], [1], 'auto')
    """
    if isinstance(devices, str):
        text = devices.strip()
        if "," in text:
            parts = [part.strip() for part in text.split(",") if part.strip()]
            if parts and all(part.isdigit() for part in parts):
                return [int(part) for part in parts]
            return devices
        number = text[1:] if text.startswith("-") else text
        return int(text) if number.isdigit() else devices
    if isinstance(devices, Sequence) and not isinstance(devices, (bytes, bytearray)):
        return list(devices)
    return devices


def compile_options(setting: bool | Mapping[str, Any]) -> dict[str, Any] | None:
    """``torch.compile``'s keyword arguments for a ``compile`` setting (None: no compiling).

    A mapping is checked before anything runs: its keys against ``torch.compile``'s
    signature, its values by ``torch.compile`` itself (which compiles nothing yet).

    Args:
        setting: ``Trainer(compile=...)``: True, False or a dict of keyword arguments.

    Example:
        >>> compile_options(False), compile_options(True)
        (None, {})
    """
    if isinstance(setting, bool):
        return {} if setting else None
    if not isinstance(setting, Mapping):
        raise TypeError(
            f"compile must be True, False or a dict of torch.compile keyword arguments, got "
            f"{setting!r}."
        )
    import inspect

    import torch

    valid = [name for name in inspect.signature(torch.compile).parameters if name != "model"]
    for key in setting:
        if key not in valid:
            raise ValueError(
                f"compile={dict(setting)!r}: {key!r} is not a torch.compile keyword argument."
                f"{did_you_mean(str(key), valid)} Valid keys: {', '.join(valid)}."
            )
    try:
        torch.compile(_nothing, **setting)
    except Exception as error:  # torch's own check of the values (backend, mode, ...)
        raise ValueError(
            f"compile={dict(setting)!r} is refused by torch.compile: {error} (see "
            "torch.compile's documentation for the values each keyword takes)."
        ) from None
    return dict(setting)


def _nothing() -> None:
    return None


# --------------------------------------------------------------------- loop
@dataclass(frozen=True)
class LoopOptions:
    """How long to train, how much data to use, and when to validate and log."""

    max_epochs: int | None = option(
        None,
        "Stop after this many epochs (-1: no limit; None: no limit when max_steps is set, "
        "else 1000).",
    )
    min_epochs: int | None = option(
        None, "Train at least this many epochs, even if a callback asks to stop earlier."
    )
    max_steps: int = option(-1, "Stop after this many optimizer steps (-1: no limit).")
    min_steps: int | None = option(
        None, "Train at least this many optimizer steps, even if a callback asks to stop."
    )
    max_time: str | dict[str, int] | None = option(
        None,
        "Stop after this much training time: 'DD:HH:MM:SS', or a dict such as "
        "{'hours': 1, 'minutes': 30} (a datetime.timedelta works from Python).",
    )
    overfit_batches: int | float = option(
        0.0,
        "Train (and validate) on only this many batches (int) or this fraction (float) of the "
        "training data, unshuffled, to check that the model can overfit them (0: off).",
    )
    limit_train_batches: int | float = option(
        1.0, "Batches per training epoch: an int, or a float fraction of the dataloader."
    )
    limit_val_batches: int | float = option(
        1.0, "Likewise for each validation dataloader (0 disables validation)."
    )
    limit_test_batches: int | float = option(1.0, "Likewise for each test dataloader.")
    limit_predict_batches: int | float = option(1.0, "Likewise for each prediction dataloader.")
    val_check_interval: int | float = option(
        1.0,
        "Validate every this many training batches (int), or this fraction of an epoch "
        "(float; 1.0 validates at the end of each epoch, 0.0 after every batch).",
    )
    check_val_every_n_epoch: int | None = option(
        1, "Validate in every n-th epoch (None: count an int val_check_interval across epochs)."
    )
    num_sanity_val_steps: int = option(
        2, "Validation batches run before training to catch bugs early (-1: all, 0: none)."
    )
    log_every_n_steps: int = option(
        50, "Write step metrics to the loggers every n optimizer steps."
    )
    fast_dev_run: bool | int = option(
        False,
        "Run n batches (True: 1) of each stage, one epoch, with no logging or checkpoints, to "
        "catch bugs fast.",
    )
    reload_dataloaders_every_n_epochs: int = option(
        0, "Ask the Module or DataModule for new dataloaders every n epochs (0: never)."
    )
    inference_mode: bool = option(
        True,
        "Validate, test and predict under torch.inference_mode (False: torch.no_grad, for "
        "code that needs ordinary tensors out of evaluation). Validation inside fit always "
        "runs under torch.no_grad, as in Lightning.",
    )
    resume_mismatch: str | None = option(
        None,
        "What fit(ckpt_path=...) does when the checkpoint was saved with other hyperparameters "
        "or Trainer options that change what the run computes: 'error' refuses, 'warn' names "
        "the keys and resumes, 'ignore' resumes silently. None: 'warn' from Python (ported "
        "Lightning code resumes under new settings on purpose), 'error' from the trainkit "
        "command (--force-resume: 'warn').",
    )

    def __post_init__(self) -> None:
        if self.resume_mismatch is not None and self.resume_mismatch not in RESUME_MISMATCH:
            choices = ", ".join(map(repr, RESUME_MISMATCH))
            raise ValueError(
                f"resume_mismatch={self.resume_mismatch!r} must be one of {choices}."
                + did_you_mean(str(self.resume_mismatch), RESUME_MISMATCH)
            )
        if self.max_epochs is not None:
            _check_int("max_epochs", self.max_epochs, minimum=-1, hint="(-1 for no limit)")
        _check_int("max_steps", self.max_steps, minimum=-1, hint="(-1 for no limit)")
        for name in ("min_epochs", "min_steps"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), minimum=0, hint="or None")
        max_time_seconds(self.max_time)
        for name in ("overfit_batches", *_LIMITS):
            value = getattr(self, name)
            if isinstance(value, float) and value > 1 and value.is_integer():
                object.__setattr__(self, name, int(value))  # a count, as Lightning reads 2.0
        _check_limit("overfit_batches", self.overfit_batches)
        _check_int(
            "reload_dataloaders_every_n_epochs",
            self.reload_dataloaders_every_n_epochs,
            minimum=0,
            hint="(0: never)",
        )
        for name in _LIMITS:
            _check_limit(name, getattr(self, name))
        interval = self.val_check_interval
        if isinstance(interval, bool) or not isinstance(interval, (int, float)):
            raise TypeError(f"val_check_interval must be an int or a float, got {interval!r}.")
        # 0 is accepted here, as in Lightning: a fit that trains no batch (max_steps=0)
        # never reads it; one that validates while training refuses it (loops/schedule.py).
        if isinstance(interval, int) and interval < 0:
            raise ValueError(
                f"val_check_interval={interval} must be a positive number of batches, or a "
                "float fraction of an epoch in [0, 1]."
            )
        if isinstance(interval, float) and not 0.0 <= interval <= 1.0:
            raise ValueError(
                f"val_check_interval={interval} must be a fraction in [0, 1] (or an int "
                "number of batches; 0.0 validates after every batch)."
            )
        if self.check_val_every_n_epoch is not None:
            _check_int(
                "check_val_every_n_epoch", self.check_val_every_n_epoch, minimum=1, hint="or None"
            )
        elif isinstance(interval, float):
            # As Lightning: with no epoch to be a fraction of, the interval counts batches.
            raise ValueError(
                f"val_check_interval={interval} is a fraction of an epoch, but "
                "check_val_every_n_epoch=None counts the interval in training batches across "
                "epochs: pass an int number of batches (e.g. val_check_interval=1000), or set "
                "check_val_every_n_epoch to validate by epoch."
            )
        _check_int(
            "num_sanity_val_steps",
            self.num_sanity_val_steps,
            minimum=-1,
            hint="(-1 for all validation batches)",
        )
        _check_int("log_every_n_steps", self.log_every_n_steps, minimum=1, hint="")
        run = self.fast_dev_run
        if not isinstance(run, bool) and (not isinstance(run, int) or run < 0):
            raise ValueError(
                f"fast_dev_run must be a bool or a non-negative number of batches, got {run!r}."
            )

    @property
    def fast_dev_run_batches(self) -> int:
        """Batches per stage of a fast dev run (0: not one)."""
        return int(self.fast_dev_run)

    @property
    def resolved_max_epochs(self) -> float:
        """The epoch limit in force (``inf`` when only ``max_steps`` or ``max_time`` limits).

        Example:
            >>> LoopOptions(max_epochs=-1).resolved_max_epochs
            inf
        """
        if self.max_epochs is not None:
            return math.inf if self.max_epochs == -1 else float(self.max_epochs)
        if self.max_steps != -1 or self.max_time is not None:
            return math.inf
        return float(DEFAULT_MAX_EPOCHS)

    @property
    def max_time_seconds(self) -> float:
        """The ``max_time`` limit in seconds (``inf``: none)."""
        return max_time_seconds(self.max_time)

    def estimated_steps(self, batches: float, steps_in_epoch: Callable[[float, int], float]) -> int:
        """Optimizer steps a whole fit takes: each epoch's steps, capped by ``max_steps``.

        Args:
            batches: batches per epoch (``inf`` when the dataloader has no length).
            steps_in_epoch: optimizer steps an epoch of so many batches takes (the
                epoch is passed too: gradient accumulation may change with it).

        Example:
            >>> LoopOptions(max_epochs=3).estimated_steps(10, lambda batches, epoch: batches)
            30
        """
        epochs = self.resolved_max_epochs
        if batches == math.inf or epochs == math.inf:
            if self.max_steps == -1:
                raise RuntimeError(
                    "The number of optimizer steps is unknown (the training dataloader has no "
                    "length, or max_epochs is unlimited); set max_steps."
                )
            return self.max_steps
        total = sum(int(steps_in_epoch(batches, epoch)) for epoch in range(int(epochs)))
        return total if self.max_steps == -1 else min(total, self.max_steps)

    def resolved(self) -> LoopOptions:
        """These options as the loop runs them: a fast dev run cuts every stage short.

        Example:
            >>> LoopOptions(fast_dev_run=True).resolved().max_steps
            1
        """
        batches = self.fast_dev_run_batches
        if not batches:
            overfit = self.overfit_batches
            if overfit == 0:
                return self
            # Train on the same few batches, and validate on them too.
            return replace(self, limit_train_batches=overfit, limit_val_batches=overfit)
        return replace(
            self,
            max_epochs=1,
            max_steps=batches,
            limit_train_batches=batches,
            limit_val_batches=batches,
            limit_test_batches=batches,
            limit_predict_batches=batches,
            val_check_interval=1.0,
            check_val_every_n_epoch=1,
            num_sanity_val_steps=0,
            log_every_n_steps=1,
        )


# --------------------------------------------------------------------- step
@dataclass(frozen=True)
class StepOptions:
    """How one optimization step is shaped. Each is shorthand for a step callback."""

    precision: str | int = option(
        "32-true",
        "Numeric precision: '32-true' (float32), 'bf16-mixed', '16-mixed' (with a gradient "
        "scaler), 'bf16-true' or '16-true' (the model cast to bfloat16 or float16) or "
        "'64-true' (the model and each batch's floating tensors in float64). Shorthand for "
        "MixedPrecision.",
    )
    gradient_clip_val: float | None = option(
        None,
        "Clip gradients to this threshold (None or 0: no clipping). Shorthand for "
        "GradientClipping.",
    )
    gradient_clip_algorithm: str = option(
        "norm", "'norm' (the total norm) or 'value' (each element)."
    )
    accumulate_grad_batches: int | dict[int, int] = option(
        1,
        "Step the optimizer every n batches, or a schedule {first_epoch: n}. Shorthand for "
        "GradientAccumulation.",
    )

    def __post_init__(self) -> None:
        canonical_precision(self.precision)
        clip = self.gradient_clip_val
        if clip is not None and (
            isinstance(clip, bool) or not isinstance(clip, (int, float)) or not clip >= 0
        ):
            raise ValueError(
                f"gradient_clip_val={clip!r} must be a positive number, or None or 0 for no "
                "clipping."
            )
        if self.gradient_clip_algorithm not in ("norm", "value"):
            raise ValueError(
                f"gradient_clip_algorithm={self.gradient_clip_algorithm!r} must be 'norm' or "
                "'value'."
            )
        accumulation_schedule(self.accumulate_grad_batches)

    @property
    def canonical_precision(self) -> str:
        """The precision's canonical name (e.g. "bf16-mixed" for "bf16")."""
        return canonical_precision(self.precision)


def canonical_precision(precision: str | int) -> str:
    """The canonical name of a precision setting, or a clear error.

    Args:
        precision: e.g. "bf16-mixed", "16-mixed", "bf16-true", "16-true", "32-true",
            "64-true" (or 16, 32, 64, "bf16").

    Example:
        >>> canonical_precision(16)
        '16-mixed'
    """
    try:
        return PRECISIONS[precision]
    except (KeyError, TypeError):
        raise ValueError(
            f"precision={precision!r} is not supported; use one of '32-true', 'bf16-mixed', "
            "'16-mixed', 'bf16-true', '16-true' or '64-true'."
        ) from None


def max_time_seconds(max_time: Any) -> float:
    """Seconds in a ``max_time`` setting (``inf`` for None), or a clear error.

    Args:
        max_time: None, "DD:HH:MM:SS", a dict of ``datetime.timedelta`` keywords, or a
            ``timedelta``.

    Example:
        >>> max_time_seconds("00:01:30:00"), max_time_seconds({"minutes": 2})
        (5400.0, 120.0)
    """
    if max_time is None:
        return math.inf
    if isinstance(max_time, timedelta):
        seconds = max_time.total_seconds()
    elif isinstance(max_time, Mapping):
        try:
            seconds = timedelta(**max_time).total_seconds()
        except TypeError as error:
            raise ValueError(
                f"max_time={dict(max_time)!r} is not a duration ({error}); use keys such as "
                "'days', 'hours', 'minutes', 'seconds'."
            ) from None
    elif isinstance(max_time, str):
        parts = max_time.split(":")
        if len(parts) != 4 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(
                f"max_time={max_time!r} must read 'DD:HH:MM:SS', e.g. '00:12:00:00' for 12 hours."
            )
        days, hours, minutes, secs = (int(p) for p in parts)
        seconds = timedelta(days=days, hours=hours, minutes=minutes, seconds=secs).total_seconds()
    else:
        raise TypeError(
            f"max_time must be 'DD:HH:MM:SS', a dict or a datetime.timedelta, got {max_time!r}."
        )
    if seconds <= 0:
        raise ValueError(f"max_time={max_time!r} must be a positive duration.")
    return seconds


def accumulation_schedule(accumulate_grad_batches: int | Mapping[int, int]) -> dict[int, int]:
    """``{first_epoch: k}`` from an accumulation setting, checked, sorted by epoch.

    Args:
        accumulate_grad_batches: k, or a schedule ``{first_epoch: k, ...}``.

    Example:
        >>> accumulation_schedule({4: 2, 0: 8})
        {0: 8, 4: 2}
    """
    schedule = (
        dict(accumulate_grad_batches)
        if isinstance(accumulate_grad_batches, Mapping)
        else {0: accumulate_grad_batches}
    )
    if 0 not in schedule:
        raise ValueError(
            f"The accumulation schedule {accumulate_grad_batches!r} must say what to do "
            "from epoch 0; add a 0 key, e.g. {0: 1, 5: 4}."
        )
    for epoch, k in schedule.items():
        if not _is_int(k) or k < 1 or not _is_int(epoch) or epoch < 0:
            raise ValueError(
                "accumulate_grad_batches must be a positive int (or epoch -> positive int); "
                f"got {accumulate_grad_batches!r}."
            )
    return dict(sorted(schedule.items()))


# ------------------------------------------------------------------- output
@dataclass(frozen=True)
class OutputOptions:
    """What the run writes and shows."""

    default_root_dir: str | None = option(
        None, "Where logs and checkpoints go (None: the working directory)."
    )
    enable_progress_bar: bool = option(
        True, "Show a progress bar (TQDMProgressBar) unless one is among the callbacks."
    )
    enable_model_summary: bool = option(True, "Print a parameter table when fit starts.")
    enable_checkpointing: bool = option(
        True,
        "Add a ModelCheckpoint keeping the newest epoch's file and last.ckpt (in the run's "
        "<log_dir>/checkpoints, or <default_root_dir>/checkpoints without a logger) unless "
        "a checkpoint callback (a ModelCheckpoint, an OnExceptionCheckpoint, any Checkpoint) "
        "is among the callbacks.",
    )
    barebones: bool = option(
        False,
        "Only train: no progress bar, model summary, checkpointing, loggers or sanity check, "
        "whatever the enable_* options, logger and num_sanity_val_steps say (for measuring "
        "raw speed).",
    )
    enable_autolog_hparams: bool = option(
        True,
        "Write the hyperparameters the Module and DataModule saved (save_hyperparameters) "
        "and the model (log_graph) to the loggers when fit, validate, test and predict start.",
    )
    model_registry: str | None = option(
        None,
        "Lightning's model hub name (its checkpoints upload there); accepted so that "
        "Lightning configs run, unused: trainkit uploads nothing, and a name given warns.",
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int(name: str, value: object, *, minimum: int, hint: str) -> None:
    if not _is_int(value):
        raise TypeError(f"{name} must be an integer, got {value!r}.")
    if value < minimum:  # type: ignore[operator]
        raise ValueError(
            f"{name}={value} is invalid: it must be >= {minimum} {hint}".rstrip() + "."
        )


_LIMITS = (
    "limit_train_batches",
    "limit_val_batches",
    "limit_test_batches",
    "limit_predict_batches",
)


def _check_limit(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be an int (batches) or a float (fraction), got {value!r}.")
    if isinstance(value, int) and value < 0:
        raise ValueError(f"{name}={value} must be >= 0 (0 skips the stage).")
    if isinstance(value, float) and not 0.0 <= value <= 1.0:
        raise ValueError(
            f"{name}={value} is a fraction and must be in [0.0, 1.0]; pass an int (or a "
            "whole float above 1) for a number of batches."
        )


# ------------------------------------------------------------------ the trainer section
#: The Trainer's option groups, in order: heading -> options dataclass.
OPTION_GROUPS: dict[str, type] = {
    "hardware options": HardwareOptions,
    "loop options": LoopOptions,
    "step options": StepOptions,
    "output options": OutputOptions,
}

COMPONENTS_HEADING = "components"

#: The Trainer's components (objects rather than values) and how a config gives them.
COMPONENT_DOCS: dict[str, str] = {
    "strategy": (
        "How the processes and devices share the work: 'auto' (single_device on one "
        "device, ddp on several), 'single_device', 'ddp', 'ddp_spawn', 'dp', 'hybrid' or "
        "'fsdp'; or a class_path + init_args entry for a strategy with arguments (e.g. "
        "trainkit.strategies.ddp.DDPStrategy with init_method, rank and world_size)."
    ),
    "callbacks": (
        "Callbacks, a list of class_path + init_args entries; each hook calls them in "
        "this order (docs/architecture.md gives the order against the Module's hooks)."
    ),
    "logger": (
        "true (or null, as in Lightning) for a TensorBoard logger under default_root_dir, "
        "false for none, or a class_path + init_args entry or a list of them."
    ),
    "profiler": (
        "Time every hook, step and batch fetch, and print the report when the run ends: "
        "'simple', 'advanced' (cProfile) or 'pytorch' (torch.profiler); null: no profiling."
    ),
    "plugins": (
        "Lightning's plugins argument: null, an empty list, or plugins asking for what "
        "trainkit does: cluster environments (e.g. SLURMEnvironment(auto_requeue=false)), "
        "precision plugins (as precision=), TorchSyncBatchNorm (as sync_batchnorm=true), "
        "TorchCheckpointIO. Any other plugin is refused, naming the option to use."
    ),
}

# Where trainkit takes what a Lightning plugin would set, by the end of its class name.
_PLUGIN_KINDS = (
    (
        "Environment",
        "trainkit reads the job's ranks and master address from torchrun's or SLURM's "
        "variables itself, and on SIGTERM or SIGUSR1 saves last.ckpt and stops (requeue "
        "with sbatch --requeue; docs/fault-tolerance.md)",
    ),
    ("Precision", "pass Trainer(precision=...) instead"),
    ("CheckpointIO", "trainkit writes its own checked checkpoint files (docs/checkpointing.md)"),
    ("SyncBatchNorm", "pass Trainer(sync_batchnorm=True) instead"),
    ("LayerSync", "pass Trainer(sync_batchnorm=True) instead"),
)


def take_model_registry(model_registry: str | None) -> None:
    """Lightning's ``model_registry`` (the model hub that checkpoints upload to): unused.

    Accepted so that a Lightning configuration (a saved ``config.yaml`` lists it)
    runs unchanged; a name given says that nothing is uploaded.

    Args:
        model_registry: the Trainer's ``model_registry``.
    """
    if model_registry is not None:
        warnings.warn(
            f"Trainer(model_registry={model_registry!r}) is ignored: trainkit uploads no "
            "checkpoint to Lightning's model registry; they stay where ModelCheckpoint saves "
            "them. Remove model_registry to silence this warning.",
            UserWarning,
            stacklevel=3,
        )


def take_plugins(
    plugins: Any, precision: str | int | None, sync_batchnorm: bool
) -> tuple[str | int | None, bool, Any]:
    """What Lightning plugins set, as trainkit options; refuse the others, saying why.

    The plugins of ``trainkit.lightning.plugins`` that ask for what trainkit does are
    taken: cluster environments (nothing to set), precision plugins (their precision
    and a float16 plugin's ``GradScaler``), ``TorchSyncBatchNorm`` (``sync_batchnorm``)
    and ``TorchCheckpointIO``.

    Args:
        plugins: the Trainer's ``plugins``: None or an empty list set nothing.
        precision: the Trainer's ``precision`` (None: the default).
        sync_batchnorm: the Trainer's ``sync_batchnorm``.

    Returns:
        ``(precision, sync_batchnorm, scaler)``: the scaler a precision plugin gives, or None.

    Raises:
        ValueError: naming each plugin refused and where trainkit takes what it sets,
            or a precision given both ways.

    Example:
        >>> take_plugins([], "bf16-mixed", False)
        ('bf16-mixed', False, None)
        >>> try:
        ...     take_plugins(["bf16-mixed"], "32-true", False)
        ... except ValueError as error:
        ...     print(str(error).split(" (")[0])
        Trainer(plugins=...) is not supported: 'bf16-mixed'
    """
    if plugins is None:
        plugins = []
    given = list(plugins) if isinstance(plugins, (list, tuple)) else [plugins]
    reasons: list[str] = []
    settings: dict[str, Any] = {}
    for plugin in given:
        refusal = getattr(plugin, "trainkit_plugin_refusal", None)
        if callable(refusal):  # a plugin asking for what trainkit does is accepted
            if (reason := refusal()) is not None:
                reasons.append(f"{type(plugin).__name__}({reason})")
                continue
            settings_of = getattr(plugin, "trainkit_plugin_settings", dict)
            for key, value in settings_of().items():
                if key in settings and key != "scaler":
                    raise ValueError(
                        f"Trainer(plugins=...) sets {key} twice ({settings[key]!r} and "
                        f"{value!r}); pass one plugin for it."
                    )
                settings[key] = value
            continue
        if isinstance(plugin, str):
            reasons.append(
                f"{plugin!r} (a string: pass it to the option it sets, e.g. Trainer(precision=...))"
            )
            continue
        name = type(plugin).__name__
        why = next((text for end, text in _PLUGIN_KINDS if name.endswith(end)), None)
        reasons.append(f"{name} ({why or 'no trainkit counterpart'})")
    if reasons:
        raise ValueError(
            f"Trainer(plugins=...) is not supported: {'; '.join(reasons)}. Drop those "
            "plugins (or change them as said)."
        )
    if "precision" in settings:
        if precision is not None and canonical_precision(precision) != "32-true":
            raise ValueError(
                f"Received both precision={precision!r} and a precision plugin "
                f"({settings['precision']!r}); choose one."
            )
        precision = settings["precision"]
    return (
        precision,
        sync_batchnorm or settings.get("sync_batchnorm", False),
        settings.get("scaler"),
    )


def trainer_groups() -> dict[str, list[str]]:
    """The Trainer's keywords by group heading, in order: the option groups, then components.

    Example:
        >>> trainer_groups()["components"]
        ['strategy', 'callbacks', 'logger', 'profiler', 'plugins']
    """
    groups = {heading: [f.name for f in fields(kind)] for heading, kind in OPTION_GROUPS.items()}
    groups[COMPONENTS_HEADING] = list(COMPONENT_DOCS)
    return groups


def trainer_docs() -> dict[str, str]:
    """Every Trainer keyword -> its documentation (the ``--help`` text of ``trainer.NAME``).

    The text comes from the option fields and :data:`COMPONENT_DOCS`, never from a
    docstring, so editing a docstring never changes the command line.

    Example:
        >>> trainer_docs()["max_epochs"].split(" (")[0]
        'Stop after this many epochs'
    """
    docs: dict[str, str] = {}
    for kind in OPTION_GROUPS.values():
        docs.update(option_docs(kind))
    docs.update(COMPONENT_DOCS)
    return docs

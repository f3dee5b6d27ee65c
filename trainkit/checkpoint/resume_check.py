"""Does a checkpoint continue this run? What ``fit(ckpt_path=...)`` compares before resuming.

Every checkpoint trainkit writes records the Trainer options that shape the run
(``trainer_options``) beside the Module's and DataModule's hyperparameters. A
resume compares them with the current run, the way the ``trainkit`` command
compares its whole config (one classification for both:
:func:`resume_differences`): where the run computes, prints and
logs never matters; the run's length matters only when an LR scheduler was built
for the saved length; anything else (hyperparameters, precision, accumulation,
clipping, the seed, ...) means the resumed run would not continue the saved one.
``Trainer(resume_mismatch=...)`` says what then happens: ``"warn"`` (the Python
API's default: names the keys and resumes, as ported code that resumes with new
settings expects), ``"error"`` (refuses; the ``trainkit`` command's default),
``"ignore"``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: The checkpoint entry holding the Trainer options of the run that saved it.
OPTIONS_KEY = "trainer_options"


def run_settings(options: Any, hparams: Any, datamodule_hparams: Any) -> dict[str, Any]:
    """One run's settings in the layout of the ``trainkit`` command's config.

    Args:
        options: the Trainer's options as plain values (the ``trainer_options`` entry).
        hparams: the Module's hyperparameters as plain values.
        datamodule_hparams: the DataModule's, if any.

    Example:
        >>> run_settings({"seed": 0}, {"lr": 0.1}, None)
        {'trainer': {'seed': 0}, 'model': {'init_args': {'lr': 0.1}}}
    """
    run: dict[str, Any] = {"trainer": _comparable(options)}
    if isinstance(hparams, Mapping) and hparams:
        run["model"] = {"init_args": _comparable(hparams)}
    if isinstance(datamodule_hparams, Mapping) and datamodule_hparams:
        run["data"] = {"init_args": _comparable(datamodule_hparams)}
    return run


#: How a plain value stands for an object it could not hold (``<... at 0x7f...>``).
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")


def _comparable(values: Any) -> dict[str, Any]:
    # An object stored as its repr (a function, a module) names its memory address,
    # which differs in every process: such a value cannot be compared.
    if not isinstance(values, Mapping):
        return {}
    return {
        key: value
        for key, value in values.items()
        if not (isinstance(value, str) and _ADDRESS.search(value))
    }


def compare(
    mode: str | None,
    source: str,
    saved: dict[str, Any],
    current: dict[str, Any],
    has_schedule: bool,
) -> tuple[str | None, str | None]:
    """What a resume under ``current`` settings of a run saved under ``saved`` must say.

    Args:
        mode: ``Trainer(resume_mismatch=...)``: ``"error"``, ``"warn"`` or ``"ignore"``
            (None: ``"warn"``, the Python API's default).
        source: the checkpoint's path, for the message.
        saved: the saved run's settings (:func:`run_settings`).
        current: this run's.
        has_schedule: whether the checkpoint holds LR scheduler states.

    Returns:
        ``(error, warning)``: the message to raise, or to warn with; both None
        when the resume continues the saved run (or ``mode`` is ``"ignore"``).

    Example:
        >>> error, _ = compare(
        ...     "error", "a.ckpt", {"trainer": {"seed": 0}}, {"trainer": {"seed": 1}}, False
        ... )
        >>> "trainer.seed: 0 -> 1" in error
        True
    """
    if mode == "ignore":
        return None, None
    # Options this trainkit has and the saving one had not are not differences.
    trainer = {k: v for k, v in current.get("trainer", {}).items() if k in saved.get("trainer", {})}
    blocking, _ = resume_differences(saved, {**current, "trainer": trainer}, has_schedule)
    if not blocking:
        return None, None
    listed = "; ".join(blocking)
    if mode == "error":
        return (
            f"The checkpoint {source} was saved with other settings, and resuming would not "
            f"continue that run: {listed}. Resume with the saved values, or pass "
            "Trainer(resume_mismatch='warn') to resume anyway.",
            None,
        )
    return None, (
        f"Resuming {source}, saved with other settings that change what the run computes: "
        f"{listed}. (Trainer(resume_mismatch='error') refuses such a resume; 'ignore' "
        "silences this.)"
    )


#: Keys whose change never alters what training computes: where it runs, what it
#: prints, how often it validates, whether the forward is compiled. A resume with
#: other values only lists them.
_RESUME_HARMLESS = frozenset(
    {
        "trainer.accelerator",
        "trainer.devices",
        "trainer.num_nodes",
        "trainer.strategy",
        "trainer.process_group_timeout",
        "trainer.benchmark",
        "trainer.detect_anomaly",
        "trainer.compile",
        "trainer.inference_mode",
        "trainer.resume_mismatch",
        "trainer.limit_val_batches",
        "trainer.limit_test_batches",
        "trainer.limit_predict_batches",
        "trainer.val_check_interval",
        "trainer.check_val_every_n_epoch",
        "trainer.num_sanity_val_steps",
        "trainer.log_every_n_steps",
        "trainer.default_root_dir",
        "trainer.enable_progress_bar",
        "trainer.enable_model_summary",
        "trainer.enable_checkpointing",
        "trainer.callbacks",
        "trainer.logger",
        "data.init_args.num_workers",
        "data.init_args.pin_memory",
        "data.init_args.persistent_workers",
        "data.init_args.prefetch_factor",
        "data.init_args.data_dir",
    }
)
#: Keys that set how long training runs. Changing them is how a run is trained
#: longer, unless an LR schedule was built for the saved length (then it breaks).
_RESUME_LENGTH = frozenset(
    {
        "trainer.max_epochs",
        "trainer.min_epochs",
        "trainer.max_steps",
        "trainer.min_steps",
        "trainer.max_time",
        "trainer.limit_train_batches",
    }
)


def resume_differences(
    saved: dict[str, Any], current: dict[str, Any], has_schedule: bool
) -> tuple[list[str], list[str]]:
    """How the config stored in a checkpoint differs from the current one.

    Every other key (the model's and data's arguments, precision, accumulation,
    clipping, the seed, ...) changes shapes, the optimization or the step
    counts, so the resumed run would not continue the saved one: it blocks the
    resume. The run's length (``max_epochs``, ``max_steps``, ...) blocks it only
    when the checkpoint holds an LR scheduler, whose schedule was built for the
    saved length; without one, a longer run is what a user resumes for.
    Where and how the run prints, logs and validates never blocks.

    Args:
        saved: the checkpoint's ``config`` entry (what the ``trainkit`` command stored).
        current: this run's config, as plain containers.
        has_schedule: whether the checkpoint holds LR scheduler states.

    Returns:
        The blocking and the other differences, each as ``"key: saved -> current"``.

    Example:
        >>> resume_differences(
        ...     {"trainer": {"max_epochs": 1, "seed": 0}},
        ...     {"trainer": {"max_epochs": 3, "seed": 1}},
        ...     has_schedule=False,
        ... )
        (['trainer.seed: 0 -> 1'], ['trainer.max_epochs: 1 -> 3'])
    """
    blocking: list[str] = []
    other: list[str] = []
    old, new = _flatten(saved), _flatten(current)
    for key in sorted(set(old) | set(new)):
        if key == "ckpt_path":
            continue  # which checkpoint to resume is not part of the run
        missing = "(not set)"
        before, after = old.get(key, missing), new.get(key, missing)
        if before == after:
            continue
        line = f"{key}: {_short(before)} -> {_short(after)}"
        # compile's mapping flattens to trainer.compile.<keyword>: how, not what, it computes.
        harmless = key in _RESUME_HARMLESS or key.startswith(
            ("trainer.strategy.", "trainer.compile.")
        )
        if harmless or (key in _RESUME_LENGTH and not has_schedule):
            other.append(line)
        else:
            blocking.append(line)
    return blocking, other


def _flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    # Nested mappings as dotted keys; lists (callbacks, loggers) stay whole values.
    if not isinstance(config, dict):
        return {prefix: config}
    flat: dict[str, Any] = {}
    for key, value in config.items():
        flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def _short(value: Any, limit: int = 60) -> str:
    text = value if value == "(not set)" else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

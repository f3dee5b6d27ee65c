"""Does a checkpoint continue this run? What ``fit(ckpt_path=...)`` compares before resuming.

Every checkpoint trainkit writes records the Trainer options that shape the run
(``trainer_options``) beside the Module's and DataModule's hyperparameters. A
resume compares them with the current run, the way the ``trainkit`` command
compares its whole config (one classification for both:
:func:`trainkit.cli.config.resume_differences`): where the run computes, prints and
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
    from trainkit.cli.config import resume_differences

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

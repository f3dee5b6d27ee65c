"""What the ``trainkit`` command checks before it builds anything, and which errors are the user's.

:func:`check_parsed` goes through a config the engine has parsed (every key,
type, class and ``init_args`` checked there) the way the run would, without
building a Module, a DataModule or a Trainer and without touching data: the
trainer options (ranges, the strategy name, whether the accelerator exists) and
where each stage's dataloader would come from; :func:`check_ckpt_path` checks
the checkpoint file.

:func:`user_error` draws the line the command prints by: an error trainkit
detects in what the user asked for (a :class:`~trainkit.utilities.messages.UsageError`,
such as a :class:`~trainkit.cli.config.ConfigError`, or a damaged checkpoint) is
one ``trainkit: error:`` line; any other exception, above all one raised by
the user's own code while it runs, keeps its traceback.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from trainkit.cli.config import ConfigError, import_object
from trainkit.trainer.options import OPTION_GROUPS, from_keywords
from trainkit.utilities.messages import UsageError, did_you_mean

#: The dataloader method each command needs.
DATALOADERS = {
    "fit": "train_dataloader",
    "validate": "val_dataloader",
    "test": "test_dataloader",
    "predict": "predict_dataloader",
}


def check_parsed(run: dict[str, Any], command: str) -> None:
    """Check what the config engine does not about a config it parsed.

    jsonargparse has checked every key, type, ``class_path`` and ``init_args``; what
    is left is what the Trainer and the command would refuse: the trainer options'
    ranges, the strategy's name and the devices, and where the dataloaders come from.

    Args:
        run: the parsed config as plain containers (``TrainkitCLI.run_config``).
        command: fit, validate, test or predict.
    """
    check_trainer_options(run["trainer"])
    model = _class(run["model"]["class_path"])
    data = run.get("data")
    data_class = _class(data["class_path"]) if data else None
    test_after_fit = bool(run.get("test_after_fit")) and command == "fit"
    check_data_source(command, model, data_class, test_after_fit)


def _class(class_path: str) -> type:
    # A class_path the engine has resolved and imported already.
    found: type = import_object(class_path)
    return found


def check_trainer_options(trainer: dict[str, Any]) -> None:
    """Check the trainer section's values as the Trainer will (ranges, strategy, devices).

    Args:
        trainer: the ``trainer`` section as parsed (its types checked, a
            ``class_path`` strategy resolved).
    """
    for options in OPTION_GROUPS.values():
        names = [f.name for f in dataclasses.fields(options)]
        try:
            from_keywords(options, trainer)  # None: the option's default, as the Trainer takes it
        except (ValueError, TypeError) as error:
            raise ConfigError(_trainer_message(str(error), names)) from error
    from trainkit.strategies import StrategyRegistry, plan_devices

    strategy = trainer["strategy"]
    if isinstance(strategy, dict):  # a class_path entry: the engine checked it
        return
    if strategy != "auto" and strategy not in StrategyRegistry:
        names = ["auto", *StrategyRegistry.available_strategies()]
        raise ConfigError(
            f"Unknown strategy trainer.strategy={strategy!r}."
            f"{did_you_mean(strategy, names, n=2)} (use one of: {', '.join(names)})."
        )
    try:
        plan_devices(strategy, trainer["accelerator"], trainer["devices"])
    except (ValueError, TypeError, RuntimeError) as error:
        raise ConfigError(f"trainer: {error}") from error


def _trainer_message(text: str, names: list[str]) -> str:
    # "max_epochs=-2 is invalid ..." -> "trainer.max_epochs=-2 is invalid ...".
    first = text.split("=")[0].split(" ")[0]
    return f"trainer.{text}" if first in names else f"trainer: {text}"


def check_data_source(
    command: str, model: type, data: type | None, test_after_fit: bool = False
) -> None:
    """Check that the Module or the DataModule defines the dataloaders ``command`` needs.

    Args:
        command: fit, validate, test or predict.
        model: the Module class.
        data: the DataModule class, or None without a ``data`` section.
        test_after_fit: whether fit is followed by a test (``test_after_fit``).
    """
    from trainkit.core.data import DataModule
    from trainkit.core.module import Module

    if not (isinstance(model, type) and issubclass(model, Module)):
        raise ConfigError(
            f"model: {model.__name__} is not a trainkit.Module (class_path must name a "
            "subclass of trainkit.Module)."
        )
    needed = [DATALOADERS[command]] + (["test_dataloader"] if test_after_fit else [])
    for method in needed:
        if _defines(model, method, Module) or (
            data is not None and _defines(data, method, DataModule)
        ):
            continue
        why = "test_after_fit" if method != DATALOADERS[command] else f"trainkit {command}"
        if data is None:
            raise ConfigError(
                f"The config has no data section and {model.__name__} defines no {method}(), "
                f"which {why} needs (add a data section with the class_path of a "
                f"DataModule, or define {method}() on the Module)."
            )
        raise ConfigError(
            f"Neither {data.__name__} (data) nor {model.__name__} (model) defines {method}(), "
            f"which {why} needs (define it on one of them, or use another data class_path)."
        )


def _defines(cls: type, method: str, base: type) -> bool:
    # A class defines a dataloader method when it overrides the base's do-nothing one.
    found = getattr(cls, method, None)
    return found is not None and found is not getattr(base, method, None)


def check_ckpt_path(ckpt_path: str | None) -> None:
    """Check that a ``ckpt_path`` naming a file names one that exists.

    Args:
        ckpt_path: the config's ``ckpt_path``: None, ``last``, ``best`` or a path.
    """
    if ckpt_path is None or ckpt_path == "last":
        return  # "last": the Trainer finds the newest last.ckpt (or starts fresh, warning)
    if ckpt_path == "best":
        raise ConfigError(
            "ckpt_path=best names the best checkpoint of a fit in the same Trainer, and this "
            "command starts a new one (give the checkpoint's path, or set test_after_fit=true "
            "to test the best checkpoint right after fit)."
        )
    path = Path(ckpt_path)
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise ConfigError(
            f"ckpt_path {ckpt_path} {what} (give the path of a checkpoint file, or "
            "ckpt_path=last for the newest run's last.ckpt under trainer.default_root_dir)."
        )


def user_error(error: BaseException) -> str | None:
    """The one-line message for an error the user can fix, or None for any other.

    Args:
        error: what the command raised.

    Example:
        >>> user_error(ConfigError("Unknown key 'x'.\\n  Valid keys: a, b."))
        "Unknown key 'x'. Valid keys: a, b."
        >>> user_error(ZeroDivisionError("in your training_step")) is None
        True
    """
    from trainkit.checkpoint.files import CheckpointError

    if not isinstance(error, (UsageError, CheckpointError)):
        return None
    return " ".join(str(error).split()) or type(error).__name__

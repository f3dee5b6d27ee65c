"""LightningCLI's ``--optimizer``/``--lr_scheduler``: from the parsed config to the
model's ``configure_optimizers``.

The optimizer is built when ``configure_optimizers`` is called, from the parameters the
model has then (after ``configure_model`` and the strategy), not when the CLI parses.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial, update_wrapper
from typing import TYPE_CHECKING, Any

from trainkit.cli.config import import_object
from trainkit.core.module import Module

if TYPE_CHECKING:
    from trainkit.cli.lightning_parser import LightningArgumentParser

# A class given as ``{"class_path": ..., "init_args": {...}}``.
ClassConfig = dict[str, Any]


def with_class_path(classes: type | tuple[type, ...], value: Any) -> ClassConfig | None:
    """The parsed value of an optimizer or scheduler group as ``class_path``/``init_args``.

    Args:
        classes: the group's class (its value holds only init args) or base classes.
        value: the parsed value (None: not given).
    """
    if value is None:
        return None
    plain = dict(value.as_dict() if hasattr(value, "as_dict") else value)
    if isinstance(classes, tuple):
        if not plain.get("class_path"):
            return None
        return {"class_path": plain["class_path"], "init_args": dict(plain.get("init_args") or {})}
    return {"class_path": f"{classes.__module__}.{classes.__qualname__}", "init_args": plain}


def link_optimizers_and_lr_schedulers(parser: LightningArgumentParser) -> None:
    """Pass groups registered with a ``link_to`` key into that model argument.

    Args:
        parser: the parser whose registered groups are linked.
    """
    for registered in (parser._optimizers, parser._lr_schedulers):
        for key, (classes, link_to) in registered.items():
            if link_to != "AUTOMATIC":
                parser.link_arguments(key, link_to, compute_fn=partial(with_class_path, classes))


def automatic_optimizers(
    parser: LightningArgumentParser,
    config_init: Any,
    get: Callable[[Any, str], Any],
) -> tuple[ClassConfig, ClassConfig | None] | None:
    """The optimizer and scheduler the command line asks for, or None when none is.

    Args:
        parser: the subcommand's parser.
        config_init: the instantiated config.
        get: reads a key of the config for the current subcommand.

    Raises:
        ValueError: when more than one optimizer or scheduler group is automatic.
    """
    optimizers = [k for k, (_, link) in parser._optimizers.items() if link == "AUTOMATIC"]
    schedulers = [k for k, (_, link) in parser._lr_schedulers.items() if link == "AUTOMATIC"]
    if not optimizers:
        return None
    if len(optimizers) > 1 or len(schedulers) > 1:
        raise ValueError(
            "LightningCLI can wire only one optimizer and one LR scheduler into "
            f"configure_optimizers; automatic ones: {optimizers + schedulers}. Register the "
            "others with link_to='model.<argument>' and build them in your configure_optimizers."
        )
    key = optimizers[0]
    optimizer = with_class_path(parser._optimizers[key][0], get(config_init, key))
    if optimizer is None:
        return None
    scheduler = None
    if schedulers:
        key = schedulers[0]
        scheduler = with_class_path(parser._lr_schedulers[key][0], get(config_init, key))
    return optimizer, scheduler


def instantiate(config: ClassConfig, *args: Any) -> Any:
    """Build ``config``'s class with ``args`` first and its ``init_args``.

    Args:
        config: ``{"class_path": "torch.optim.AdamW", "init_args": {...}}``.
        *args: positional arguments first (parameters, or the optimizer).
    """
    cls = import_object(config["class_path"])
    return cls(*args, **config.get("init_args", {}))


def instantiate_class(args: Any, init: ClassConfig) -> Any:
    """Lightning's ``instantiate_class``: build ``init``'s class with ``args`` first.

    Args:
        args: the positional argument (a tuple: several), e.g. the model's parameters.
        init: ``{"class_path": ..., "init_args": {...}}``, as a LightningCLI config gives
            an optimizer or scheduler linked to a model argument.

    Example:
        >>> import torch
        >>> params = [torch.nn.Parameter(torch.zeros(1))]
        >>> instantiate_class(params, {"class_path": "torch.optim.SGD", "init_args": {"lr": 0.5}})
        SGD (...)
    """
    return instantiate(init, *(args if isinstance(args, tuple) else (args,)))


def warn_if_overridden(model: Module, cli_name: str) -> None:
    """Warn, as Lightning does, that the model's own configure_optimizers is replaced.

    Args:
        model: the model.
        cli_name: the LightningCLI class's name.
    """
    if type(model).configure_optimizers is not Module.configure_optimizers:
        warnings.warn(
            f"`{type(model).__name__}.configure_optimizers` will be overridden by "
            f"`{cli_name}.configure_optimizers`.",
            stacklevel=3,
        )


def configure_with(
    configure: Callable[..., Any], optimizer: ClassConfig, scheduler: ClassConfig | None
) -> Callable[[Module], Any]:
    """A ``configure_optimizers(self)`` that builds the configured optimizer and scheduler.

    Args:
        configure: LightningCLI.configure_optimizers (module, optimizer, scheduler) -> result.
        optimizer: the optimizer's class config.
        scheduler: the scheduler's class config, or None.
    """

    def configure_optimizers(module: Module) -> Any:
        built = instantiate(optimizer, module.parameters())
        schedule = instantiate(scheduler, built) if scheduler is not None else None
        return configure(module, built, schedule)

    update_wrapper(configure_optimizers, configure)
    return configure_optimizers

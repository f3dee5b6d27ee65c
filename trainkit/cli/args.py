"""The ``trainkit`` command line, before argparse: LightningCLI's forms as trainkit's own.

trainkit's form is ``trainkit fit CONFIG.yaml key=value ...``. LightningCLI users
write ``--config CONFIG.yaml --trainer.max_epochs=3 --model.init_args.lr 0.1``;
:func:`normalize` turns each such flag into the ``key=value`` override it means,
so both forms (and any mix) reach the same config code. It also takes out
``--traceback`` (shown for any error, anywhere on the line) and accepts the
underscore spellings LightningCLI uses (``--print_config``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from trainkit.utilities.messages import UsageError

#: The first key of a ``--section.key`` flag that makes it an override.
SECTIONS = ("trainer", "model", "data", "ckpt_path", "test_after_fit")
#: Flags argparse knows, by the spellings accepted for them.
_FLAGS = {
    "--print-config": "--print-config",
    "--print_config": "--print-config",
    "--force-resume": "--force-resume",
    "--force_resume": "--force-resume",
}


@dataclass(frozen=True)
class CommandLine:
    """A command line in trainkit's form.

    Attributes:
        argv: what argparse parses: the subcommand, then config files and
            ``key=value`` overrides in the order given, then the flags.
        traceback: whether ``--traceback`` was given.
    """

    argv: list[str]
    traceback: bool


class MissingValue(UsageError, ValueError):
    """A ``--section.key`` flag ends the command line without its value."""


def normalize(argv: list[str], sections: Collection[str] = SECTIONS) -> CommandLine:
    """Rewrite LightningCLI's forms into trainkit's ``CONFIG.yaml key=value`` form.

    ``--config FILE`` (or ``--config=FILE``, repeatable) becomes the config
    file ``FILE``; ``--trainer.max_epochs=3`` and ``--trainer.max_epochs 3``
    become ``trainer.max_epochs=3`` (any flag whose first dotted name is a
    config section: trainer, model, data, ckpt_path, test_after_fit). Other
    flags are left for argparse, after the positional arguments, so that
    argparse sees every positional argument together.

    Args:
        argv: the arguments after ``trainkit``.
        sections: the config's top-level keys.

    Raises:
        MissingValue: a flag that needs a value is last.

    Example:
        >>> normalize(["fit", "--config", "a.yaml", "--trainer.max_epochs", "-1", "x=1"]).argv
        ['fit', 'a.yaml', 'trainer.max_epochs=-1', 'x=1']
        >>> normalize(["fit", "--print_config", "a.yaml", "--model.init_args.lr=0.1"]).argv
        ['fit', 'a.yaml', 'model.init_args.lr=0.1', '--print-config']
    """
    positional: list[str] = []
    flags: list[str] = []
    traceback = False
    tokens = iter(argv)
    for token in tokens:
        if token == "--traceback":
            traceback = True
            continue
        if not token.startswith("--"):
            (flags if token.startswith("-") else positional).append(token)  # -h
            continue
        name, has_value, value = token[2:].partition("=")
        if name == "config" or name.split(".")[0] in sections:
            if not has_value:
                following = next(tokens, None)
                if following is None:
                    raise MissingValue(
                        f"--{name} needs a value (--{name} VALUE or --{name}=VALUE)."
                    )
                value = following
            positional.append(value if name == "config" else f"{name}={value}")
            continue
        flags.append(_FLAGS.get(token, token))
    return CommandLine(positional + flags, traceback)

"""The ``trainkit`` command: ``trainkit fit|validate|test|predict CONFIG.yaml [key=value ...]``.

LightningCLI's forms work too: ``--config CONFIG.yaml --trainer.max_epochs=3``
(see ``trainkit.cli.args``). Everything is checked before anything is built or
trained (``trainkit.cli.engine``, ``trainkit.cli.checks``); a mistake the user can
fix prints one ``trainkit: error: ...`` line and exits with status 2, while an
exception from the user's own code keeps its traceback.

The resolved config is saved beside the run's logs (``config.yaml`` in the
logger's folder) and inside every checkpoint, so any
run can be repeated exactly from it. ``fit`` with ``ckpt_path`` compares the
checkpoint's config with the current one and refuses a resume whose differences
would change what the run computes (see ``trainkit.checkpoint.resume_check.resume_differences``)
unless ``--force-resume`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from trainkit.callbacks.base import Callback
from trainkit.utilities.messages import UsageError

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

SUBCOMMANDS = {
    "fit": "train the model (resume with ckpt_path=last or a checkpoint path)",
    "validate": "run the validation data once and print the metrics",
    "test": "run the test data once and print the metrics",
    "predict": "run predict_step over the predict data and save the predictions",
}

EXAMPLES = """examples:
  trainkit fit recipes/mnist/config.yaml
  trainkit fit recipes/mnist/config.yaml trainer.max_epochs=1 model.init_args.lr=0.02
  trainkit fit --config recipes/mnist/config.yaml --trainer.max_epochs=1 --model.lr 0.02
  trainkit fit recipes/mnist/config.yaml trainer.callbacks.ModelCheckpoint.monitor=val/loss
  trainkit fit recipes/mnist/config.yaml ckpt_path=last        # resume the newest run
  trainkit fit recipes/mnist/config.yaml ckpt_path=last trainer.seed=1 --force-resume
  trainkit test recipes/mnist/config.yaml ckpt_path=runs/mnist/logs/version_0/checkpoints/last.ckpt
  trainkit fit recipes/mnist/config.yaml --print-config
  trainkit consolidate runs/x/checkpoints/last.ckpt last-one-file.ckpt
"""


class UsageLineError(UsageError):
    """The command line itself is wrong (an unknown flag, a missing command)."""


class _Parser(argparse.ArgumentParser):
    """argparse, whose errors ``main`` prints as one ``trainkit: error:`` line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        raise UsageLineError(f"{message} (see {self.prog} --help)")


USAGE = (
    "{prog} CONFIG.yaml [CONFIG.yaml ...] [key=value ...] [--section.key=value ...] "
    "[--print-config] [--traceback]"
)


def _parser(help_for: str | None = None) -> argparse.ArgumentParser:
    """The command line: the command, config files, overrides and the command's flags.

    Args:
        help_for: the command whose ``--help`` is asked for: its epilog lists every
            config key with its type, default and documentation, from the config
            engine (built only then: it imports the Trainer).
    """
    parser = _Parser(
        prog="trainkit",
        description="Train and evaluate trainkit Modules from a YAML config.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"trainkit {_version()}", help="print the version"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, text in SUBCOMMANDS.items():
        sub = commands.add_parser(
            name,
            help=text,
            usage=USAGE.format(prog=f"trainkit {name}"),
            description=f"trainkit {name}: {text}.",
            epilog=_keys_help(name) if name == help_for else None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.add_argument(
            "arguments",
            nargs="*",
            metavar="CONFIG.yaml | key=value",
            help="the YAML config (trainer / model / data / ckpt_path / test_after_fit; several "
            "are merged in order, as are --config FILE flags), then dot-list overrides, e.g. "
            "trainer.max_epochs=5 model.init_args.lr=0.1 "
            "trainer.callbacks.ModelCheckpoint.monitor=val/loss; --trainer.max_epochs=5 and "
            "--trainer.max_epochs 5 mean the same",
        )
        sub.add_argument(
            "--print-config",
            action="store_true",
            help="print the resolved config (every default filled in, the model's and data's "
            "too) and exit",
        )
        sub.add_argument(
            "--traceback",
            action="store_true",
            help="on an error, show the traceback as well (also: TRAINKIT_DEBUG=1)",
        )
        if name == "fit":
            sub.add_argument(
                "--force-resume",
                action="store_true",
                help="resume from ckpt_path even when the config differs from the one the "
                "checkpoint was saved with in keys that change the run (model, data, "
                "optimization, or the length of a scheduled run); the differences are "
                "printed as a warning",
            )
    consolidate = commands.add_parser(
        "consolidate",
        help="write a sharded checkpoint folder (FSDP's) as one checkpoint file",
        description="trainkit consolidate: write a sharded checkpoint folder (what "
        "FSDPStrategy saves) as one ordinary checkpoint file, which resumes under any "
        "strategy and loads with Module.load_from_checkpoint.",
    )
    consolidate.add_argument("folder", help="the sharded checkpoint folder")
    consolidate.add_argument("output", help="the checkpoint file to write")
    consolidate.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    consolidate.add_argument(
        "--trusted",
        action="store_true",
        help="the folder is trusted: unpickle hyperparameters that are objects, to write "
        "them again (by default nothing from the folder runs, and such a folder is refused)",
    )
    consolidate.add_argument("--traceback", action="store_true", help="show tracebacks")
    return parser


def _keys_help(command: str) -> str:
    """Every config key of ``command``: the sections, and each key's type, default and doc."""
    from trainkit.cli.engine import TrainkitCLI

    keys = TrainkitCLI(command, [], [], parse=False).keys_help()
    return (
        "config keys (in a YAML file, as key=value, or as --key value; "
        "docs/configuration.md):\n\n" + keys
    )


def _version() -> str:
    """This package's version.

    ``trainkit/__init__.py`` is already imported when this module is (it is part
    of the package), so its ``__version__`` costs nothing and, unlike the
    installed distribution's metadata, always describes the code that runs.
    """
    from trainkit import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    """Run the ``trainkit`` command.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 on success, 2 for an error the user can fix (printed as
        one ``trainkit: error:`` line; with ``--traceback`` or ``TRAINKIT_DEBUG=1``
        after its traceback). Any other exception propagates with its traceback.
    """
    from trainkit.cli import args as cli_args
    from trainkit.cli import checks as cli_checks

    given = sys.argv[1:] if argv is None else list(argv)
    debug = os.environ.get("TRAINKIT_DEBUG", "") not in ("", "0") or "--traceback" in given
    try:
        line = cli_args.normalize(given)
        wants_help = {"-h", "--help"} & set(line.argv)
        args = _parser(help_for=line.argv[0] if wants_help and line.argv else None).parse_args(
            line.argv
        )
        if args.command == "consolidate":
            from trainkit.checkpoint.files import consolidate_checkpoint

            written = consolidate_checkpoint(
                args.folder, args.output, args.overwrite, weights_only=not args.trusted
            )
            print(f"trainkit: wrote {written}")
            return 0
        # Recipes and user code are imported by class_path from the working directory.
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        configs, overrides = _split(args.arguments)
        force = getattr(args, "force_resume", False)
        return _run(args.command, configs, overrides, args.print_config, force)
    except Exception as error:
        message = cli_checks.user_error(error)
        if message is None:
            raise  # not a mistake in what was asked for: the traceback says where
        if debug:
            traceback.print_exc()
        print(f"trainkit: error: {message}", file=sys.stderr, flush=True)
        return 2


def _split(arguments: list[str]) -> tuple[list[str], list[str]]:
    """Config files and ``key=value`` overrides, each in the order given."""
    from trainkit.cli.config import ConfigError

    overrides = [a for a in arguments if "=" in a and not Path(a).is_file()]
    configs = [a for a in arguments if a not in overrides]
    if not configs:
        raise ConfigError(
            "No config file given (trainkit fit CONFIG.yaml [key=value ...], or "
            "--config CONFIG.yaml; see trainkit fit --help)."
        )
    return configs, overrides


def _run(
    command: str, configs: list[str], overrides: list[str], print_only: bool, force: bool = False
) -> int:
    """Read the config with the engine, check it, and run ``command`` (or print the config).

    The config engine (``trainkit.cli.engine``) reads the files, applies the
    overrides and checks every key, type and class; the command then checks the
    values the Trainer would refuse and where the data comes from, before anything
    is built. ``--print-config`` does not open ``ckpt_path``: a config may be
    prepared before its checkpoint is written.
    """
    import yaml

    from trainkit.cli import checks as cli_checks
    from trainkit.cli.config import ConfigError
    from trainkit.cli.engine import TrainkitCLI

    cli = TrainkitCLI(command, configs, overrides)
    run = cli.run_config
    cli_checks.check_parsed(run, command)
    text = yaml.safe_dump(run, sort_keys=False)
    if print_only:
        print(text, end="")
        return 0
    cli_checks.check_ckpt_path(run["ckpt_path"])
    built = cli.build()
    trainer_options = built.trainer

    from trainkit.trainer.trainer import Trainer

    # The command compares its whole config on resume (a superset of what the
    # Trainer compares from Python), so the Trainer's own comparison stands aside.
    mismatch = "warn" if force else trainer_options.pop("resume_mismatch") or "error"
    trainer_options["resume_mismatch"] = "ignore"
    trainer_options["callbacks"] = [
        *trainer_options["callbacks"],
        _SaveConfig(text, run, resume_mismatch=mismatch),
    ]
    try:
        trainer = Trainer(**trainer_options)
    except (ValueError, TypeError, RuntimeError) as error:
        # Built from checked options only: what it refuses is in the config.
        raise ConfigError(f"trainer: {error}") from error
    model = built.model()
    data = built.data() if built.data is not None else None
    ckpt_path = run["ckpt_path"]

    if command == "fit":
        trainer.fit(model, datamodule=data, ckpt_path=ckpt_path)
        if run["test_after_fit"]:
            _test_after_fit(trainer, model, data)
        return 0
    if command in ("validate", "test"):
        evaluate = trainer.validate if command == "validate" else trainer.test
        results = evaluate(
            model, datamodule=data, ckpt_path=ckpt_path, verbose=run.get("verbose", True)
        )
        _print_results(trainer, results)
        return 0
    predictions = trainer.predict(
        model,
        datamodule=data,
        ckpt_path=ckpt_path,
        return_predictions=run.get("return_predictions"),
    )
    if trainer.is_global_zero and predictions is not None:  # None: return_predictions=false
        import torch

        from trainkit.loggers import run_folder

        target = Path(run_folder(trainer.loggers, trainer.default_root_dir)) / "predictions.pt"
        target.parent.mkdir(parents=True, exist_ok=True)
        torch.save(predictions, target)
        print(f"trainkit: {len(predictions or [])} prediction batches saved to {target}")
    return 0


def _test_after_fit(trainer: Trainer, model: Module, data: Any) -> None:
    """Test the best checkpoint of the fit that just ended (``test_after_fit``), print the metrics.

    The best checkpoint is the one the first ModelCheckpoint kept for its
    ``monitor``; without a monitored metric there is no "best", and the final
    weights are tested. A fit that was interrupted (a stop signal) is not tested.
    """
    if trainer.interrupted:
        if trainer.is_global_zero:
            print("trainkit: the fit was interrupted; not testing (test_after_fit)", flush=True)
        return
    checkpoint = trainer.checkpoint_callback
    ckpt_path: str | None = None
    which = "the final weights (no ModelCheckpoint monitors a metric)"
    if checkpoint is not None and checkpoint.monitor is not None and checkpoint.best_model_path:
        ckpt_path = "best"
        score = checkpoint.best_model_score
        shown = f"{float(score):.4f}" if score is not None else "?"
        which = f"the best checkpoint {checkpoint.best_model_path} ({checkpoint.monitor}={shown})"
    if trainer.is_global_zero:
        print(f"trainkit: test_after_fit: testing {which}", flush=True)
    results = trainer.test(model, datamodule=data, ckpt_path=ckpt_path)
    _print_results(trainer, results)


def _print_results(trainer: Trainer, results: list[dict[str, float]]) -> None:
    # One JSON object (a list with several dataloaders), from rank 0.
    if trainer.is_global_zero:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2), flush=True)


class _SaveConfig(Callback):
    """Writes the resolved config beside the run's logs, and into every checkpoint.

    Beside the logs once the run has started, not earlier: when fit resumes a
    run, the logger's folder is known only after the checkpoint is restored.
    On resume, compares the checkpoint's config with this one.

    Args:
        text: the config as YAML.
        config: the config as plain containers (stored under "config" in checkpoints).
        resume_mismatch: what a resume under a config that changes the run does:
            ``"error"`` (the command's default), ``"warn"`` (``--force-resume``)
            or ``"ignore"``.
    """

    def __init__(self, text: str, config: dict[str, Any], resume_mismatch: str = "error") -> None:
        self.text = text
        self.config = config
        self.resume_mismatch = resume_mismatch
        self.saved: Path | None = None

    def on_save_checkpoint(
        self, trainer: Trainer, module: Module, checkpoint: dict[str, Any]
    ) -> None:
        checkpoint["config"] = self.config

    def on_load_checkpoint(
        self, trainer: Trainer, module: Module, checkpoint: dict[str, Any]
    ) -> None:
        """Refuse (or, with ``--force-resume``, warn about) a resume under another config."""
        saved = checkpoint.get("config")
        if not isinstance(saved, dict) or self.resume_mismatch == "ignore":
            return  # not written by the trainkit command: nothing to compare
        from trainkit.checkpoint.resume_check import resume_differences
        from trainkit.cli.config import ConfigError

        blocking, other = resume_differences(
            saved, self.config, has_schedule=bool(checkpoint.get("lr_schedulers"))
        )
        source = trainer.ckpt_path or "the checkpoint"
        if blocking and self.resume_mismatch == "error":
            raise ConfigError(
                f"{source} was saved with another config, and resuming would not continue "
                f"that run: {'; '.join(blocking)}. Resume with the saved values (or pass the "
                "path of the run you meant as ckpt_path), or add --force-resume (or "
                "trainer.resume_mismatch=warn) to resume anyway."
            )
        if blocking or other:
            trainer.warn(
                f"Resuming {source}, saved with another config: {'; '.join(blocking + other)}."
            )

    def _save(self, trainer: Trainer) -> None:
        if self.saved is None and trainer.is_global_zero:
            from trainkit.loggers import run_folder

            folder = run_folder(trainer.loggers, trainer.default_root_dir)
            self.saved = _save_config(self.text, Path(folder))
            print(f"trainkit: config saved to {self.saved}", flush=True)

    def on_fit_start(self, trainer: Trainer, module: Module) -> None:
        self._save(trainer)

    def on_validation_start(self, trainer: Trainer, module: Module) -> None:
        self._save(trainer)

    def on_test_start(self, trainer: Trainer, module: Module) -> None:
        self._save(trainer)

    def on_predict_start(self, trainer: Trainer, module: Module) -> None:
        self._save(trainer)


def _save_config(text: str, folder: Path) -> Path:
    """Write ``config.yaml`` in ``folder``, never overwriting a different one.

    A different config for the same folder goes to ``config-1.yaml`` (then
    ``config-2.yaml``, ...). The file is written atomically and made durable
    (``trainkit.utilities.io.atomic_write`` fsyncs the file and the folder).
    """
    from trainkit.utilities.io import atomic_write

    target, index = folder / "config.yaml", 0
    while target.exists() and target.read_text(encoding="utf-8") != text:
        index += 1
        target = folder / f"config-{index}.yaml"
    with atomic_write(target) as file:
        file.write(text)
    return target


if __name__ == "__main__":
    sys.exit(main())

"""LightningCLI on trainkit: a project's ``main.py`` and its YAML configs run as they are.

::

    from trainkit.lightning.cli import LightningCLI

    def cli_main():
        LightningCLI(MyModel, MyDataModule)

    # python main.py fit --config a.yaml --trainer.max_epochs 20 --optimizer AdamW

It follows Lightning 2.x's documented LightningCLI (subcommands, ``--config``,
``--print_config``, ``class_path``/``init_args``, ``--optimizer``/``--lr_scheduler``,
``SaveConfigCallback``, the ``before_``/``after_`` hooks), on jsonargparse (a dependency of
trainkit). The ``trainkit`` command reads its configs with a subclass of it
(``trainkit.cli.engine``). This module imports without jsonargparse; constructing a
LightningCLI without it says what to install. Bad input prints one line and exits 2.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Callable
from types import MethodType
from typing import TYPE_CHECKING, Any, Union

from torch.optim import Optimizer

from trainkit.callbacks.base import Callback
from trainkit.core.data import DataModule
from trainkit.core.hyperparameters import CLASS_PATH_KEY
from trainkit.core.loading import INSTANTIATOR
from trainkit.core.module import Module, overrides
from trainkit.trainer.trainer import Trainer
from trainkit.utilities.io import atomic_write
from trainkit.utilities.seed import seed_everything

if TYPE_CHECKING:
    from jsonargparse import Namespace

    from trainkit.cli.lightning_parser import LightningArgumentParser

#: What ``LightningCLI(args=...)`` takes (Lightning's name): command-line arguments, a
#: dict of values or a jsonargparse ``Namespace``; None reads ``sys.argv``.
ArgsType = Union[list[str], dict[str, Any], "Namespace", None]

#: Each subcommand's Trainer method arguments that LightningCLI fills itself.
SUBCOMMANDS: dict[str, set[str]] = {
    "fit": {"model", "train_dataloaders", "val_dataloaders", "datamodule"},
    "validate": {"model", "dataloaders", "datamodule"},
    "test": {"model", "dataloaders", "datamodule"},
    "predict": {"model", "dataloaders", "datamodule"},
}


class SaveConfigCallback(Callback):
    """Save the run's resolved config as ``config.yaml`` in ``trainer.log_dir`` (rank 0).

    It refuses to overwrite a config a previous run left there, unless ``overwrite``.
    Subclasses may override :meth:`save_config` to also log the config elsewhere.

    Args:
        parser: the parser that read the config (it writes it back).
        config: the parsed config (the subcommand's).
        config_filename: the file's name.
        overwrite: replace an existing file instead of stopping.
        multifile: keep configs that came from separate files separate.
        save_to_log_dir: write the file into the log folder (False: only call
            :meth:`save_config`).
    """

    def __init__(
        self,
        parser: LightningArgumentParser,
        config: Namespace,
        config_filename: str = "config.yaml",
        overwrite: bool = False,
        multifile: bool = False,
        save_to_log_dir: bool = True,
    ) -> None:
        self.parser = parser
        self.config = config
        self.config_filename = config_filename
        self.overwrite = overwrite
        self.multifile = multifile
        self.save_to_log_dir = save_to_log_dir
        self.already_saved = False
        if not save_to_log_dir and not overrides(self, "save_config", SaveConfigCallback):
            raise ValueError(
                "SaveConfigCallback(save_to_log_dir=False) would save the config nowhere: "
                "`save_to_log_dir=False` only makes sense when subclassing SaveConfigCallback "
                "to implement `save_config`. Override save_config in a subclass, or leave "
                "save_to_log_dir=True."
            )

    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Write the config once, before the run starts.

        Args:
            trainer: the Trainer.
            module: the Module.
            stage: "fit", "validate", "test" or "predict".
        """
        if self.already_saved:
            return
        if self.save_to_log_dir:
            log_dir = trainer.log_dir or trainer.default_root_dir
            path = os.path.join(log_dir, self.config_filename)
            exists = os.path.isfile(path) if trainer.is_global_zero else False
            # Every rank stops, not only rank 0, so that none waits for the others forever.
            if trainer.strategy.broadcast(exists) and not self.overwrite:
                raise RuntimeError(
                    f"SaveConfigCallback: {path} exists (a previous run's config). Aborting "
                    "to avoid overwriting results of a previous run. Use another log folder, "
                    "delete the file, pass "
                    'LightningCLI(save_config_kwargs={"overwrite": True}) to replace it, or '
                    "LightningCLI(save_config_callback=None) to save none."
                )
            if trainer.is_global_zero:
                os.makedirs(log_dir, exist_ok=True)
                if self.multifile:  # jsonargparse writes the separate files itself
                    self.parser.save(
                        self.config, path, skip_unset=False, overwrite=True, multifile=True
                    )
                else:
                    text = self.parser.dump(self.config, skip_unset=False)
                    with atomic_write(path) as file:
                        file.write(text)
        if trainer.is_global_zero:
            self.save_config(trainer, module, stage)
            self.already_saved = True
        self.already_saved = trainer.strategy.broadcast(self.already_saved)

    def save_config(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Do more with the config on rank 0 (nothing by default), e.g. log it.

        Args:
            trainer: the Trainer.
            module: the Module.
            stage: the stage being set up.
        """


class LightningCLI:
    """Build a Trainer, Module and DataModule from the command line and YAML, and run.

    Args:
        model_class: the Module class; with ``subclass_mode_model``, a base class whose
            subclasses are chosen with ``--model.class_path``; None: any Module.
        datamodule_class: the DataModule class (or base class, or None: any, optional).
        save_config_callback: the callback that saves the config (None: none).
        save_config_kwargs: its keyword arguments (``{"overwrite": True}``).
        trainer_class: the Trainer class.
        trainer_defaults: the Trainer arguments' defaults (``callbacks`` are added to
            those the config gives).
        seed_everything_default: the seed (True: a random one, saved in the config;
            False: no seeding).
        parser_kwargs: the parsers' keyword arguments, or one dict per subcommand
            (``{"fit": {"default_config_files": ["fit.yaml"]}}``).
        parser_class: the parser class.
        subclass_mode_model: accept any subclass of ``model_class``.
        subclass_mode_data: accept any subclass of ``datamodule_class``.
        args: the arguments (a list like ``sys.argv[1:]``, or a dict); None reads sys.argv.
        run: parse a subcommand and run it; False: parse no subcommand, build the
            objects (``cli.model``, ``cli.datamodule``, ``cli.trainer``) and return.
        auto_configure_optimizers: add ``--optimizer``/``--lr_scheduler`` and, when one
            is given, make the model's ``configure_optimizers`` return it.
        load_from_checkpoint_support: make ``save_hyperparameters()`` in the model and the
            data record their config arguments (``class_path`` entries as written) instead
            of what ``__init__`` receives, so ``load_from_checkpoint`` builds the same
            classes again (``trainkit.cli.rebuild``).
    """

    #: What a recorded config names as the function that rebuilds it (``_instantiator``).
    _instantiator_path = INSTANTIATOR

    def __init__(
        self,
        model_class: type[Module] | None = None,
        datamodule_class: type[DataModule] | None = None,
        save_config_callback: type[SaveConfigCallback] | None = SaveConfigCallback,
        save_config_kwargs: dict[str, Any] | None = None,
        trainer_class: type[Trainer] = Trainer,
        trainer_defaults: dict[str, Any] | None = None,
        seed_everything_default: bool | int = True,
        parser_kwargs: dict[str, Any] | None = None,
        parser_class: type[LightningArgumentParser] | None = None,
        subclass_mode_model: bool = False,
        subclass_mode_data: bool = False,
        args: ArgsType = None,
        run: bool = True,
        auto_configure_optimizers: bool = True,
        load_from_checkpoint_support: bool = True,
    ) -> None:
        from trainkit.cli.lightning_parser import LightningArgumentParser, require_jsonargparse

        require_jsonargparse()
        for name, given in (
            ("trainer_class", trainer_class),
            ("model_class", model_class),
            ("datamodule_class", datamodule_class),
        ):
            if given is not None and not isinstance(given, type):
                raise TypeError(
                    f"LightningCLI({name}={getattr(given, '__qualname__', given)!r}): trainkit "
                    "takes a class here, not a function that builds one. Write a subclass whose "
                    "__init__ sets the arguments the function would, and pass it."
                )
        self.save_config_callback = save_config_callback
        self.save_config_kwargs = save_config_kwargs or {}
        self.trainer_class = trainer_class
        self.trainer_defaults = trainer_defaults or {}
        self.seed_everything_default = seed_everything_default
        self.parser_class = parser_class or LightningArgumentParser
        self.auto_configure_optimizers = auto_configure_optimizers
        self.load_from_checkpoint_support = load_from_checkpoint_support
        self.model_class = model_class
        # None means any Module, chosen by class_path (Lightning's behaviour).
        self._model_class: Any = model_class or Module
        self.subclass_mode_model = model_class is None or subclass_mode_model
        self.datamodule_class = datamodule_class
        self._datamodule_class: Any = datamodule_class or DataModule
        self.subclass_mode_data = datamodule_class is None or subclass_mode_data

        main_kwargs, subparser_kwargs = self._setup_parser_kwargs(parser_kwargs or {})
        self.setup_parser(run, main_kwargs, subparser_kwargs)
        self.parse_arguments(self.parser, args)
        self._parse_ckpt_path()
        self.subcommand: str | None = self.config["subcommand"] if run else None
        self._set_seed()
        self._instantiators: list[tuple[Callable[..., Any], type, bool]] = []
        if load_from_checkpoint_support:
            self._add_instantiators()
        self.before_instantiate_classes()
        self.instantiate_classes()
        self.after_instantiate_classes()
        if self.subcommand is not None:
            self._run_subcommand(self.subcommand)

    # ------------------------------------------------------------------ parsers
    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        """The subcommands and the Trainer method arguments LightningCLI fills itself."""
        return {name: set(skip) for name, skip in SUBCOMMANDS.items()}

    def _setup_parser_kwargs(
        self, parser_kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        # As Lightning: a subcommand's entry goes to its parser, the rest to the main one
        # (whose default_config_files may hold a section per subcommand, "fit: ...").
        names = self.subcommands()
        main = {k: v for k, v in parser_kwargs.items() if k not in names}
        return main, {k: dict(v) for k, v in parser_kwargs.items() if k in names}

    def init_parser(self, **kwargs: Any) -> LightningArgumentParser:
        """A parser with ``--config``.

        Args:
            **kwargs: the parser's keyword arguments.
        """
        from jsonargparse import ActionConfigFile  # type: ignore[attr-defined]

        from trainkit.version import __version__

        # The first line of a saved or printed config says what wrote it.
        kwargs.setdefault("dump_header", [f"trainkit=={__version__}"])
        parser = self.parser_class(**kwargs)
        parser.add_argument(
            "-c",
            "--config",
            action=ActionConfigFile,
            help="A YAML config file (several are merged in order; later arguments override).",
        )
        return parser

    def setup_parser(
        self,
        add_subcommands: bool,
        main_kwargs: dict[str, Any],
        subparser_kwargs: dict[str, dict[str, Any]],
    ) -> None:
        """Build ``self.parser``: with the subcommands, or (``run=False``) without.

        Args:
            add_subcommands: add fit/validate/test/predict.
            main_kwargs: the main parser's keyword arguments.
            subparser_kwargs: each subcommand parser's keyword arguments.
        """
        self.parser = self.init_parser(**main_kwargs)
        self._subcommand_parsers: dict[str, LightningArgumentParser] = {}
        self._subcommand_method_arguments: dict[str, list[str]] = {}
        if add_subcommands:
            self._add_subcommands(self.parser, **subparser_kwargs)
        else:
            self._add_arguments(self.parser)

    def add_default_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """Add ``--seed_everything``.

        Args:
            parser: the parser.
        """
        parser.add_argument(
            "--seed_everything",
            type=bool | int,
            default=self.seed_everything_default,
            help="The seed (true: a random seed, saved in the config; false: no seeding).",
        )

    def add_core_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """Add the Trainer's, the Module's and the DataModule's arguments.

        Args:
            parser: the parser.
        """
        parser.add_lightning_class_args(self.trainer_class, "trainer")
        defaults = {f"trainer.{k}": v for k, v in self.trainer_defaults.items() if k != "callbacks"}
        parser.set_defaults(defaults)
        parser.add_lightning_class_args(
            self._model_class, "model", subclass_mode=self.subclass_mode_model
        )
        parser.add_lightning_class_args(
            self._datamodule_class,
            "data",
            subclass_mode=self.subclass_mode_data,
            required=self.datamodule_class is not None,
        )

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """Add your own arguments, links and defaults (override it; nothing by default).

        Args:
            parser: the parser (each subcommand's has it called).
        """

    def _add_arguments(self, parser: LightningArgumentParser) -> None:
        self.add_default_arguments_to_parser(parser)
        self.add_core_arguments_to_parser(parser)
        self.add_arguments_to_parser(parser)
        if self.auto_configure_optimizers:
            from trainkit.cli.lightning_parser import LR_SCHEDULER_TYPES

            if not parser._optimizers:
                parser.add_optimizer_args((Optimizer,))
            if not parser._lr_schedulers:
                parser.add_lr_scheduler_args(LR_SCHEDULER_TYPES)
        self.link_optimizers_and_lr_schedulers(parser)

    @staticmethod
    def link_optimizers_and_lr_schedulers(parser: LightningArgumentParser) -> None:
        """Pass each optimizer and LR scheduler group added with a ``link_to`` to that
        model argument (as ``class_path``/``init_args``); "AUTOMATIC" ones are left to
        ``configure_optimizers``.

        Args:
            parser: a parser whose groups were added.
        """
        from trainkit.cli.optimizers import link_optimizers_and_lr_schedulers

        link_optimizers_and_lr_schedulers(parser)

    def _add_subcommands(self, parser: LightningArgumentParser, **kwargs: dict[str, Any]) -> None:
        subcommands = parser.add_subcommands()
        for name, skip in self.subcommands().items():
            method = getattr(self.trainer_class, name)
            doc = (method.__doc__ or "").strip().splitlines()
            description = doc[0] if doc else f"Runs Trainer.{name}."
            options = dict(kwargs.get(name, {}))
            options.setdefault("description", description)
            subparser = self.init_parser(**options)
            self._add_arguments(subparser)
            added = subparser.add_method_arguments(self.trainer_class, name, skip=skip)
            self._subcommand_method_arguments[name] = added
            self._subcommand_parsers[name] = subparser
            subcommands.add_subcommand(name, subparser, help=description)

    def _parser(self, subcommand: str | None) -> LightningArgumentParser:
        return self.parser if subcommand is None else self._subcommand_parsers[subcommand]

    def parse_arguments(self, parser: LightningArgumentParser, args: ArgsType) -> None:
        """Parse ``args`` (None: sys.argv) into ``self.config``.

        Args:
            parser: the parser.
            args: a list of arguments, a dict (or Namespace) of values, or None.
        """
        if args is not None and len(sys.argv) > 1:
            warnings.warn(
                "LightningCLI's args parameter is intended to run from within Python like if "
                "it were from the command line. To prevent mistakes it is not recommended to "
                f"provide both args and command line arguments, got: sys.argv[1:]={sys.argv[1:]}"
                f", args={args}. The command line's are ignored.",
                stacklevel=3,
            )
        if args is None:
            self.config = parser.parse_args()
        elif isinstance(args, list):
            self.config = parser.parse_args(args)
        else:
            self.config = parser.parse_object(args)

    def _parse_ckpt_path(self) -> None:
        """With ``--ckpt_path`` naming a checkpoint file, build the model with its saved
        hyperparameters (they take the place of the config's model arguments)."""
        subcommand = self.config.get("subcommand")
        parsed = self.config.get(subcommand) if subcommand else None
        ckpt_path = parsed.get("ckpt_path") if parsed is not None else None
        if not ckpt_path or not os.path.isfile(ckpt_path):
            return
        from trainkit.checkpoint.files import load
        from trainkit.checkpoint.weights import saved_hyperparameters

        saved = saved_hyperparameters(load(ckpt_path, map_location="cpu"))
        saved.pop("_instantiator", None)
        if not saved:
            return
        path = saved.pop(CLASS_PATH_KEY, None)
        model = {"class_path": path, "init_args": saved} if path is not None else saved
        self.config = self.parser.parse_object({subcommand: {"model": model}}, self.config)

    # -------------------------------------------------------------- instantiation
    def _get(self, config: Namespace, key: str, default: Any = None) -> Any:
        prefix = f"{self.subcommand}." if self.subcommand else ""
        return config.get(prefix + key, default)

    def _set_seed(self) -> None:
        seed = self._get(self.config, "seed_everything")
        if seed is None or seed is False:
            return
        # True draws a seed; the config records it, so the saved config.yaml repeats the run.
        used = seed_everything(None if seed is True else seed, workers=True)
        prefix = f"{self.subcommand}." if self.subcommand else ""
        self.config[prefix + "seed_everything"] = used

    def before_instantiate_classes(self) -> None:
        """Run before the classes are built (override it; nothing by default)."""

    def after_instantiate_classes(self) -> None:
        """Run after the classes are built, before the subcommand (override it; nothing by
        default)."""

    def instantiate_classes(self) -> None:
        """Build the classes the config names: ``self.model``, ``self.datamodule``,
        ``self.trainer``, and ``self.config_init`` (the config with objects)."""
        self.config_init = self.parser.instantiate(self.config, instantiators=self._instantiators)
        self.datamodule = self._get(self.config_init, "data")
        self.model = self._get(self.config_init, "model")
        self._add_configure_optimizers_method_to_model(self.subcommand)
        self.trainer = self.instantiate_trainer()

    def _add_instantiators(self) -> None:
        """Have the model and the data record their config when built (with
        ``load_from_checkpoint_support``); Lightning's name: a subclass that overrides
        it to do nothing builds them as they are, without recording."""
        self._instantiators = self._recording()

    def _recording(self) -> list[tuple[Callable[..., Any], type, bool]]:
        """jsonargparse instantiators that build the model and the data recording their
        config (``load_from_checkpoint_support``; see ``trainkit.cli.rebuild``)."""
        import yaml

        from trainkit.cli.rebuild import build_recording, names_class

        parser = self._parser(self.subcommand)
        config = self.config.get(str(self.subcommand), self.config)
        plain = yaml.safe_load(parser.dump(config, skip_unset=False, skip_validation=True))
        sections: dict[str, tuple[str | None, dict[str, Any]]] = {}
        for key in ("model", "data"):
            value = plain.get(key)
            if isinstance(value, dict) and "class_path" in value:  # dict_kwargs: **kwargs
                given = {**(value.get("init_args") or {}), **(value.get("dict_kwargs") or {})}
                sections[key] = (value["class_path"], given)
            elif isinstance(value, dict):  # a class given directly: its arguments
                sections[key] = (None, value)

        def record(
            class_type: type,
            *args: Any,
            applied_instantiation_links: dict[str, Any] | None = None,
            **kwargs: Any,
        ) -> Any:
            for key, base in (("model", Module), ("data", DataModule)):
                path, init_args = sections.get(key, ("", {}))
                if issubclass(class_type, base) and (path is None or names_class(path, class_type)):
                    del sections[key]  # once: a Module built inside it records its own
                    # Values linked in at instantiation are not in the parsed config.
                    for target, value in (applied_instantiation_links or {}).items():
                        name = target.removeprefix(f"{key}.").removeprefix("init_args.")
                        if target.startswith(f"{key}.") and "." not in name:
                            init_args[name] = value
                    given = init_args if path is None else {CLASS_PATH_KEY: path, **init_args}
                    build = functools.partial(class_type, *args, **kwargs)
                    return build_recording(class_type, given, build, self._instantiator_path)
            return class_type(*args, **kwargs)

        return [(record, Module, True), (record, DataModule, True)]

    def instantiate_trainer(self, **kwargs: Any) -> Trainer:
        """Build the Trainer from the config, with the extra callbacks and SaveConfigCallback.

        Args:
            **kwargs: Trainer arguments that override the config's.
        """
        parser = self._parser(self.subcommand)
        extra = [self._get(self.config_init, key) for key in parser.callback_keys]
        config = {**self._get(self.config_init, "trainer", default={}), **kwargs}
        return self._instantiate_trainer(config, extra)

    def _instantiate_trainer(self, config: dict[str, Any], callbacks: list[Any]) -> Trainer:
        if "callbacks" not in config:  # a Trainer class of the user's without the argument
            warnings.warn(
                f"The `{self.trainer_class.__qualname__}` class does not expose the `callbacks` "
                "argument so they will not be included (the config's, the defaults' and "
                "SaveConfigCallback).",
                stacklevel=2,
            )
            return self.trainer_class(**config)
        given = config.get("callbacks")
        listed = [] if given is None else list(given) if isinstance(given, list) else [given]
        listed.extend(callbacks)
        default = self.trainer_defaults.get("callbacks")
        if default is not None:
            listed.extend(default if isinstance(default, list) else [default])
        if self.save_config_callback is not None and not config.get("fast_dev_run", False):
            subconfig = self.config.get(str(self.subcommand), self.config)
            listed.append(
                self.save_config_callback(
                    self._parser(self.subcommand), subconfig, **self.save_config_kwargs
                )
            )
        config["callbacks"] = listed
        return self.trainer_class(**config)

    # ------------------------------------------------------------ optimizers
    @staticmethod
    def configure_optimizers(
        lightning_module: Module, optimizer: Optimizer, lr_scheduler: Any = None
    ) -> Any:
        """What the model's ``configure_optimizers`` returns for ``--optimizer``/``--lr_scheduler``.

        Args:
            lightning_module: the model.
            optimizer: the optimizer built from ``--optimizer``.
            lr_scheduler: the scheduler built from ``--lr_scheduler``, if any.
        """
        if lr_scheduler is None:
            return optimizer
        monitor = getattr(lr_scheduler, "monitor", None)
        if monitor is not None:  # ReduceLROnPlateau watches a metric
            return {
                "optimizer": optimizer,
                "lr_scheduler": {"scheduler": lr_scheduler, "monitor": monitor},
            }
        return [optimizer], [lr_scheduler]

    def _add_configure_optimizers_method_to_model(self, subcommand: str | None) -> None:
        from trainkit.cli.optimizers import automatic_optimizers, configure_with, warn_if_overridden

        if not self.auto_configure_optimizers:
            return
        built = automatic_optimizers(self._parser(subcommand), self.config_init, self._get)
        if built is None:  # no --optimizer given: the model's own configure_optimizers
            return
        optimizer_init, scheduler_init = built
        warn_if_overridden(self.model, type(self).__name__)
        method = configure_with(self.configure_optimizers, optimizer_init, scheduler_init)
        # LightningCLI's documented wiring: the instance's configure_optimizers is replaced.
        self.model.configure_optimizers = MethodType(method, self.model)

    # ------------------------------------------------------------------ running
    def _run_subcommand(self, subcommand: str) -> None:
        before = getattr(self, f"before_{subcommand}", None)
        if callable(before):
            before()
        run = getattr(self, subcommand, None) or getattr(self.trainer, subcommand)
        run(**self._prepare_subcommand_kwargs(subcommand))
        after = getattr(self, f"after_{subcommand}", None)
        if callable(after):
            after()

    def _prepare_subcommand_kwargs(self, subcommand: str) -> dict[str, Any]:
        config = self.config_init[subcommand]
        kwargs = {key: config[key] for key in self._subcommand_method_arguments[subcommand]}
        kwargs["model"] = self.model
        if self.datamodule is not None:
            kwargs["datamodule"] = self.datamodule
        return kwargs

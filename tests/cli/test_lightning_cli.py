"""LightningCLI: a Lightning project's main.py and its YAML configs run as they are.

The project is ``tests/cli/lightning_main.py``, run in-process with ``args=[...]`` and,
for the command-line forms, as ``python tests/cli/lightning_main.py fit ...``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

import trainkit
import trainkit.lightning as L

pytest.importorskip("jsonargparse", reason="LightningCLI needs the extra trainkit[cli]")

from tests.cli import lightning_main as project
from tests.cli.lightning_main import NeedsWidthModel, OwnOptimizerModel, TinyData, TinyModel
from tests.helpers import repo_env
from trainkit.callbacks.base import Callback
from trainkit.checkpoint.files import load
from trainkit.lightning.callbacks import EarlyStopping, ModelCheckpoint
from trainkit.lightning.cli import (
    LightningArgumentParser,
    LightningCLI,
    LRSchedulerCallable,
    OptimizerCallable,
    SaveConfigCallback,
    instantiate_class,
)
from trainkit.lightning.loggers import CSVLogger
from trainkit.trainer.trainer import Trainer
from trainkit.utilities.messages import UsageError

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "tests" / "cli" / "lightning_main.py")
QUIET = [
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_model_summary=false",
    "--trainer.log_every_n_steps=1",
]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = repo_env()
    return subprocess.run(
        [sys.executable, MAIN, *args], capture_output=True, text=True, env=env, timeout=120
    )


def _yaml(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


class LRRecorder(Callback):
    """The first optimizer's learning rate at each training batch."""

    def __init__(self) -> None:
        self.lrs: list[float] = []

    def on_train_batch_start(self, trainer: Trainer, module: Any, batch: Any, idx: int) -> None:
        self.lrs.append(trainer.optimizers[0].param_groups[0]["lr"])


# ------------------------------------------------------------------ optimizers
def test_optimizer_and_scheduler_shorthands_build_the_documented_optimizer() -> None:
    recorder = LRRecorder()
    cli = project.cli_main(
        [
            "fit",
            *QUIET,
            "--trainer.max_epochs=3",
            "--trainer.logger=false",
            "--optimizer",
            "AdamW",
            "--optimizer.lr",
            "1e-3",
            "--lr_scheduler",
            "CosineAnnealingLR",
            "--lr_scheduler.T_max",
            "3",
        ],
        trainer_defaults={"callbacks": [recorder]},
        save_config_callback=None,
    )
    optimizer = cli.trainer.optimizers[0]
    assert type(optimizer) is torch.optim.AdamW
    assert optimizer.defaults["lr"] == 1e-3
    # The scheduler steps once an epoch (Lightning's default interval): 4 batches each.
    reference = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1e-3)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(reference, T_max=3)
    expected = []
    for _ in range(3):
        expected += [reference.param_groups[0]["lr"]] * 4
        reference.step()
        schedule.step()
    assert recorder.lrs == pytest.approx(expected)


def test_own_configure_optimizers_is_kept_without_optimizer_and_replaced_with_one() -> None:
    args = ["--trainer.logger=false", "--model.lr=0.05"]
    own = LightningCLI(OwnOptimizerModel, TinyData, args=args, run=False)
    optimizer = own.model.configure_optimizers()
    assert type(optimizer) is torch.optim.SGD and optimizer.defaults["lr"] == 0.05
    with pytest.warns(UserWarning, match="configure_optimizers` will be overridden"):
        cli = LightningCLI(OwnOptimizerModel, TinyData, args=[*args, "--optimizer=Adam"], run=False)
    assert type(cli.model.configure_optimizers()) is torch.optim.Adam
    plateau = LightningCLI(
        TinyModel,
        TinyData,
        args=[
            *args,
            "--optimizer=SGD",
            "--optimizer.lr=0.1",
            "--lr_scheduler=ReduceLROnPlateau",
            "--lr_scheduler.monitor=val_loss",
        ],
        run=False,
    )
    configured = plateau.model.configure_optimizers()
    assert configured["lr_scheduler"]["monitor"] == "val_loss"


class Injected(TinyModel):
    """Lightning's dependency injection: the model builds what the config names."""

    def __init__(
        self,
        optimizer: OptimizerCallable = torch.optim.SGD,
        scheduler: LRSchedulerCallable | None = None,
    ) -> None:
        super().__init__()
        self.optimizer, self.scheduler = optimizer, scheduler

    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer(self.parameters())
        return ([optimizer], [self.scheduler(optimizer)]) if self.scheduler else optimizer


class LinkedOptimizer(TinyModel):
    def __init__(self, optimizer_init: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.optimizer_init = optimizer_init

    def configure_optimizers(self) -> Any:
        # Lightning's documented way to build an optimizer linked to a model argument.
        return instantiate_class(self.parameters(), self.optimizer_init)


class LinkToCLI(LightningCLI):
    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_optimizer_args(torch.optim.Adam, link_to="model.optimizer_init")

    def after_instantiate_classes(self) -> None:
        # Runs once the objects exist, before the subcommand.
        self.seen_after = (type(self.model).__name__, type(self.trainer).__name__)


def test_optimizer_callables_and_optimizer_args_linked_to_the_model() -> None:
    args = ["--model.optimizer=Adam", "--model.optimizer.lr=0.01", "--model.scheduler=StepLR"]
    cli = LightningCLI(Injected, TinyData, run=False, args=[*args, "--model.scheduler.step_size=2"])
    [optimizer], [scheduler] = cli.model.configure_optimizers()
    assert type(optimizer) is torch.optim.Adam and optimizer.defaults["lr"] == 0.01
    assert type(scheduler) is torch.optim.lr_scheduler.StepLR and scheduler.step_size == 2
    linked = LinkToCLI(LinkedOptimizer, TinyData, run=False, args=["--optimizer.lr=0.02"])
    assert linked.model.optimizer_init["class_path"].endswith(".Adam")
    assert linked.model.optimizer_init["init_args"]["lr"] == 0.02
    built = linked.model.configure_optimizers()
    assert type(built) is torch.optim.Adam and built.defaults["lr"] == 0.02
    assert linked.seen_after == ("LinkedOptimizer", "Trainer")


# ------------------------------------------------------------- run=False, args
def test_run_false_builds_the_objects_and_returns() -> None:
    cli = LightningCLI(
        TinyModel, TinyData, run=False, args=["--model.lr", "0.2", "--data.batch_size=4"]
    )
    assert isinstance(cli.model, TinyModel) and cli.model.hparams.lr == 0.2
    assert isinstance(cli.datamodule, TinyData) and cli.datamodule.batch_size == 4
    assert isinstance(cli.trainer, Trainer)
    assert cli.config.model.lr == 0.2
    assert cli.trainer.state.global_step == 0  # nothing ran
    from_dict = LightningCLI(TinyModel, TinyData, run=False, args={"model": {"lr": 0.3}})
    assert from_dict.model.hparams.lr == 0.3


def test_class_path_short_name_subclass_mode_and_any_model() -> None:
    cli = LightningCLI(
        TinyModel,
        TinyData,
        subclass_mode_model=True,
        run=False,
        args=["--model", "OwnOptimizerModel", "--model.lr", "0.2"],
    )
    assert type(cli.model) is OwnOptimizerModel and cli.model.hparams.lr == 0.2
    config = {"model": {"class_path": "tests.cli.lightning_main.TinyModel", "init_args": {}}}
    anything = LightningCLI(None, TinyData, run=False, args=config)
    assert type(anything.model) is TinyModel


# ------------------------------------------------------- configs and printing
def test_configs_merge_in_order_then_overrides_and_print_config(tmp_path: Path) -> None:
    a = _yaml(tmp_path / "a.yaml", "trainer:\n  max_epochs: 5\nmodel:\n  lr: 0.5\n")
    b = _yaml(tmp_path / "b.yaml", "model:\n  lr: 0.7\ndata:\n  batch_size: 2\n")
    result = _run("fit", "--config", a, "--config", b, "--model.lr", "0.3", "--print_config")
    assert result.returncode == 0, result.stderr
    printed = yaml.safe_load(result.stdout)
    assert result.stdout.startswith(f"# trainkit=={trainkit.__version__}\n")  # what wrote it
    assert printed["trainer"]["max_epochs"] == 5
    assert printed["model"]["lr"] == 0.3
    assert printed["data"]["batch_size"] == 2
    assert "ckpt_path" in printed and printed["optimizer"] is None
    skipped = _run("fit", "--config", a, "--print_config=skip_null")
    assert "null" not in skipped.stdout and "max_epochs: 5" in skipped.stdout


def test_help_per_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        project.cli_main(["fit", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for option in ("--model.lr", "--ckpt_path", "--optimizer", "--trainer.max_epochs"):
        assert option in out
    with pytest.raises(SystemExit):
        project.cli_main(["predict", "--help"])
    assert "--return_predictions" in capsys.readouterr().out


def test_parser_kwargs_per_subcommand_and_default_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fit_yaml = _yaml(tmp_path / "fit.yaml", "model:\n  lr: 0.125\n")
    cli = project.cli_main(
        ["fit", *QUIET, "--trainer.max_steps=1", "--trainer.logger=false", "--optimizer=SGD"],
        parser_kwargs={"fit": {"default_config_files": [fit_yaml]}},
        save_config_callback=None,
    )
    assert cli.model.hparams.lr == 0.125
    monkeypatch.setenv("PL_MODEL__LR", "0.25")
    env = LightningCLI(TinyModel, TinyData, run=False, parser_kwargs={"default_env": True}, args=[])
    assert env.model.hparams.lr == 0.25
    # Flat keyword arguments are the main parser's, as in Lightning: its defaults file
    # may hold a section per subcommand.
    common = _yaml(tmp_path / "common.yaml", "fit:\n  model:\n    lr: 0.5\n")
    cli = project.cli_main(
        ["fit", *QUIET, "--trainer.max_steps=1", "--trainer.logger=false", "--optimizer=SGD"],
        parser_kwargs={"default_config_files": [common]},
        save_config_callback=None,
    )
    assert cli.model.hparams.lr == 0.5


def test_callbacks_and_loggers_from_yaml_and_appended_on_the_command_line(tmp_path: Path) -> None:
    config = _yaml(
        tmp_path / "c.yaml",
        "trainer:\n"
        "  callbacks:\n"
        "    - class_path: ModelCheckpoint\n"
        "      init_args: {monitor: val_loss, save_top_k: 2}\n"
        "  logger:\n"
        "    - class_path: trainkit.lightning.loggers.CSVLogger\n"
        f"      init_args: {{save_dir: {tmp_path}}}\n",
    )
    cli = LightningCLI(
        TinyModel,
        TinyData,
        run=False,
        args=[
            "--config",
            config,
            "--trainer.callbacks+=EarlyStopping",
            "--trainer.callbacks.monitor=val_loss",
            "--trainer.callbacks.patience=3",
        ],
    )
    checkpoints = [c for c in cli.trainer.callbacks if type(c) is ModelCheckpoint]
    stoppers = [c for c in cli.trainer.callbacks if type(c) is EarlyStopping]
    assert checkpoints[0].monitor == "val_loss" and checkpoints[0].save_top_k == 2
    assert stoppers[0].monitor == "val_loss" and stoppers[0].patience == 3
    assert type(cli.trainer.loggers[0]) is CSVLogger


# ------------------------------------------------- saved config, seeding, ckpt
def test_saved_config_reruns_the_same_training(tmp_path: Path) -> None:
    common = [*QUIET, "--trainer.max_steps=6", "--optimizer=SGD", "--optimizer.lr=0.05"]
    first = project.cli_main(
        ["fit", *common, "--seed_everything=7", f"--trainer.default_root_dir={tmp_path / 'a'}"]
    )
    saved = sorted((tmp_path / "a").rglob("config.yaml"))
    assert len(saved) == 1
    assert yaml.safe_load(saved[0].read_text())["seed_everything"] == 7
    again = project.cli_main(
        ["fit", "--config", str(saved[0]), f"--trainer.default_root_dir={tmp_path / 'b'}"]
    )
    for mine, theirs in zip(first.model.parameters(), again.model.parameters(), strict=True):
        assert torch.equal(mine, theirs)
    # A third run into the same log folder would overwrite the config: refused.
    with pytest.raises(RuntimeError, match="Aborting to avoid overwriting results"):
        project.cli_main(
            [
                "fit",
                "--config",
                str(saved[0]),
                "--trainer.logger=false",
                f"--trainer.default_root_dir={saved[0].parent}",
            ]
        )
    project.cli_main(
        [
            "fit",
            "--config",
            str(saved[0]),
            "--trainer.logger=false",
            f"--trainer.default_root_dir={saved[0].parent}",
        ],
        save_config_kwargs={"overwrite": True},
    )


# The trainer section of the config.yaml that Lightning 2.6.6's LightningCLI saves
# for `fit --trainer.max_epochs=1 --optimizer=SGD --optimizer.lr=0.05` (its defaults as
# written, null for "the default"; the optimizer's other arguments left out).
LIGHTNINGS_SAVED_CONFIG = """\
# lightning.pytorch==2.6.6
seed_everything: 0
trainer:
  accelerator: auto
  strategy: auto
  devices: auto
  num_nodes: 1
  precision: null
  logger: null
  callbacks: null
  fast_dev_run: false
  max_epochs: 1
  min_epochs: null
  max_steps: -1
  min_steps: null
  max_time: null
  limit_train_batches: null
  limit_val_batches: null
  limit_test_batches: null
  limit_predict_batches: null
  overfit_batches: 0.0
  val_check_interval: null
  check_val_every_n_epoch: 1
  num_sanity_val_steps: null
  log_every_n_steps: null
  enable_checkpointing: null
  enable_progress_bar: false
  enable_model_summary: null
  accumulate_grad_batches: 1
  gradient_clip_val: null
  gradient_clip_algorithm: null
  deterministic: null
  benchmark: null
  inference_mode: true
  use_distributed_sampler: true
  profiler: null
  detect_anomaly: false
  barebones: false
  plugins: null
  sync_batchnorm: false
  reload_dataloaders_every_n_epochs: 0
  default_root_dir: null
  enable_autolog_hparams: true
  model_registry: null
model:
  features: 4
  lr: 0.1
data:
  batch_size: 8
  features: 4
optimizer:
  class_path: torch.optim.SGD
  init_args:
    lr: 0.05
lr_scheduler: null
ckpt_path: null
weights_only: null
"""


def test_a_config_lightnings_cli_saved_runs_with_the_same_defaults(tmp_path: Path) -> None:
    # Its nulls mean the defaults, as in Lightning: a logger, a checkpoint, the
    # sanity check, every batch; model_registry is accepted.
    config = _yaml(tmp_path / "config.yaml", LIGHTNINGS_SAVED_CONFIG)
    cli = project.cli_main(["fit", "--config", config, f"--trainer.default_root_dir={tmp_path}"])
    trainer = cli.trainer
    assert trainer.global_step == 4 and trainer.num_sanity_val_steps == 2
    assert [type(logger).__name__ for logger in trainer.loggers] == ["TensorBoardLogger"]
    assert trainer.checkpoint_callback is not None
    assert sorted(p.name for p in (Path(trainer.log_dir) / "checkpoints").iterdir()) == [
        "epoch=0-step=4.ckpt",
        "last.ckpt",
    ]
    assert trainer.precision == "32-true" and trainer.log_every_n_steps == 50


def test_command_line_fit_then_test_with_ckpt_path(tmp_path: Path) -> None:
    fit = _run(
        "fit",
        *QUIET,
        "--trainer.max_steps=2",
        "--optimizer=SGD",
        f"--trainer.default_root_dir={tmp_path}",
    )
    assert fit.returncode == 0, fit.stderr
    last = sorted(tmp_path.rglob("last.ckpt"))
    assert last, list(tmp_path.rglob("*"))
    test = _run(
        "test",
        "--ckpt_path",
        str(last[0]),
        "--trainer.logger=false",
        f"--trainer.default_root_dir={tmp_path / 't'}",
    )
    assert test.returncode == 0, test.stderr
    assert "test_loss" in test.stdout


# ------------------------------------------------------ parser customization
class CustomCLI(LightningCLI):
    """Lightning's documented customization points."""

    calls: list[str] = []

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_argument("--notes", type=str, default="none")
        parser.link_arguments("data.features", "model.features")
        parser.link_arguments("data.batch_size", "model.lr", compute_fn=lambda b: b / 100)
        parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
        parser.set_defaults({"checkpoint.monitor": "val_loss", "checkpoint.save_top_k": 1})

    def before_fit(self) -> None:
        self.calls.append(f"before_fit {self.trainer.state.global_step}")

    def after_fit(self) -> None:
        self.calls.append(f"after_fit {self.trainer.state.global_step}")


class InstantiateLinkCLI(LightningCLI):
    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.link_arguments("data.features", "model.features", apply_on="instantiate")


def test_add_arguments_links_lightning_class_args_and_hooks() -> None:
    CustomCLI.calls = []
    cli = CustomCLI(
        TinyModel,
        TinyData,
        save_config_callback=None,
        args=[
            "fit",
            *QUIET,
            "--trainer.max_steps=2",
            "--trainer.logger=false",
            "--optimizer=SGD",
            "--data.features=3",
            "--data.batch_size=4",
            "--notes=hello",
        ],
    )
    assert cli.config.fit.notes == "hello"
    assert cli.model.hparams.features == 3 and cli.model.layer.in_features == 3
    assert cli.model.hparams.lr == 0.04
    checkpoints = [c for c in cli.trainer.callbacks if type(c) is ModelCheckpoint]
    assert any(c.monitor == "val_loss" for c in checkpoints)
    assert CustomCLI.calls == ["before_fit 0", "after_fit 2"]
    linked = InstantiateLinkCLI(TinyModel, TinyData, run=False, args=["--data.features=5"])
    assert linked.model.layer.in_features == 5
    assert linked.model.hparams.features == 5  # recorded as linked, not the config's default


def test_instantiate_classes_and_trainer_can_be_overridden() -> None:
    class SlowTrainerCLI(LightningCLI):
        def instantiate_trainer(self, **kwargs: Any) -> Trainer:
            return super().instantiate_trainer(max_epochs=9, **kwargs)

    cli = SlowTrainerCLI(TinyModel, TinyData, run=False, args=["--trainer.max_epochs=2"])
    assert cli.trainer.options.max_epochs == 9


# ------------------------------------------------------------------ bad input
BAD_INPUT = [
    (["fit", "--model.lrr", "3"], ["--model.lrr", "did you mean --model.lr"]),
    (["fit", "--model.lr", "abc"], ["--model.lr", "expected float", "'abc'"]),
    (["fit", "--trainer.max_epochs", "x"], ["--trainer.max_epochs", "expected int or None"]),
    (["fit", "--optimizer", "AdamX"], ["--optimizer", "'AdamX'", "did you mean Adam"]),
    (["fit", "--trainer.callbacks+=ModelCheckpont"], ["did you mean ModelCheckpoint"]),
    (
        ["fit", "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.monitr=x"],
        ["--trainer.callbacks.monitr", "did you mean monitor"],
    ),
    (["fitt"], ["'fitt'", "did you mean fit"]),
    (
        ["fit", "--trainer.callbacks+=lightning.pytorch.callbacks.EarlyStopping"],
        ["--trainer.callbacks", "write 'trainkit.lightning.callbacks.EarlyStopping'"],
    ),
    (["fit", "--trainer.logger=CSVLoger"], ["--trainer.logger", "did you mean CSVLogger"]),
    (
        ["fit", "--trainer.logger=pytorch_lightning.loggers.CSVLogger"],
        ["--trainer.logger", "write 'trainkit.lightning.loggers.CSVLogger'"],
    ),
]


@pytest.mark.parametrize(("args", "expected"), BAD_INPUT)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], expected: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        project.cli_main(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    for text in expected:
        assert text in err


def test_bad_config_files_and_missing_required(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [
        (["fit", "--config", _yaml(tmp_path / "bad.yaml", "trainer: [1\n")], "not valid YAML"),
        (
            ["fit", "--config", _yaml(tmp_path / "typo.yaml", "model:\n  lrr: 3\n")],
            "did you mean --model.lr",
        ),
        (["fit", "--config", str(tmp_path / "none.yaml")], "does not exist"),
    ]
    for args, expected in cases:
        with pytest.raises(SystemExit) as exit_:
            project.cli_main(args)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and expected in err, err
    with pytest.raises(SystemExit) as exit_:
        LightningCLI(NeedsWidthModel, TinyData, args=["fit"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--model.width is required" in err and len(err.strip().splitlines()) == 1


def test_bad_input_on_the_command_line_has_no_traceback() -> None:
    result = _run("fit", "--model.lrr", "3")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "did you mean --model.lr" in result.stderr and "Traceback" not in result.stderr


def test_without_jsonargparse_import_works_and_construction_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['jsonargparse'] = None\n"
        "import trainkit, trainkit.cli\n"
        "from trainkit.lightning.cli import LightningCLI\n"
        "try:\n    LightningCLI()\nexcept ModuleNotFoundError as e:\n    print(e)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=repo_env(),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert 'pip install "trainkit[cli]"' in result.stdout


def test_importing_trainkit_cli_does_not_import_jsonargparse() -> None:
    code = "import sys, trainkit.cli; print(any(m.startswith('jsonargparse') for m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=repo_env(),
        timeout=120,
    )
    assert result.stdout.strip() == "False", result.stderr


INJECTED = [
    "--model=tests.cli.lightning_main.InjectedModel",
    "--model.encoder=tests.cli.lightning_main.Encoder",
    "--model.encoder.width=5",
    "--trainer.max_epochs=1",
    "--trainer.accelerator=cpu",  # the loaded copy (on the CPU) is compared with cli.model
    *QUIET,
]


def test_load_from_checkpoint_rebuilds_classes_the_config_injected(tmp_path: Path) -> None:
    from tests.cli.lightning_main import Encoder, InjectedModel

    cli = LightningCLI(args=["fit", *INJECTED], datamodule_class=TinyData)
    # save_hyperparameters() records the config's arguments, not the Encoder object.
    assert dict(cli.model.hparams) == {
        "_class_path": "tests.cli.lightning_main.InjectedModel",
        "encoder": {
            "class_path": "tests.cli.lightning_main.Encoder",
            "init_args": {"features": 4, "width": 5},
        },
        "lr": 0.1,
        # Lightning's name for the function, under the ported prefix.
        "_instantiator": "trainkit.lightning.cli.instantiate_module",
    }
    path = tmp_path / "checkpoints" / "last.ckpt"
    with pytest.warns(UserWarning, match="eval mode"):
        loaded = InjectedModel.load_from_checkpoint(path, lr=0.5)
    assert isinstance(loaded.encoder, Encoder) and loaded.encoder.layer.out_features == 5
    assert loaded.hparams.lr == 0.5
    for name, value in cli.model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name


def test_without_load_from_checkpoint_support_init_arguments_are_recorded() -> None:
    from tests.cli.lightning_main import Encoder

    cli = LightningCLI(
        args=[*INJECTED], datamodule_class=TinyData, run=False, load_from_checkpoint_support=False
    )
    assert isinstance(cli.model.hparams.encoder, Encoder)
    assert "_instantiator" not in cli.model.hparams


def test_a_subclass_that_turns_off_add_instantiators_records_init_arguments() -> None:
    # Projects override Lightning's _add_instantiators to turn the config recording off.
    from tests.cli.lightning_main import Encoder

    class NoRecording(LightningCLI):
        def _add_instantiators(self) -> None:
            pass

    cli = NoRecording(args=[*INJECTED], datamodule_class=TinyData, run=False)
    assert isinstance(cli.model.hparams.encoder, Encoder)
    assert "_instantiator" not in cli.model.hparams
    recorded = LightningCLI(args=[*INJECTED], datamodule_class=TinyData, run=False)
    assert "_instantiator" in recorded.model.hparams  # the default records the config


def test_a_checkpoint_never_makes_load_from_checkpoint_call_its_own_import_path(
    tmp_path: Path,
) -> None:
    cli = LightningCLI(args=["fit", *INJECTED], datamodule_class=TinyData)
    path = tmp_path / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["hyper_parameters"]["_instantiator"] = "os.system"
    del checkpoint["integrity"]  # edited on purpose
    torch.save(checkpoint, tmp_path / "edited.ckpt")
    from tests.cli.lightning_main import Encoder, InjectedModel

    # Built from the saved values directly (the encoder given, as without a config).
    with pytest.warns(UserWarning, match="_instantiator='os.system', which trainkit does not"):
        loaded = InjectedModel.load_from_checkpoint(
            tmp_path / "edited.ckpt", encoder=Encoder(width=5)
        )
    assert torch.equal(loaded.head.weight, cli.model.head.weight)


def test_a_checkpoint_lightnings_cli_saved_is_rebuilt_the_same_way(tmp_path: Path) -> None:
    from tests.cli.lightning_main import Encoder, InjectedModel

    cli = LightningCLI(args=["fit", *INJECTED], datamodule_class=TinyData)
    path = tmp_path / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(path, weights_only=True)
    # What Lightning's LightningCLI records for the same config.
    lightnings = "lightning.pytorch.cli.instantiate_module"
    checkpoint["hyper_parameters"]["_instantiator"] = lightnings
    del checkpoint["integrity"]  # edited on purpose
    torch.save(checkpoint, tmp_path / "lightning.ckpt")
    loaded = InjectedModel.load_from_checkpoint(tmp_path / "lightning.ckpt")
    assert isinstance(loaded.encoder, Encoder)
    assert torch.equal(loaded.encoder.layer.weight, cli.model.encoder.layer.weight)


def test_ckpt_path_builds_the_model_with_the_checkpoint_s_hyperparameters(tmp_path: Path) -> None:
    from tests.cli.lightning_main import InjectedModel

    fit = ["fit", "--model.lr=0.3", "--trainer.max_epochs=1", *QUIET]
    LightningCLI(OwnOptimizerModel, TinyData, args=fit)
    path = str(tmp_path / "checkpoints" / "last.ckpt")
    tested = LightningCLI(OwnOptimizerModel, TinyData, args=["test", "--ckpt_path", path, *QUIET])
    assert tested.model.hparams.lr == 0.3  # the checkpoint's, not the default 0.1

    injected = ["fit", *INJECTED, "--trainer.default_root_dir=injected"]
    LightningCLI(args=injected, datamodule_class=TinyData)
    path = str(tmp_path / "injected" / "checkpoints" / "last.ckpt")
    # The arguments name a 3-wide encoder (its default); the checkpoint's 5 wins, so
    # the saved weights fit.
    tested = LightningCLI(
        args=["test", "--ckpt_path", path, *INJECTED[:2], *QUIET], datamodule_class=TinyData
    )
    assert type(tested.model) is InjectedModel
    assert tested.model.encoder.layer.out_features == 5


def test_load_from_checkpoint_builds_the_class_it_is_called_on(tmp_path: Path) -> None:
    args = ["fit", "--model=tests.cli.lightning_main.OwnOptimizerModel", "--model.lr=0.2"]
    LightningCLI(datamodule_class=TinyData, args=[*args, "--trainer.max_epochs=1", *QUIET])
    path = tmp_path / "checkpoints" / "last.ckpt"
    assert load(path)["hyper_parameters"]["_class_path"].endswith(".OwnOptimizerModel")
    with pytest.warns(UserWarning, match="eval mode"):
        base = TinyModel.load_from_checkpoint(path)
        own = OwnOptimizerModel.load_from_checkpoint(path)
    # As Lightning: the class called, with the saved arguments (not the saved subclass).
    assert type(base) is TinyModel and type(own) is OwnOptimizerModel
    assert base.hparams.lr == own.hparams.lr == 0.2


def test_load_from_checkpoint_on_the_module_base_builds_the_saved_subclass(
    tmp_path: Path,
) -> None:
    # As Lightning: LightningModule.load_from_checkpoint(path) of a subclass-mode run
    # builds the class the config named, with its own arguments (here an injected one).
    from tests.cli.lightning_main import Encoder, InjectedModel

    cli = LightningCLI(args=["fit", *INJECTED], datamodule_class=TinyData)
    path = tmp_path / "checkpoints" / "last.ckpt"
    with pytest.warns(UserWarning, match="eval mode"):
        loaded = L.LightningModule.load_from_checkpoint(path)
    assert type(loaded) is InjectedModel and isinstance(loaded.encoder, Encoder)
    assert torch.equal(loaded.head.weight, cli.model.head.weight)

    # A class no imported module defines is never imported from a checkpoint.
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["hyper_parameters"]["_class_path"] = "not_imported_anywhere.Model"
    del checkpoint["integrity"]  # edited on purpose
    torch.save(checkpoint, tmp_path / "edited.ckpt")
    with pytest.raises(UsageError, match=r"'not_imported_anywhere\.Model', which is not an imp"):
        L.LightningModule.load_from_checkpoint(tmp_path / "edited.ckpt")


def test_model_and_data_given_by_class_path_both_save_hyperparameters_and_fit(
    tmp_path: Path,
) -> None:
    # Each records its own _class_path; the loggers get the two merged without it.
    args = ["fit", "--model=tests.cli.lightning_main.OwnOptimizerModel"]
    args += ["--data=tests.cli.test_lightning_cli.SavingData", "--trainer.max_epochs=1"]
    cli = LightningCLI(args=[*args, "--trainer.logger=CSVLogger", "--trainer.logger.save_dir=."])
    assert cli.trainer.global_step == 4
    assert cli.model.hparams["_class_path"] != cli.datamodule.hparams["_class_path"]
    logged = yaml.safe_load(Path(cli.trainer.logger.log_dir, "hparams.yaml").read_text())
    assert "_class_path" not in logged and logged["batch_size"] == 8 and logged["lr"] == 0.1


class SavingData(TinyData):
    """TinyData that records its arguments."""

    def __init__(self, batch_size: int = 8, features: int = 4) -> None:
        super().__init__(batch_size, features)
        self.save_hyperparameters()


def test_a_model_its_package_re_exports_is_recorded_and_rebuilt_from_ckpt_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A project's config names its classes where its package exports them
    # (zoo.Zebra for zoo.impl.Zebra); the checkpoint records that path, and
    # `test --ckpt_path` rebuilds the model from it, as with Lightning.
    package = tmp_path / "zoo"
    package.mkdir()
    (package / "impl.py").write_text(
        "from tests.cli.lightning_main import OwnOptimizerModel\n\n\n"
        "class Zebra(OwnOptimizerModel):\n    pass\n"
    )
    (package / "__init__.py").write_text("from zoo.impl import Zebra\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fit = ["fit", "--model=zoo.Zebra", "--model.lr=0.3", "--trainer.max_epochs=1", *QUIET]
    LightningCLI(datamodule_class=TinyData, args=fit)
    path = str(tmp_path / "checkpoints" / "last.ckpt")
    assert load(path)["hyper_parameters"]["_class_path"] == "zoo.Zebra"
    test = ["test", "--model=zoo.Zebra", "--ckpt_path", path, *QUIET]
    tested = LightningCLI(datamodule_class=TinyData, args=test)
    assert type(tested.model).__qualname__ == "Zebra"
    assert tested.model.hparams.lr == 0.3  # the checkpoint's, not the default 0.1


@pytest.mark.parametrize("name", ["CSVLogger", "TensorBoardLogger"])
def test_a_loggers_short_name_means_the_ported_class_as_in_lightning(name: str) -> None:
    # trainkit's own logger has the same name; the ported Trainer's CLI takes the
    # ported one (writing to lightning_logs), and a full class path still picks either.
    from trainkit import loggers

    ported = LightningCLI(
        TinyModel,
        TinyData,
        run=False,
        args=[f"--trainer.logger={name}", "--trainer.logger.save_dir=out"],
    )
    assert type(ported.trainer.logger).__module__.startswith("trainkit.lightning.loggers")
    assert ported.trainer.logger.log_dir.endswith("lightning_logs/version_0")
    own = LightningCLI(
        TinyModel,
        TinyData,
        run=False,
        args=[f"--trainer.logger=trainkit.loggers.{name}", "--trainer.logger.save_dir=out"],
    )
    assert type(own.trainer.logger) is getattr(loggers, name)


def test_wandb_loggers_short_name_means_the_ported_class_with_lightnings_project(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    cli = LightningCLI(
        TinyModel,
        TinyData,
        run=False,
        args=["--trainer.logger=WandbLogger", "--trainer.logger.offline=true"],
    )
    assert type(cli.trainer.logger).__module__.startswith("trainkit.lightning.loggers")
    assert cli.trainer.logger.name == "lightning_logs"  # no run started to read it


def test_ddp_and_profiler_arguments_torch_takes_are_config_options(tmp_path: Path) -> None:
    # As with Lightning's classes: DistributedDataParallel's arguments (DDPStrategy's
    # **kwargs) and emit_nvtx's record_shapes (PyTorchProfiler's) in YAML, on the command
    # line and in a lazy_instance default.
    from jsonargparse import lazy_instance

    from trainkit.lightning.strategies import DDPStrategy

    config = _yaml(
        tmp_path / "ddp.yaml",
        "trainer:\n  strategy:\n    class_path: trainkit.lightning.strategies.DDPStrategy\n"
        "    init_args:\n      find_unused_parameters: true\n",
    )
    built = LightningCLI(TinyModel, TinyData, run=False, args=[f"--config={config}"])
    options = built.config_init.trainer.strategy.ddp_options
    assert options["find_unused_parameters"] is True and options["static_graph"] is False
    flags = ["--trainer.strategy=DDPStrategy", "--trainer.strategy.static_graph=true"]
    built = LightningCLI(TinyModel, TinyData, run=False, args=flags)
    assert built.config_init.trainer.strategy.ddp_options["static_graph"] is True
    lazy = lazy_instance(DDPStrategy, gradient_as_bucket_view=True)
    built = LightningCLI(
        TinyModel, TinyData, run=False, args=[], trainer_defaults={"strategy": lazy}
    )
    assert built.config_init.trainer.strategy.ddp_options["gradient_as_bucket_view"] is True

    profiler = ["--trainer.profiler=PyTorchProfiler", "--trainer.profiler.record_shapes=false"]
    built = LightningCLI(TinyModel, TinyData, run=False, args=profiler)
    assert built.trainer.profiler.profiler_kwargs == {"record_shapes": False}


def test_dict_kwargs_for_an_init_taking_kwargs_are_recorded_and_reloaded(tmp_path: Path) -> None:
    args = ["fit", "--model=tests.cli.test_lightning_cli.KwargsModel", "--model.lr=0.2"]
    args += ["--model.dict_kwargs.extra=3", "--trainer.max_epochs=1", *QUIET]
    cli = LightningCLI(datamodule_class=TinyData, args=args)
    assert cli.model.kwargs == {"extra": 3} and cli.model.hparams["extra"] == 3
    with pytest.warns(UserWarning, match="eval mode"):
        loaded = KwargsModel.load_from_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert loaded.kwargs == {"extra": 3} and loaded.hparams.lr == 0.2


class KwargsModel(OwnOptimizerModel):
    """A model whose __init__ takes **kwargs (filled from a config's dict_kwargs)."""

    def __init__(self, lr: float = 0.1, **kwargs: Any) -> None:
        super().__init__(lr=lr)
        self.save_hyperparameters()
        self.kwargs = kwargs


def test_save_config_callback_saving_nowhere_is_refused() -> None:
    with pytest.raises(ValueError, match="only makes sense when subclassing SaveConfigCallback"):
        SaveConfigCallback(LightningArgumentParser(), {}, save_to_log_dir=False)

    class Elsewhere(SaveConfigCallback):
        def save_config(self, trainer: Any, module: Any, stage: str) -> None:
            pass

    assert Elsewhere(LightningArgumentParser(), {}, save_to_log_dir=False).save_to_log_dir is False


def test_args_given_with_command_line_arguments_too_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["main.py", "--model.lr=0.3"])
    with pytest.warns(
        UserWarning, match=r"args parameter .* sys\.argv\[1:\]=\['--model\.lr=0\.3'\]"
    ):
        cli = LightningCLI(TinyModel, TinyData, run=False, args=["--model.lr=0.2"])
    assert cli.model.hparams.lr == 0.2  # args wins


def test_a_trainer_class_without_callbacks_gets_none_and_a_function_is_refused() -> None:
    class NoCallbacks(Trainer):
        def __init__(self, max_epochs: int = 1) -> None:
            super().__init__(max_epochs=max_epochs, logger=False, enable_checkpointing=False)

    with pytest.warns(UserWarning, match="NoCallbacks` class does not expose the `callbacks`"):
        cli = LightningCLI(TinyModel, TinyData, trainer_class=NoCallbacks, run=False, args=[])
    assert type(cli.trainer) is NoCallbacks

    def build_trainer(**kwargs: Any) -> Trainer:
        return Trainer(**kwargs)

    with pytest.raises(TypeError, match=r"trainer_class='.*build_trainer'\): trainkit takes a"):
        LightningCLI(TinyModel, TinyData, trainer_class=build_trainer, run=False, args=[])

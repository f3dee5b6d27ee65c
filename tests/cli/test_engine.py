"""The trainkit command reads a config with LightningCLI's parser (trainkit.cli.engine).

So far ``--print-config`` goes through it (docs/design/config-engine.md): the same
file means the same config to ``trainkit`` and to LightningCLI, OmegaConf's
interpolations are resolved after every override and default, and a user's
mistake is still one line naming the key.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helpers import printed_config
from trainkit.cli.lightning_cli import LightningCLI
from trainkit.cli.main import main

# A LightningCLI user's habits: a callback by its class name, not its import path.
SHORT_NAMES = """\
trainer:
  accelerator: cpu
  max_epochs: 3
  callbacks:
    - class_path: EarlyStopping
      init_args:
        monitor: val/loss
        patience: 2
model: {class_path: tests.helpers.Classifier, init_args: {lr: 0.2}}
data: {class_path: tests.helpers.BlobData}
"""

INTERPOLATED = """\
trainer:
  accelerator: cpu
  default_root_dir: runs/blobs-${model.init_args.features}-features
  callbacks:
    - class_path: trainkit.callbacks.EarlyStopping
      init_args:
        monitor: val/loss
        patience: ${trainer.max_epochs}
model: {class_path: tests.helpers.Classifier}
data: {class_path: tests.helpers.BlobData}
"""


# Class paths such as tests.helpers import from the repository root.
pytestmark = pytest.mark.usefixtures("at_repo_root")


def test_the_command_and_lightning_cli_read_a_file_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "short.yaml"
    config.write_text(SHORT_NAMES)
    ours = printed_config(capsys, "fit", str(config), "model.lr=0.3")
    with pytest.raises(SystemExit) as info:
        LightningCLI(args=["fit", f"--config={config}", "--model.lr=0.3", "--print_config"])
    assert info.value.code == 0
    theirs = yaml.safe_load(capsys.readouterr().out)
    for section in ("trainer", "model", "data", "ckpt_path"):
        assert ours[section] == theirs[section], section
    callback = ours["trainer"]["callbacks"][0]
    assert callback["class_path"] == "trainkit.callbacks.EarlyStopping"
    assert callback["init_args"]["patience"] == 2
    assert ours["model"]["init_args"] == {"features": 8, "classes": 3, "lr": 0.3}


def test_interpolations_see_the_overrides_and_the_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "interpolated.yaml"
    config.write_text(INTERPOLATED)
    run = printed_config(capsys, "fit", str(config), "trainer.max_epochs=4")
    assert run["trainer"]["default_root_dir"] == "runs/blobs-8-features"  # a default
    assert run["trainer"]["callbacks"][0]["init_args"]["patience"] == 4  # the override
    run = printed_config(capsys, "fit", str(config), "model.features=5", "trainer.max_epochs=2")
    assert run["trainer"]["default_root_dir"] == "runs/blobs-5-features"
    assert run["trainer"]["callbacks"][0]["init_args"]["patience"] == 2


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("trainer.max_epoch=3", "Unknown key 'trainer.max_epoch'. Did you mean 'max_epochs'?"),
        ("trainer.max_epochs=many", "'trainer.max_epochs' must be an integer or null, got 'many'"),
        ("model.init_args.lrr=0.1", "model.init_args do not fit Classifier"),
        ("model.class_path=tests.helpers.Clasifier", "Did you mean 'Classifier'?"),
        ("trainer.callbacks.0.init_args.patience=soon", "must be an integer, got 'soon' (str)"),
        ("model.lr=abc", "got 'abc' (str) (Classifier declares lr: float, default 0.1;"),
    ],
)
def test_a_mistake_in_a_printed_config_is_one_line_naming_the_key(
    override: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "interpolated.yaml"
    config.write_text(INTERPOLATED)
    assert main(["fit", str(config), override, "--print-config"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("trainkit: error: ") and captured.err.count("\n") == 1
    assert expected in captured.err, captured.err


def test_a_config_without_a_model_says_to_add_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The interpolation names a default: only the new engine gets as far as the model.
    no_model = tmp_path / "no-model.yaml"
    no_model.write_text(
        "trainer: {default_root_dir: 'runs/${trainer.max_steps}'}\n"
        "data: {class_path: tests.helpers.BlobData}\n"
    )
    assert main(["fit", str(no_model), "--print-config"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("trainkit: error: 'model' is required (the Module to train or")
    assert error.count("\n") == 1


def test_a_new_callback_list_replaces_the_old_one_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # jsonargparse alone would give the EarlyStopping the old ModelCheckpoint's mode: max.
    config = tmp_path / "short.yaml"
    config.write_text(
        SHORT_NAMES.replace("EarlyStopping", "ModelCheckpoint").replace("patience: 2", "mode: max")
    )
    new = "trainer.callbacks=[{class_path: EarlyStopping, init_args: {monitor: val/loss}}]"
    callback = printed_config(capsys, "fit", str(config), new)["trainer"]["callbacks"][0]
    assert callback["class_path"] == "trainkit.callbacks.EarlyStopping"
    assert callback["init_args"]["mode"] == "min"  # EarlyStopping's default
    entry = "trainer.callbacks.0={class_path: EarlyStopping, init_args: {monitor: val/loss}}"
    callback = printed_config(capsys, "fit", str(config), entry)["trainer"]["callbacks"][0]
    assert callback["init_args"]["mode"] == "min"

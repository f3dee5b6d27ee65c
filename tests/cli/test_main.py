"""The trainkit command: overrides, checks before training, runs, and saved configs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

import trainkit
from trainkit.checkpoint.files import load
from trainkit.cli.main import _save_config, main
from trainkit.trainer.options import trainer_docs, trainer_groups

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "tests" / "configs" / "blobs.yaml")


@pytest.fixture(autouse=True)
def _at_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # class paths such as tests.helpers import from here


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    return capsys.readouterr().err


def test_print_config_shows_overrides_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["fit", CONFIG, "trainer.max_epochs=7", "model.init_args.lr=0.5", "--print-config"])
        == 0
    )
    out = capsys.readouterr().out
    assert "max_epochs: 7" in out and "lr: 0.5" in out
    assert "log_every_n_steps: 50" in out  # a default, filled in
    assert "class_path: trainkit.callbacks.ModelCheckpoint" in out


def test_fit_then_evaluate_and_predict_from_the_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = f"trainer.default_root_dir={tmp_path}"
    assert main(["fit", CONFIG, root]) == 0
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert last.is_file()
    # The resolved config is saved beside the logs and inside the checkpoint.
    saved = (tmp_path / "logs" / "version_0" / "config.yaml").read_text()
    assert f"default_root_dir: {tmp_path}" in saved
    checkpoint = load(last)
    assert checkpoint["config"]["trainer"]["max_epochs"] == 2
    assert checkpoint["config"]["model"]["class_path"] == "tests.helpers.Classifier"
    capsys.readouterr()

    for command, key in (("validate", "val/acc"), ("test", "test/acc")):
        assert main([command, CONFIG, root, f"ckpt_path={last}"]) == 0
        printed = capsys.readouterr().out
        metrics = json.loads(printed[printed.index("{") :])
        assert metrics[key] > 0.5
    assert main(["predict", CONFIG, root, f"ckpt_path={last}"]) == 0
    predictions = list((tmp_path / "logs").glob("version_*/predictions.pt"))
    assert len(predictions) == 1
    assert len(torch.load(predictions[0], weights_only=True)) == 4  # 200 samples in 50s


def test_resume_from_the_command_line(tmp_path: Path) -> None:
    root = f"trainer.default_root_dir={tmp_path}"
    assert main(["fit", CONFIG, root, "trainer.max_epochs=1"]) == 0
    assert main(["fit", CONFIG, root, "trainer.max_epochs=3", "ckpt_path=last"]) == 0
    assert load(tmp_path / "checkpoints" / "last.ckpt")["loop"]["epoch"] == 3
    # The resumed run kept logging to the same version.
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["version_0"]


def test_a_module_built_from_the_config_loads_from_its_checkpoint(tmp_path: Path) -> None:
    from tests.cli.lightning_main import Encoder, InjectedModel

    config = tmp_path / "injected.yaml"
    config.write_text(
        "trainer: {max_epochs: 1, enable_progress_bar: false, enable_model_summary: false}\n"
        "model:\n"
        "  class_path: tests.cli.lightning_main.InjectedModel\n"
        "  init_args:\n"
        "    encoder: {class_path: tests.cli.lightning_main.Encoder, init_args: {width: 6}}\n"
        "data: {class_path: tests.cli.lightning_main.TinyData}\n"
    )
    assert main(["fit", str(config), f"trainer.default_root_dir={tmp_path}"]) == 0
    checkpoint = load(tmp_path / "checkpoints" / "last.ckpt")
    assert checkpoint["hyper_parameters"] == {
        "_class_path": "tests.cli.lightning_main.InjectedModel",
        "encoder": {
            "class_path": "tests.cli.lightning_main.Encoder",
            "init_args": {"features": 4, "width": 6},
        },
        "lr": 0.1,
        "_instantiator": "trainkit.core.loading.instantiate_module",
    }
    with pytest.warns(UserWarning, match="eval mode"):
        loaded = InjectedModel.load_from_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert isinstance(loaded.encoder, Encoder) and loaded.encoder.layer.out_features == 6
    assert torch.equal(loaded.head.weight, checkpoint["state_dict"]["head.weight"])


def test_unknown_key_names_the_valid_keys_and_the_closest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _error(capsys, "fit", CONFIG, "trainer.max_epoch=3")
    assert "Unknown key 'trainer.max_epoch'. Did you mean 'max_epochs'?" in err
    assert "Valid keys of trainer: accelerator, accumulate_grad_batches," in err
    err = _error(capsys, "fit", CONFIG, "modle.init_args.lr=1")
    assert "Unknown key 'modle'. Did you mean 'model'?" in err


def test_wrong_type_names_the_key_the_type_and_the_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _error(capsys, "fit", CONFIG, "trainer.max_epochs=many")
    assert "'trainer.max_epochs' must be an integer or null, got 'many' (str)." in err
    err = _error(capsys, "fit", CONFIG, "trainer.enable_progress_bar=3")
    assert "'trainer.enable_progress_bar' must be a boolean or null, got 3 (int)." in err


def test_missing_file_and_bad_class_paths(capsys: pytest.CaptureFixture[str]) -> None:
    assert "Config file nowhere.yaml does not exist." in _error(capsys, "fit", "nowhere.yaml")
    err = _error(capsys, "fit", CONFIG, "model.class_path=tests.helprs.Classifier")
    assert "model: cannot import module 'tests.helprs'" in err
    err = _error(capsys, "fit", CONFIG, "model.class_path=tests.helpers.Clasifier")
    assert "module 'tests.helpers' has no class 'Clasifier'. Did you mean 'Classifier'?" in err
    err = _error(capsys, "fit", CONFIG, "model.init_args.lrr=0.1")
    assert "model.init_args do not fit Classifier" in err and "Did you mean 'lr'?" in err
    err = _error(capsys, "fit", CONFIG, "trainer.callbacks=[{class_path: nope}]")
    assert "trainer.callbacks[0]: class_path 'nope' must be a full import path" in err


def test_a_short_class_name_two_imported_classes_have_names_both(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from trainkit.lightning.loggers import CSVLogger  # subclasses trainkit's, same name

    assert issubclass(CSVLogger, trainkit.loggers.CSVLogger)
    err = _error(capsys, "fit", CONFIG, "trainer.logger={class_path: CSVLogger}")
    assert err.count("\n") == 1
    assert (
        "trainer.logger: class_path 'CSVLogger' names more than one imported class "
        "(trainkit.loggers.CSVLogger, trainkit.lightning.loggers.CSVLogger); write the full "
        "import path of the one you mean, e.g. trainkit.loggers.CSVLogger." in err
    )


def test_errors_come_before_any_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _error(capsys, "fit", CONFIG, f"trainer.default_root_dir={tmp_path}", "data.init_args.bs=3")
    assert not any(tmp_path.iterdir())


def test_help_lists_commands_and_trainer_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert all(command in out for command in ("fit", "validate", "test", "predict"))
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    out = capsys.readouterr().out
    assert "--trainer.max_epochs" in out and "Stop after this many epochs" in out
    assert "--trainer.accumulate_grad_batches" in out


@pytest.mark.parametrize("command", ["fit", "validate", "test", "predict"])
def test_help_documents_every_trainer_option_in_plain_text(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    text = " ".join(out.split())  # undo the wrapping
    names = [name for group in trainer_groups().values() for name in group]
    assert names == list(trainer_docs())
    for name in names:
        # Each option once, its documentation, then the engine's type and default.
        assert len(re.findall(rf"^  --trainer\.{name}[ ,]", out, re.M)) == 1, name
        doc = " ".join(trainer_docs()[name].split())
        assert re.search(re.escape(doc) + r" \(type: [^)]*default: ", text), name
    for section in ("trainer:", "model:", "data:", f"{command}: the arguments of Trainer"):
        assert f"\n{section}" in out
    assert "--ckpt_path" in out and "``" not in out and ":class:" not in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"trainkit {trainkit.__version__}\n"
    declared = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert declared is not None and declared.group(1) == trainkit.__version__


def test_saved_config_never_overwrites_a_different_one(tmp_path: Path) -> None:
    folder = tmp_path / "logs" / "version_0"
    assert _save_config("a: 1\n", folder) == folder / "config.yaml"
    assert _save_config("a: 1\n", folder) == folder / "config.yaml"  # the same config
    assert _save_config("a: 2\n", folder) == folder / "config-1.yaml"
    assert _save_config("a: 3\n", folder) == folder / "config-2.yaml"
    assert (folder / "config.yaml").read_text() == "a: 1\n"
    assert sorted(p.name for p in folder.iterdir()) == [
        "config-1.yaml",
        "config-2.yaml",
        "config.yaml",
    ]  # and no temporary files left behind


def test_python_dash_m_runs_the_same_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trainkit", "fit", CONFIG, "--print-config"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "class_path: tests.helpers.Classifier" in result.stdout


def test_ddp_over_two_processes_from_the_command_line(tmp_path: Path) -> None:
    # A subprocess: the launcher re-runs the command line for rank 1, and inside
    # pytest that command line would be pytest itself.
    command = [
        sys.executable,
        "-m",
        "trainkit",
        "fit",
        CONFIG,
        "trainer.devices=2",
        "trainer.strategy=ddp",
        f"trainer.default_root_dir={tmp_path}",
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["version_0"]
    checkpoint = load(tmp_path / "checkpoints" / "last.ckpt")
    # 512 samples, 32 per rank and step, 2 ranks: 8 steps an epoch, 2 epochs.
    assert checkpoint["loop"]["global_step"] == 16
    assert checkpoint["config"]["trainer"]["strategy"] == "ddp"


def test_a_resume_under_another_config_lists_the_keys_and_refuses_what_changes_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = f"trainer.default_root_dir={tmp_path}"
    assert main(["fit", CONFIG, root, "trainer.max_epochs=1"]) == 0
    capsys.readouterr()
    changed = ["model.init_args.lr=0.5", "data.init_args.batch_size=16"]
    assert main(["fit", CONFIG, root, *changed, "ckpt_path=last"]) == 2
    error = capsys.readouterr().err
    saved = tmp_path / "logs" / "version_0" / "checkpoints" / "last.ckpt"
    assert error.startswith(f"trainkit: error: {saved} was saved with another config")
    assert "data.init_args.batch_size: 32 -> 16; model.init_args.lr: 0.1 -> 0.5" in error
    assert "--force-resume" in error and error.count("\n") == 1
    assert load(saved)["loop"]["epoch"] == 1  # nothing was trained or written
    # Asked for, the resume goes ahead and names the differences.
    with pytest.warns(UserWarning, match=r"model.init_args.lr: 0.1 -> 0.5"):
        assert main(["fit", CONFIG, root, *changed, "ckpt_path=last", "--force-resume"]) == 0
    assert load(saved)["loop"]["epoch"] == 2


def test_resume_mismatch_in_the_config_says_what_a_mismatched_resume_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = f"trainer.default_root_dir={tmp_path}"
    assert main(["fit", CONFIG, root, "trainer.max_epochs=1"]) == 0
    capsys.readouterr()
    changed = [root, "model.init_args.lr=0.5", "ckpt_path=last"]
    error = _error(capsys, "fit", CONFIG, *changed, "trainer.resume_mismatch=error")
    assert "model.init_args.lr: 0.1 -> 0.5" in error
    # warn: as --force-resume; one warning (the command's), not one from the Trainer too.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        argv = ["fit", CONFIG, *changed, "trainer.max_epochs=2", "trainer.resume_mismatch=warn"]
        assert main(argv) == 0
    said = [str(w.message) for w in caught if "model.init_args.lr: 0.1 -> 0.5" in str(w.message)]
    assert len(said) == 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        argv = ["fit", CONFIG, *changed, "trainer.max_epochs=3", "trainer.resume_mismatch=ignore"]
        assert main(argv) == 0
    assert not [w for w in caught if "model.init_args.lr" in str(w.message)]
    capsys.readouterr()
    assert main(["fit", CONFIG, root, "trainer.resume_mismatch=eror", "--print-config"]) == 2
    assert "Did you mean 'error'" in capsys.readouterr().err


def test_a_longer_run_blocks_a_resume_only_when_an_lr_schedule_was_built_for_the_saved_length() -> (
    None
):
    from trainkit.checkpoint.resume_check import resume_differences

    saved = {"trainer": {"max_epochs": 1, "enable_progress_bar": False}, "ckpt_path": None}
    current = {"trainer": {"max_epochs": 3, "enable_progress_bar": True}, "ckpt_path": "last"}
    assert resume_differences(saved, current, has_schedule=True) == (
        ["trainer.max_epochs: 1 -> 3"],
        ["trainer.enable_progress_bar: False -> True"],
    )
    assert resume_differences(saved, current, has_schedule=False) == (
        [],
        ["trainer.enable_progress_bar: False -> True", "trainer.max_epochs: 1 -> 3"],
    )


def test_a_corrupt_checkpoint_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = tmp_path / "damaged.ckpt"
    damaged.write_bytes(b"not a checkpoint")
    root = f"trainer.default_root_dir={tmp_path}"
    error = _error(capsys, "fit", CONFIG, root, f"ckpt_path={damaged}")
    assert error.startswith(f"trainkit: error: Checkpoint {damaged} (16 bytes) cannot be read")
    assert error.count("\n") == 1

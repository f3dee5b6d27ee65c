"""The trainkit command's errors: a user's mistake is one line and exit 2, and nothing runs.

The table runs the command in this process (fast); two subprocess tests check
what a user's terminal really shows: no traceback by default, the traceback
with ``--traceback`` or ``TRAINKIT_DEBUG=1``, and a traceback (exit 1) for an
exception raised by the user's own code.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers import repo_env
from trainkit.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "tests" / "configs" / "blobs.yaml")
NO_GPU = not torch.cuda.is_available()


@pytest.fixture(autouse=True)
def _at_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # class paths such as tests.helpers import from here


def _file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# (id, arguments after "fit" (a callable of tmp_path), what the message must contain)
MISTAKES = [
    (
        "bad YAML syntax",
        lambda t: [_file(t, "bad.yaml", "trainer:\n  max_epochs: 1\n   x: [\n")],
        "invalid YAML at line 3, column 5",
    ),
    (
        "an empty config",
        lambda t: [_file(t, "empty.yaml", "")],
        "'model' is required (the Module to train or evaluate; add model: {class_path: ",
    ),
    ("unknown key", lambda t: [CONFIG, "trainer.max_epoch=3"], "Did you mean 'max_epochs'?"),
    (
        "wrong type",
        lambda t: [CONFIG, "trainer.max_epochs=many"],
        "'trainer.max_epochs' must be an integer or null, got 'many' (str)",
    ),
    (
        "max_epochs below -1",
        lambda t: [CONFIG, "trainer.max_epochs=-2"],
        "trainer.max_epochs=-2 is invalid: it must be >= -1 (-1 for no limit)",
    ),
    (
        "no devices",
        lambda t: [CONFIG, "trainer.devices=0"],
        "trainer.devices=0 must be at least 1",
    ),
    (
        "misspelled strategy",
        lambda t: [CONFIG, "trainer.strategy=dpp"],
        "Unknown strategy trainer.strategy='dpp'. Did you mean 'dp' or 'ddp'?",
    ),
    (
        "unknown profiler",
        lambda t: [CONFIG, "trainer.profiler=fancy"],
        "profiler='fancy' is not a profiler: pass 'simple', 'advanced' or 'pytorch'",
    ),
    (
        "accelerator=gpu without a GPU",
        lambda t: [CONFIG, "trainer.accelerator=gpu"],
        "CUDA is not available on this machine",
    ),
    (
        "accelerator=cuda without a GPU",
        lambda t: [CONFIG, "trainer.accelerator=cuda"],
        "CUDA is not available on this machine",
    ),
    (
        "missing ckpt_path file",
        lambda t: [CONFIG, f"ckpt_path={t / 'nope.ckpt'}"],
        "nope.ckpt does not exist (give the path of a checkpoint file, or ckpt_path=last",
    ),
    (
        "corrupt checkpoint",
        lambda t: [CONFIG, f"ckpt_path={_file(t, 'damaged.ckpt', 'not a checkpoint')}"],
        "damaged.ckpt (16 bytes) cannot be read",
    ),
    (
        "config without model",
        lambda t: [_file(t, "no-model.yaml", "data: {class_path: tests.helpers.BlobData}\n")],
        "'model' is required (the Module to train or evaluate; add model: {class_path: ",
    ),
    (
        "a config that is not a mapping",
        lambda t: [_file(t, "list.yaml", "- trainer\n- model\n")],
        "must hold a mapping with trainer/model/data keys",
    ),
    (
        "config without data",
        lambda t: [_file(t, "no-data.yaml", "model: {class_path: tests.helpers.Classifier}\n")],
        "The config has no data section and Classifier defines no train_dataloader()",
    ),
    (
        "bad class_path module",
        lambda t: [CONFIG, "model.class_path=tests.helprs.Classifier"],
        "model: cannot import module 'tests.helprs'",
    ),
    (
        "bad class_path class",
        lambda t: [CONFIG, "model.class_path=tests.helpers.Clasifier"],
        "has no class 'Clasifier'. Did you mean 'Classifier'?",
    ),
    (
        "model.init_args.lr=abc",
        lambda t: [CONFIG, "model.init_args.lr=abc"],
        "'model.init_args.lr' must be a number, got 'abc' (str) (Classifier declares lr: float",
    ),
    (
        "unknown init_args name",
        lambda t: [CONFIG, "data.init_args.batchsize=3"],
        "Did you mean 'batch_size'?",
    ),
    (
        "a Literal that does not match",
        lambda t: [CONFIG, "trainer.callbacks.0.init_args.save_last=lnk"],
        "must be a boolean or one of 'link' or null, got 'lnk' (str)",
    ),
    (
        "a missing required init_arg",
        lambda t: [CONFIG, "trainer.logger=[{class_path: trainkit.loggers.CSVLogger}]"],
        "missing a required argument: 'save_dir'. Set trainer.logger[0].init_args.save_dir.",
    ),
    ("missing config file", lambda t: ["nowhere.yaml"], "Config file nowhere.yaml does not exist."),
    ("no config file at all", lambda t: ["trainer.max_epochs=1"], "No config file given"),
    (
        "list index out of range",
        lambda t: [CONFIG, "trainer.callbacks.3.init_args.monitor=val/loss"],
        "'trainer.callbacks' has 1 entry, so index 3 is out of range",
    ),
    (
        "callback class not in the list",
        lambda t: [CONFIG, "trainer.callbacks.EarlyStopping.patience=3"],
        "No entry of 'trainer.callbacks' has the class 'EarlyStopping'",
    ),
    (
        "override value that is not YAML",
        lambda t: [CONFIG, "trainer.devices=[0,"],
        "Override 'trainer.devices=[0,': the value is not valid YAML",
    ),
    (
        "LightningCLI flag without its value",
        lambda t: [CONFIG, "--trainer.max_epochs"],
        "--trainer.max_epochs needs a value",
    ),
    ("an unknown flag", lambda t: [CONFIG, "--max-epochs=3"], "unrecognized arguments"),
    (
        "ckpt_path=best from the command line",
        lambda t: [CONFIG, "ckpt_path=best"],
        "ckpt_path=best names the best checkpoint of a fit in the same Trainer",
    ),
]


def _cases() -> list[object]:
    needs_no_gpu = pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
    return [
        pytest.param(arguments, expected, id=name, marks=[needs_no_gpu] if "GPU" in name else [])
        for name, arguments, expected in MISTAKES
    ]


@pytest.mark.parametrize(("arguments", "expected"), _cases())
def test_a_user_mistake_is_one_error_line_and_exit_2_and_nothing_runs(
    arguments: object,
    expected: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "root"
    argv = ["fit", f"trainer.default_root_dir={root}", *arguments(tmp_path)]  # type: ignore[operator]
    assert main(argv) == 2
    captured = capsys.readouterr()
    output = captured.out + captured.err
    lines = [line for line in output.splitlines() if "trainkit: error:" in line]
    assert len(lines) == 1, output
    assert lines[0].startswith("trainkit: error: ")
    assert expected in lines[0], lines[0]
    assert "Traceback" not in output
    assert not root.exists()  # nothing was built, trained or written


def test_the_table_covers_a_dozen_mistakes() -> None:
    assert len(MISTAKES) >= 12


def test_max_epochs_minus_one_means_no_limit_and_is_not_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        main(["fit", CONFIG, "trainer.max_epochs=-1", "trainer.max_steps=3", "--print-config"]) == 0
    )
    assert "max_epochs: -1" in capsys.readouterr().out


def test_a_resume_mismatch_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = f"trainer.default_root_dir={tmp_path}"
    assert main(["fit", CONFIG, root, "trainer.max_epochs=1"]) == 0
    capsys.readouterr()
    assert main(["fit", CONFIG, root, "model.init_args.lr=0.5", "ckpt_path=last"]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("trainkit: error:") == 1
    assert "model.init_args.lr: 0.1 -> 0.5" in captured.err
    assert "Traceback" not in captured.out + captured.err


def _command(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**repo_env(), **(env or {})}
    environ.pop("TRAINKIT_DEBUG", None) if env is None else None
    return subprocess.run(
        [sys.executable, "-m", "trainkit", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env=environ,
    )


def test_a_terminal_shows_one_line_and_the_traceback_only_when_asked(tmp_path: Path) -> None:
    bad = _file(tmp_path, "bad.yaml", "trainer:\n  max_epochs: 1\n   x: [\n")
    plain = _command("fit", bad)
    assert plain.returncode == 2
    assert plain.stdout == ""
    assert plain.stderr.startswith("trainkit: error: Cannot read")
    assert plain.stderr.count("\n") == 1 and "Traceback" not in plain.stderr
    for shown in (
        _command("--traceback", "fit", bad),
        _command("fit", bad, env={"TRAINKIT_DEBUG": "1"}),
    ):
        assert shown.returncode == 2
        assert "Traceback (most recent call last)" in shown.stderr
        assert "yaml.scanner.ScannerError" in shown.stderr
        assert shown.stderr.splitlines()[-1].startswith("trainkit: error: Cannot read")


def test_an_exception_from_the_users_code_keeps_its_traceback(tmp_path: Path) -> None:
    # A model whose training_step fails: a bug to debug, not a config mistake.
    (tmp_path / "broken_model.py").write_text(
        "from tests.helpers import Classifier\n\n"
        "class Broken(Classifier):\n"
        "    def training_step(self, batch, batch_idx):\n"
        "        raise ValueError('a bug in my training_step')\n"
    )
    result = _command(
        "fit",
        CONFIG,
        "model.class_path=broken_model.Broken",
        f"trainer.default_root_dir={tmp_path / 'root'}",
        env={"PYTHONPATH": repo_env(tmp_path)["PYTHONPATH"]},
    )
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "ValueError: a bug in my training_step" in result.stderr
    assert "trainkit: error:" not in result.stderr

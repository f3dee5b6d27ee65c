"""Tests shared by the tracker loggers: optional packages, cheap imports, the CLI config."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import repo_env
from trainkit.loggers import MLflowLogger, WandbLogger

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("logger", "package"), [(MLflowLogger, "mlflow"), (WandbLogger, "wandb")])
def test_a_missing_package_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, logger: Any, package: str
) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == package else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.delitem(sys.modules, package, raising=False)  # imported by another test
    with pytest.raises(ModuleNotFoundError, match=rf'pip install "trainkit\[{package}\]"'):
        logger()


def test_import_does_not_load_mlflow_or_wandb() -> None:
    code = "import sys, trainkit.loggers\nprint([m in sys.modules for m in ('mlflow', 'wandb')])"
    env = repo_env()
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[False, False]"


def test_trainkit_fit_logs_to_mlflow_from_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from trainkit.cli.main import main

    monkeypatch.chdir(REPO_ROOT)  # tests.helpers, named in the config, imports from here
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    store = tmp_path / "mlruns"
    config = (REPO_ROOT / "tests" / "configs" / "blobs.yaml").read_text()
    config = config.replace(
        "trainer:\n",
        "trainer:\n  max_epochs: 1\n  logger:\n    - class_path: trainkit.loggers.MLflowLogger\n"
        f"      init_args: {{experiment_name: cli, save_dir: '{store}'}}\n",
        1,
    ).replace("  max_epochs: 2\n", "")
    (tmp_path / "mlflow.yaml").write_text(config)

    assert main(["fit", str(tmp_path / "mlflow.yaml"), f"trainer.default_root_dir={tmp_path}"]) == 0
    client = MlflowClient(tracking_uri=store.as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("cli").experiment_id])
    assert run.data.params["lr"] == "0.1"
    assert "val/acc" in run.data.metrics
    # The run's checkpoints and saved config live in the run's folder of the store.
    folder = store / run.info.experiment_id / run.info.run_id
    assert (folder / "checkpoints" / "last.ckpt").is_file()
    assert (folder / "config.yaml").is_file()


def test_a_tracker_package_a_test_put_in_sys_modules_counts_as_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Projects fake wandb or mlflow with a bare module (no __spec__, so find_spec raises).
    import types

    from trainkit.loggers._tracking import require_package

    monkeypatch.setitem(sys.modules, "fake_tracker", types.ModuleType("fake_tracker"))
    require_package("fake_tracker", "wandb", "WandbLogger")
    with pytest.raises(ModuleNotFoundError, match=r'pip install "trainkit\[wandb\]"'):
        require_package("no_such_tracker_package", "wandb", "WandbLogger")

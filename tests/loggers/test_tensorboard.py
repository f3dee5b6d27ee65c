"""Tests for TensorBoardLogger: event files, hparams, version folders, laziness."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

from trainkit.loggers import TensorBoardLogger, _files

REPO_ROOT = Path(__file__).resolve().parents[2]


def _scalars(log_dir: str, tag: str) -> list[tuple[int, float]]:
    accumulator = EventAccumulator(log_dir)
    accumulator.Reload()
    return [(event.step, event.value) for event in accumulator.Scalars(tag)]


def test_metrics_are_readable_from_event_file(tmp_path: Path) -> None:
    logger = TensorBoardLogger(tmp_path)
    for step, value in [(0, 1.0), (10, 0.5), (20, 0.25)]:
        logger.log_metrics({"loss": value, "acc": 1 - value}, step=step)
    logger.finalize("success")

    loss = _scalars(logger.log_dir, "loss")
    assert [step for step, _ in loss] == [0, 10, 20]
    assert [value for _, value in loss] == pytest.approx([1.0, 0.5, 0.25])
    assert [step for step, _ in _scalars(logger.log_dir, "acc")] == [0, 10, 20]


def test_hyperparams_yaml_and_hparams_tab(tmp_path: Path) -> None:
    logger = TensorBoardLogger(tmp_path)
    params = {"optim": {"lr": 0.1, "betas": [0.9, 0.99]}, "layers": 3, "act": None, "obj": object}
    logger.log_hyperparams(params)
    logger.finalize("success")

    with open(os.path.join(logger.log_dir, "hparams.yaml")) as file:
        saved = yaml.safe_load(file)
    assert saved == {**params, "obj": str(object)}
    assert not [name for name in os.listdir(logger.log_dir) if name.endswith(".tmp")]

    accumulator = EventAccumulator(logger.log_dir)
    accumulator.Reload()
    content = accumulator.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    hparams = HParamsPluginData.FromString(content).session_start_info.hparams
    assert hparams["optim/lr"].number_value == pytest.approx(0.1)
    assert hparams["optim/betas"].string_value == "[0.9, 0.99]"
    assert hparams["layers"].number_value == 3
    assert hparams["act"].string_value == "None"


def test_two_loggers_get_distinct_versions(tmp_path: Path) -> None:
    first, second = TensorBoardLogger(tmp_path), TensorBoardLogger(tmp_path)
    assert (first.version, second.version) == (0, 1)
    assert first.log_dir == os.path.join(tmp_path, "logs", "version_0")
    assert os.path.isdir(second.log_dir)


def test_existing_version_folder_is_left_alone(tmp_path: Path) -> None:
    existing = tmp_path / "logs" / "version_0"
    existing.mkdir(parents=True)
    (existing / "notes.txt").write_text("mine")

    logger = TensorBoardLogger(tmp_path)
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.finalize("success")

    assert logger.version == 1
    assert os.listdir(existing) == ["notes.txt"]
    assert (existing / "notes.txt").read_text() == "mine"


def test_version_claim_survives_a_stale_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another process created version_0 after our scan: the claim must move on.
    (tmp_path / "logs" / "version_0").mkdir(parents=True)
    monkeypatch.setattr(os, "listdir", lambda path: [])
    assert TensorBoardLogger(tmp_path).version == 1


def test_concurrent_claims_get_distinct_versions(tmp_path: Path) -> None:
    root = str(tmp_path / "logs")
    with ThreadPoolExecutor(max_workers=16) as pool:
        claimed = list(pool.map(lambda _: _files._claim_version_dir(root, None), range(32)))
    assert sorted(version for version, _ in claimed) == list(range(32))


def test_explicit_version_is_reused_and_appended(tmp_path: Path) -> None:
    first = TensorBoardLogger(tmp_path, version=0)
    first.log_metrics({"loss": 1.0}, step=0)
    first.finalize("interrupted")

    resumed = TensorBoardLogger(tmp_path, version=0)
    resumed.log_metrics({"loss": 0.5}, step=1)
    resumed.finalize("success")

    assert resumed.log_dir == first.log_dir
    assert _scalars(resumed.log_dir, "loss") == [(0, 1.0), (1, 0.5)]


def test_string_version_names_the_folder(tmp_path: Path) -> None:
    logger = TensorBoardLogger(tmp_path, name="exp", version="baseline")
    assert logger.log_dir == os.path.join(tmp_path, "exp", "baseline")
    assert os.path.isdir(logger.log_dir)


def test_constructing_creates_nothing(tmp_path: Path) -> None:
    logger = TensorBoardLogger(tmp_path / "runs")
    logger.save()
    logger.finalize("success")
    assert not (tmp_path / "runs").exists()


def test_log_after_finalize_reopens_writer(tmp_path: Path) -> None:
    logger = TensorBoardLogger(tmp_path)
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.finalize("success")
    logger.finalize("success")  # idempotent
    logger.log_metrics({"loss": 0.5}, step=1)
    logger.save()

    assert logger.version == 0
    assert _scalars(logger.log_dir, "loss") == [(0, 1.0), (1, 0.5)]
    logger.finalize("success")


def test_import_does_not_load_tensorboard() -> None:
    # yaml too: the loggers import it lazily, and torch itself does not pull it in.
    code = "import sys, trainkit.loggers\nfor m in ('tensorboard', 'yaml'): print(m in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["False", "False"]

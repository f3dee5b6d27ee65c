"""Tests for CSVLogger: rows, widening headers, buffering, versions."""

from __future__ import annotations

import argparse
import csv
import os
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.loggers import CSVLogger, TensorBoardLogger


def _read(logger: CSVLogger) -> tuple[list[str], list[dict[str, str]]]:
    with open(os.path.join(logger.log_dir, "metrics.csv"), newline="") as file:
        reader = csv.DictReader(file)
        return list(reader.fieldnames or []), list(reader)


def test_rows_and_columns(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path)
    logger.log_metrics({"loss": 1.0, "acc": 0.5}, step=0)
    logger.log_metrics({"loss": 0.5, "acc": 0.75}, step=10)
    logger.save()

    columns, rows = _read(logger)
    assert columns == ["acc", "loss", "step"]  # alphabetical, as Lightning writes them
    assert rows == [
        {"step": "0", "loss": "1.0", "acc": "0.5"},
        {"step": "10", "loss": "0.5", "acc": "0.75"},
    ]


def test_rows_are_buffered_until_save(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path)
    logger.log_metrics({"loss": 1.0}, step=0)
    assert not (Path(logger.log_dir) / "metrics.csv").exists()
    logger.finalize("success")
    assert _read(logger)[1] == [{"step": "0", "loss": "1.0"}]


def test_new_metric_widens_header_and_keeps_old_rows(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path)
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.save()
    logger.log_metrics({"loss": 0.5, "val_acc": 0.9}, step=1)
    logger.log_metrics({"loss": 0.25}, step=2)
    logger.save()

    columns, rows = _read(logger)
    assert columns == ["loss", "step", "val_acc"]
    assert rows == [
        {"step": "0", "loss": "1.0", "val_acc": ""},
        {"step": "1", "loss": "0.5", "val_acc": "0.9"},
        {"step": "2", "loss": "0.25", "val_acc": ""},
    ]
    assert not [name for name in os.listdir(logger.log_dir) if name.endswith(".tmp")]


def test_save_twice_does_not_duplicate_rows(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path)
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.save()
    logger.save()
    logger.log_metrics({"loss": 0.5}, step=1)
    logger.save()
    logger.finalize("success")

    assert [row["step"] for row in _read(logger)[1]] == ["0", "1"]


def test_resumed_run_appends_to_existing_file(tmp_path: Path) -> None:
    first = CSVLogger(tmp_path, version=0)
    first.log_metrics({"loss": 1.0}, step=0)
    first.finalize("interrupted")

    resumed = CSVLogger(tmp_path, version=0)
    resumed.log_metrics({"loss": 0.5, "lr": 0.1}, step=1)
    resumed.finalize("success")

    columns, rows = _read(resumed)
    assert columns == ["loss", "lr", "step"]
    assert [(row["step"], row["loss"], row["lr"]) for row in rows] == [
        ("0", "1.0", ""),
        ("1", "0.5", "0.1"),
    ]


def test_a_file_in_first_use_column_order_is_rewritten_in_alphabetical_order(
    tmp_path: Path,
) -> None:
    # As an older trainkit wrote it: step first, then the metrics as they came.
    folder = tmp_path / "logs" / "version_0"
    folder.mkdir(parents=True)
    (folder / "metrics.csv").write_text("step,loss,acc\n0,1.0,0.5\n")
    resumed = CSVLogger(tmp_path, version=0)
    resumed.log_metrics({"loss": 0.5, "acc": 0.75}, step=1)
    resumed.finalize("success")
    assert _read(resumed) == (
        ["acc", "loss", "step"],
        [{"acc": "0.5", "loss": "1.0", "step": "0"}, {"acc": "0.75", "loss": "0.5", "step": "1"}],
    )


def test_versions_and_existing_folder(tmp_path: Path) -> None:
    existing = tmp_path / "logs" / "version_0"
    existing.mkdir(parents=True)
    (existing / "metrics.csv").write_text("not mine to touch")

    first, second = CSVLogger(tmp_path), CSVLogger(tmp_path)
    first.log_metrics({"loss": 1.0}, step=0)
    first.save()
    assert (first.version, second.version) == (1, 2)
    assert (existing / "metrics.csv").read_text() == "not mine to touch"


def test_hyperparams_yaml(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path)
    logger.log_hyperparams({"optim": {"lr": 0.1}, "seed": 7})
    with open(os.path.join(logger.log_dir, "hparams.yaml")) as file:
        assert yaml.safe_load(file) == {"optim": {"lr": 0.1}, "seed": 7}
    # An argparse Namespace, as scripts pass their parsed arguments to Lightning's loggers.
    logger.log_hyperparams(argparse.Namespace(batch_size=32))
    with open(os.path.join(logger.log_dir, "hparams.yaml")) as file:
        assert yaml.safe_load(file) == {"optim": {"lr": 0.1}, "seed": 7, "batch_size": 32}


def test_hyperparams_yaml_keeps_omegaconf_lists_as_lists(tmp_path: Path) -> None:
    # save_hyperparameters(DictConfig) leaves its lists as ListConfigs among the values.
    from omegaconf import OmegaConf

    config = OmegaConf.create({"target": ["price"], "embedding_dims": [[5, 3]], "lr": 0.1})
    logger = CSVLogger(tmp_path)
    logger.log_hyperparams(dict(config.items()))
    with open(os.path.join(logger.log_dir, "hparams.yaml")) as file:
        assert yaml.safe_load(file) == {"target": ["price"], "embedding_dims": [[5, 3]], "lr": 0.1}


def test_rows_logged_without_a_step_are_numbered_as_lightning_numbers_them(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path)
    logger.log_metrics({"test/acc": 0.5})
    logger.log_metrics({"test/acc": 0.75})
    logger.save()
    assert [row["step"] for row in _read(logger)[1]] == ["0", "1"]


def test_prefix_goes_in_front_of_every_metric_name(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path, prefix="train")
    logger.log_metrics({"loss": 1.0, "epoch": 0}, step=0)  # an int stays one, as in Lightning
    logger.save()
    assert _read(logger) == (
        ["step", "train-epoch", "train-loss"],
        [{"step": "0", "train-loss": "1.0", "train-epoch": "0"}],
    )


def test_a_string_value_is_written_as_it_is(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path)  # as Lightning's: the file holds any value
    logger.log_metrics({"loss": 1.0, "tag": "blue"}, step=0)
    logger.save()
    assert _read(logger) == (["loss", "step", "tag"], [{"loss": "1.0", "step": "0", "tag": "blue"}])


def test_rows_reach_the_file_every_flush_logs_every_n_steps(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path, flush_logs_every_n_steps=2)
    logger.log_metrics({"loss": 1.0}, step=0)
    assert not (Path(logger.log_dir) / "metrics.csv").exists()  # (0 + 1) % 2: kept
    logger.log_metrics({"loss": 0.5}, step=1)  # (1 + 1) % 2 == 0: written, no save() needed
    assert [row["loss"] for row in _read(logger)[1]] == ["1.0", "0.5"]


def test_flush_logs_every_n_steps_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"flush_logs_every_n_steps=0\) must be at least 1"):
        CSVLogger(tmp_path, flush_logs_every_n_steps=0)


def test_no_name_puts_the_versions_straight_into_save_dir(tmp_path: Path) -> None:
    for name in (None, ""):
        logger = CSVLogger(tmp_path / str(name), name=name)
        logger.log_metrics({"loss": 1.0}, step=0)
        logger.save()
        assert logger.log_dir == str(tmp_path / str(name) / "version_0")
        assert (tmp_path / str(name) / "version_0" / "metrics.csv").is_file()


def test_experiment_writes_the_runs_files_under_lightnings_names(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path, name="exp")
    experiment = logger.experiment
    experiment.log_metrics({"loss": 0.5})  # step: the rows waiting (0)
    experiment.log_metrics({"loss": 0.25}, step=7)
    assert [row["step"] for row in experiment.metrics] == [0, 7]
    experiment.save()
    assert experiment.metrics == []
    assert experiment.metrics_file_path == os.path.join(logger.log_dir, "metrics.csv")
    with open(experiment.metrics_file_path, newline="") as file:
        assert [row["loss"] for row in csv.DictReader(file)] == ["0.5", "0.25"]
    experiment.log_hparams({"lr": 0.1})
    hparams = os.path.join(experiment.log_dir, experiment.NAME_HPARAMS_FILE)
    with open(hparams) as file:
        assert yaml.safe_load(file) == {"lr": 0.1}


def test_a_writer_of_its_own_continues_a_file_and_keeps_every_hyperparameter(
    tmp_path: Path,
) -> None:
    from trainkit.lightning.loggers.csv_logs import ExperimentWriter

    folder = tmp_path / "run"
    writer = ExperimentWriter(folder)
    assert not folder.exists()  # nothing is made before the first write
    writer.log_metrics({"loss": torch.tensor(0.5)}, step=3)  # a tensor is written as a number
    writer.log_metrics({"acc": 0.75})
    assert writer.metrics_keys == ["acc", "loss", "step"]
    writer.save()
    writer.log_hparams({"lr": 0.1})
    writer.log_hparams({"layers": {"hidden": 32}})  # added to, not replacing, the first
    with open(folder / "hparams.yaml") as file:
        assert yaml.safe_load(file) == {"lr": 0.1, "layers": {"hidden": 32}}
    # A second writer of the same folder (a resumed run) continues the file.
    again = ExperimentWriter(folder)
    again.log_metrics({"loss": 0.25}, step=4)
    again.save()
    with open(folder / "metrics.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    assert rows == [
        {"step": "3", "loss": "0.5", "acc": ""},
        {"step": "1", "loss": "", "acc": "0.75"},
        {"step": "4", "loss": "0.25", "acc": ""},
    ]


def test_a_subclass_returning_its_own_writer_gets_every_write(tmp_path: Path) -> None:
    from trainkit.lightning.loggers.csv_logs import ExperimentWriter

    seen: list[dict[str, Any]] = []

    class Recording(ExperimentWriter):
        def log_metrics(self, metrics_dict: Any, step: int | None = None) -> None:
            seen.append(dict(metrics_dict))
            super().log_metrics(metrics_dict, step)

    class Logger(CSVLogger):
        @property
        def experiment(self) -> ExperimentWriter:
            if self._experiment is None:
                self._experiment = Recording(self.log_dir)
            return self._experiment

    logger = Logger(tmp_path)
    options = {**QUIET, "logger": logger, "log_every_n_steps": 1}
    trainkit.Trainer(max_steps=4, **options).fit(Classifier(), loader(blobs(128)))
    assert [row for row in seen if "train/loss" in row]  # the Trainer's rows went through it
    assert isinstance(logger.experiment, Recording)
    assert [row["step"] for row in _read(logger)[1]][:4] == ["0", "1", "2", "3"]


@pytest.mark.parametrize("logger", [CSVLogger, TensorBoardLogger])
def test_a_remote_store_is_refused_at_construction(logger: Any) -> None:
    # Not a local folder named "s3:" beside the run: the error says what to do.
    with pytest.raises(ValueError, match=r"not to s3:// stores\. Give a local folder"):
        logger("s3://bucket/runs")
    assert logger("file:///tmp/runs").save_dir == "/tmp/runs"

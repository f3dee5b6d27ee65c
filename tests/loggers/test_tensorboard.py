"""Tests for TensorBoardLogger: event files, hparams, version folders, laziness."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
from torch import nn

import trainkit
from tests.helpers import QUIET, BlobData, Classifier, MemoryLogger, event_file_events, repo_env
from trainkit.loggers import CSVLogger, TensorBoardLogger, _files

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


def test_on_other_ranks_the_experiment_is_a_stand_in_that_writes_nothing(tmp_path: Path) -> None:
    # As Lightning's: `self.logger.experiment.add_image(...)` from every rank runs, and
    # only rank 0 writes (no second event file, no version folder claimed by rank 1).
    logger = TensorBoardLogger(tmp_path)
    trainkit.rank_zero_only.rank = 1
    try:
        assert logger.experiment.add_image("x", torch.zeros(3, 2, 2)) is None
    finally:
        trainkit.rank_zero_only.rank = None
    assert list(tmp_path.iterdir()) == []
    logger.experiment.add_scalar("loss", 1.0, 0)  # rank 0: the real writer
    logger.finalize("success")
    assert _scalars(logger.log_dir, "loss") == [(0, 1.0)]


def test_a_logger_in_use_can_be_pickled_and_its_copy_writes_on(tmp_path: Path) -> None:
    import pickle

    logger = TensorBoardLogger(tmp_path)
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.experiment.add_scalar("other", 2.0, 0)  # the SummaryWriter is open too
    copy = pickle.loads(pickle.dumps(logger))
    copy.log_metrics({"loss": 0.5}, step=1)
    copy.finalize("success")
    logger.finalize("success")
    assert _scalars(logger.log_dir, "loss") == [(0, 1.0), (1, 0.5)]


def test_enum_and_numpy_hyperparameters_are_written_as_yaml_can_hold_them(tmp_path: Path) -> None:
    import enum

    import numpy as np

    class Mode(str, enum.Enum):
        FAST = "fast-mode"

    logger = TensorBoardLogger(tmp_path)
    logger.log_hyperparams({"mode": Mode.FAST, "rate": np.float64(0.5), "n": np.int64(3)})
    logger.finalize("success")
    saved = yaml.safe_load(Path(logger.log_dir, "hparams.yaml").read_text())
    assert saved == {"mode": "FAST", "rate": 0.5, "n": 3}  # an enum by name, as Lightning


def test_a_run_without_hyperparameters_has_an_empty_hparams_yaml(tmp_path: Path) -> None:
    # As Lightning's: load_from_checkpoint(hparams_file=<run>/hparams.yaml) finds one.
    class Plain(trainkit.Module):  # no save_hyperparameters()
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 3))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    logger = TensorBoardLogger(tmp_path)
    options = {**QUIET, "logger": logger, "enable_checkpointing": True}
    # default_root_dir: the run's last.ckpt pointer goes there, not into the working folder.
    trainer = trainkit.Trainer(
        max_epochs=1, limit_train_batches=2, default_root_dir=tmp_path, **options
    )
    trainer.fit(Plain(), datamodule=BlobData())
    hparams = Path(logger.log_dir, "hparams.yaml")
    assert hparams.read_text() == "{}\n"
    loaded = Plain.load_from_checkpoint(
        trainer.checkpoint_callback.best_model_path, hparams_file=hparams
    )
    assert torch.equal(loaded.net[0].weight, trainer.module.net[0].weight)
    # A logged run keeps its hyperparameters; a logger that wrote nothing makes no folder.
    logged = TensorBoardLogger(tmp_path, version="logged")
    logged.log_hyperparams({"lr": 0.5})
    logged.finalize("success")
    assert yaml.safe_load(Path(logged.log_dir, "hparams.yaml").read_text()) == {"lr": 0.5}
    unused = TensorBoardLogger(tmp_path / "unused")
    unused.finalize("success")
    assert not (tmp_path / "unused").exists()


def test_metrics_logged_without_a_step_are_at_step_0(tmp_path: Path) -> None:
    logger = TensorBoardLogger(tmp_path)
    logger.log_metrics({"test/acc": 0.5})  # as Lightning's allows
    logger.finalize("success")
    assert _scalars(logger.log_dir, "test/acc") == [(0, 0.5)]


def test_hyperparams_from_a_namespace_with_metrics_at_a_step(tmp_path: Path) -> None:
    # Lightning's signature: log_hyperparams(params, metrics, step), params a dict or Namespace.
    logger = TensorBoardLogger(tmp_path)
    logger.log_hyperparams(argparse.Namespace(lr=0.5), {"hp/score": 0.75}, step=7)
    logger.finalize("success")
    with open(os.path.join(logger.log_dir, "hparams.yaml")) as file:
        assert yaml.safe_load(file) == {"lr": 0.5}
    assert _scalars(logger.log_dir, "hp/score") == [(7, 0.75)]


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


def test_home_and_variables_in_the_folder_are_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As Lightning's TensorBoardLogger: no folder literally named "~" or "$RUNS".
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RUNS", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)
    assert TensorBoardLogger("~/tb", name="n").log_dir == str(tmp_path / "home/tb/n/version_0")
    assert TensorBoardLogger("$RUNS", name="n").log_dir == str(tmp_path / "runs/n/version_0")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "runs"]


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
    env = repo_env()
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["False", "False"]


def _hparams_tab(logdir: Path) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """What TensorBoard's HParams tab shows for ``logdir``, read by its own plugin code.

    Returns the metric columns and, per run, its hyperparameters, last metric
    values, and session status.
    """
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider
    from tensorboard.backend.event_processing import plugin_event_multiplexer as multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import (
        api_pb2,
        get_experiment,
        hparams_plugin,
        list_session_groups,
    )

    events = multiplexer.EventMultiplexer()
    events.AddRunsFromDirectory(str(logdir))
    events.Reload()
    provider = data_provider.MultiplexerDataProvider(events, str(logdir))
    tb_context = base_plugin.TBContext(
        logdir=str(logdir), multiplexer=events, data_provider=provider
    )
    backend = hparams_plugin.HParamsPlugin(tb_context)._context
    request_context = context.RequestContext()
    experiment = get_experiment.Handler(
        request_context, backend, "", api_pb2.GetExperimentRequest(include_metrics=True)
    ).run()
    request = api_pb2.ListSessionGroupsRequest(
        start_index=0,
        slice_size=100,
        allowed_statuses=[api_pb2.STATUS_SUCCESS, api_pb2.STATUS_FAILURE, api_pb2.STATUS_UNKNOWN],
        col_params=[api_pb2.ColParams(metric=info.name) for info in experiment.metric_infos]
        + [api_pb2.ColParams(hparam=info.name) for info in experiment.hparam_infos],
    )
    groups = list_session_groups.Handler(request_context, backend, "", request).run()
    runs = {
        group.name: {
            "hparams": {name: value.number_value for name, value in group.hparams.items()},
            "metrics": {m.name.tag: (m.training_step, m.value) for m in group.metric_values},
            "status": [api_pb2.Status.Name(session.status) for session in group.sessions],
        }
        for group in groups.session_groups
    }
    return [info.name.tag for info in experiment.metric_infos], runs


def test_hparams_tab_compares_runs_on_every_metric_they_logged(tmp_path: Path) -> None:
    # Two runs with different learning rates: the tab lists every scalar either run
    # logged (not only hp_metric) and shows each run's last value and how it ended.
    runs_to_write = [(0.1, 0.75, "success"), (0.01, 0.875, "failed"), (0.2, 0.5, "interrupted")]
    for lr, accuracy, status in runs_to_write:
        logger = TensorBoardLogger(tmp_path)
        logger.log_hyperparams({"lr": lr})
        logger.log_metrics({"val_acc": 0.5, "train_loss": 1.0}, step=5)
        logger.log_metrics({"val_acc": accuracy}, step=10)
        logger.finalize(status)
        logger.log_metrics({"test_acc": accuracy}, step=10)  # a test run after fit
        logger.finalize("success")

    columns, runs = _hparams_tab(tmp_path)
    assert columns == ["hp_metric", "test_acc", "train_loss", "val_acc"]
    assert runs["logs/version_0"]["hparams"] == {"lr": pytest.approx(0.1)}
    assert runs["logs/version_0"]["metrics"] == {
        "hp_metric": (0, -1.0),
        "train_loss": (5, 1.0),
        "val_acc": (10, 0.75),
        "test_acc": (10, 0.75),
    }
    assert runs["logs/version_1"]["metrics"]["val_acc"] == (10, 0.875)
    assert runs["logs/version_0"]["status"] == ["STATUS_SUCCESS"]
    assert runs["logs/version_1"]["status"] == ["STATUS_FAILURE"]
    # Interrupted: no end yet (a resumed run in the same folder writes it).
    assert runs["logs/version_2"]["status"] == ["STATUS_UNKNOWN"]


def test_fit_validate_and_test_write_one_event_file(tmp_path: Path) -> None:
    # One Trainer, three runs: one event file in the run folder holds them all, and
    # the HParams tab shows the model's hyperparameters with its val and test metrics.
    logger = TensorBoardLogger(tmp_path)
    options = {**QUIET, "logger": logger}
    trainer = trainkit.Trainer(max_epochs=2, limit_train_batches=4, log_every_n_steps=1, **options)
    model, data = Classifier(lr=0.05), BlobData()
    trainer.fit(model, datamodule=data)
    trainer.validate(model, datamodule=data)
    trainer.test(model, datamodule=data)

    files = [name for name in os.listdir(logger.log_dir) if name.startswith("events.out")]
    assert len(files) == 1
    assert [step for step, _ in _scalars(logger.log_dir, "train/loss")] == list(range(8))
    assert len(_scalars(logger.log_dir, "val/acc")) == 3  # two epochs, then validate()
    test_acc = trainer.callback_metrics["test/acc"].item()
    columns, runs = _hparams_tab(tmp_path)
    assert {"train/loss", "val/loss", "val/acc", "test/acc"} <= set(columns)
    run = runs["logs/version_0"]
    assert run["hparams"]["lr"] == pytest.approx(0.05)
    assert run["metrics"]["test/acc"][1] == pytest.approx(test_acc)
    assert run["status"] == ["STATUS_SUCCESS"]


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.mark.skipif(_chromium() is None, reason="needs Chromium (apt-get install chromium)")
def test_tensorboard_renders_the_scalars_and_hparams_pages(tmp_path: Path) -> None:
    # The real thing: `tensorboard --logdir` serving two trainkit runs; headless Chromium
    # renders the time-series page, and the HPARAMS page's data lists both runs with
    # their learning rates and metrics.
    for lr in (0.05, 0.2):
        logger = TensorBoardLogger(tmp_path)
        trainer = trainkit.Trainer(
            max_epochs=1, limit_train_batches=4, log_every_n_steps=1, **{**QUIET, "logger": logger}
        )
        trainer.fit(Classifier(lr=lr), datamodule=BlobData())
    command = [sys.executable, "-m", "tensorboard.main", "--logdir", str(tmp_path), "--port", "0"]
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        address = None
        for line in server.stderr:  # "TensorBoard 2.x at http://localhost:PORT/ (Press CTRL+C ...)"
            match = re.search(r"(http://\S+?:\d+/)", line)
            if match:
                address = match.group(1)
                break
        assert address, "tensorboard did not print its address"
        # Keep reading its log so that a full pipe never blocks the server.
        threading.Thread(target=server.stderr.read, daemon=True).start()

        browser = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu"]
        browser += ["--virtual-time-budget=20000", "--dump-dom", f"{address}#timeseries"]
        page = subprocess.run(browser, capture_output=True, text=True, timeout=120).stdout
        assert "version_0" in page and "version_1" in page  # the rendered run list

        # The HPARAMS page's table is drawn from these two requests (a --dump-dom of
        # that page does not include it): its columns, and each run's row.
        def ask(path: str, body: dict[str, Any]) -> Any:
            request = urllib.request.Request(
                f"{address}data/plugin/hparams/{path}",
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json", "X-XSRF-Protected": "1"},
            )
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.load(response)

        experiment = ask("experiment", {"experimentName": "", "includeMetrics": True})
        assert "lr" in [info["name"] for info in experiment["hparamInfos"]]
        columns = [info["name"]["tag"] for info in experiment["metricInfos"]]
        assert {"train/loss", "val/acc", "val/loss"} <= set(columns)
        rows = ask(
            "session_groups",
            {
                "experimentName": "",
                "allowedStatuses": ["STATUS_SUCCESS"],
                "colParams": [{"metric": {"tag": "val/acc"}}, {"hparam": "lr"}],
                "startIndex": 0,
                "sliceSize": 10,
            },
        )["sessionGroups"]
        learning_rates = {row["name"]: row["hparams"]["lr"] for row in rows}
        assert learning_rates == {"logs/version_0": 0.05, "logs/version_1": 0.2}
        assert all("val/acc" in [m["name"]["tag"] for m in row["metricValues"]] for row in rows)
    finally:
        server.terminate()
        server.wait(timeout=30)


def _all_events(folder: Path) -> list[Any]:
    return [
        event
        for path in sorted(folder.glob("events.out.tfevents.*"))
        for event in event_file_events(str(path))
    ]


def test_prefix_and_lightnings_keywords(tmp_path: Path) -> None:
    # As a Lightning project's config passes them (name None: no experiment folder).
    logger = TensorBoardLogger(
        save_dir=tmp_path, name=None, log_graph=False, default_hp_metric=True, prefix="train"
    )
    logger.log_metrics({"loss": 0.5}, step=1)
    logger.finalize("success")
    assert logger.log_dir == str(tmp_path / "version_0")
    assert _scalars(logger.log_dir, "train-loss") == [(1, 0.5)]


def test_summary_writer_options_and_unknown_keywords(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"unknown option.*max_queues.*flush_secs"):
        TensorBoardLogger(tmp_path, max_queues=10)
    # flush_secs also paces the scalars: 0 writes each at once, no finalize needed.
    logger = TensorBoardLogger(tmp_path, flush_secs=0, comment="-x")
    logger.log_metrics({"loss": 0.5}, step=1)
    assert _scalars(logger.log_dir, "loss") == [(1, 0.5)]
    logger.finalize("success")


def test_sub_dir_holds_the_logs_and_the_run_folder_the_checkpoints(tmp_path: Path) -> None:
    logger = TensorBoardLogger(tmp_path, name="exp", sub_dir="tb")
    trainer = trainkit.Trainer(
        max_epochs=1,
        logger=logger,
        enable_progress_bar=False,
        log_every_n_steps=1,
        default_root_dir=str(tmp_path),  # where checkpoints/last.ckpt points from
    )
    trainer.fit(Classifier(), BlobData())
    run = tmp_path / "exp" / "version_0"
    assert trainer.log_dir == logger.log_dir == str(run / "tb")
    assert list((run / "tb").glob("events.out.tfevents.*"))
    assert (run / "tb" / "hparams.yaml").is_file()
    assert list((run / "checkpoints").glob("*.ckpt"))
    assert not (run / "tb" / "checkpoints").exists()


class _Noisy(trainkit.Module):
    """Dropout, batch norm and input noise: tracing it carelessly would change the run."""

    def __init__(self, example: bool = True) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Dropout(0.5), nn.Linear(16, 3)
        )
        if example:
            self.example_input_array = torch.randn(4, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x + 0.01 * torch.randn_like(x))  # draws in eval mode too

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit_noisy(root: Path, log_graph: bool, example: bool = True) -> tuple[_Noisy, Path]:
    trainkit.seed_everything(0)
    module = _Noisy(example)
    logger = TensorBoardLogger(root, log_graph=log_graph)
    trainer = trainkit.Trainer(
        max_epochs=1, logger=logger, enable_progress_bar=False, enable_checkpointing=False
    )
    trainer.fit(module, BlobData())
    return module, Path(logger.log_dir)


def test_log_graph_draws_the_graph_and_changes_nothing_the_run_computes(tmp_path: Path) -> None:
    with_graph, folder = _fit_noisy(tmp_path / "graph", log_graph=True)
    without, _ = _fit_noisy(tmp_path / "plain", log_graph=False)
    assert any(event.graph_def for event in _all_events(folder))
    for name, tensor in without.state_dict().items():
        assert torch.equal(with_graph.state_dict()[name], tensor), name  # BN stats included
    assert with_graph.training


def test_log_graph_without_an_example_input_warns_and_trains(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match=r"Could not log computational graph.*Set _Noisy\.example"):
        _, folder = _fit_noisy(tmp_path, log_graph=True, example=False)
    assert not any(event.graph_def for event in _all_events(folder))


@pytest.mark.parametrize("example", [{"x": torch.randn(4, 8)}, [torch.randn(4, 8)]])
def test_log_graph_of_a_dict_or_list_input_warns_and_trains(tmp_path: Path, example: Any) -> None:
    # A dict reached forward as one argument, which failed the whole fit: now, as in
    # Lightning, an input that is not a tensor or a tuple is not traced.
    module = _Noisy(example=False)
    module.example_input_array = example
    logger = TensorBoardLogger(tmp_path, log_graph=True)
    trainer = trainkit.Trainer(
        max_epochs=1, logger=logger, enable_progress_bar=False, enable_checkpointing=False
    )
    with pytest.warns(UserWarning, match=rf"has type {type(example)} which can't be traced"):
        trainer.fit(module, BlobData())
    assert trainer.global_step > 0
    assert not any(event.graph_def for event in _all_events(Path(logger.log_dir)))


def test_lightnings_folder_and_name_attributes(tmp_path: Path) -> None:
    named, unnamed = TensorBoardLogger(tmp_path, name="exp"), CSVLogger(tmp_path, name=None)
    assert (named.root_dir, unnamed.root_dir) == (str(tmp_path / "exp"), str(tmp_path))
    assert named.log_dir == os.path.join(named.root_dir, "version_0")
    assert (named.group_separator, named.LOGGER_JOIN_CHAR) == ("/", "-")
    named.log_hyperparams({"lr": 0.1})
    assert os.path.isfile(os.path.join(named.log_dir, TensorBoardLogger.NAME_HPARAMS_FILE))
    named.finalize("success")
    # A logger without a local folder of versions has none (Lightning's base default).
    assert MemoryLogger().root_dir is None


def test_log_graph_leaves_each_submodules_mode_as_it_was(tmp_path: Path) -> None:
    module = _Noisy()
    module.net[1].eval()  # e.g. a frozen batch norm
    TensorBoardLogger(tmp_path, log_graph=True).log_graph(module)
    assert [m.training for m in module.net] == [True, False, True, True]


def test_log_graph_of_a_sharded_model_warns_instead_of_waiting_for_other_ranks(
    tmp_path: Path,
) -> None:
    script = f"""
        import warnings
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        from tests.loggers.test_tensorboard import _Noisy
        from trainkit.loggers import TensorBoardLogger

        store = {str(tmp_path / "store")!r}
        dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
        module = _Noisy()
        fully_shard(module)
        logger = TensorBoardLogger({str(tmp_path)!r}, log_graph=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            logger.log_graph(module)
        assert any("sharded across processes" in str(w.message) for w in caught), caught
        dist.destroy_process_group()
        """
    subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], check=True, timeout=120, cwd=REPO_ROOT
    )
    assert not list(tmp_path.glob("**/events.out.tfevents.*"))  # nothing traced, nothing written

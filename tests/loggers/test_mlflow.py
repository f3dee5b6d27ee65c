"""Tests for MLflowLogger: a real MLflow file store, read back with MlflowClient."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest

import trainkit
from tests.helpers import QUIET, BlobData, Classifier
from trainkit.loggers import MLflowLogger

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402


@pytest.fixture(autouse=True)
def _no_tracking_server(monkeypatch: pytest.MonkeyPatch) -> None:
    # The tests decide the store; a developer's MLFLOW_TRACKING_URI must not leak in.
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A fit's default root is the working directory, where ModelCheckpoint points
    # checkpoints/last.ckpt at the run's file: a temporary folder, not the repository.
    monkeypatch.chdir(tmp_path)


def _fit(logger: MLflowLogger, **options: Any) -> trainkit.Trainer:
    settings = {**QUIET, "logger": logger, "max_epochs": 2, "limit_train_batches": 4}
    trainer = trainkit.Trainer(log_every_n_steps=1, **{**settings, **options})
    trainer.fit(Classifier(lr=0.05), datamodule=BlobData())
    return trainer


def _history(client: MlflowClient, run_id: str, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in client.get_metric_history(run_id, key)]


def test_a_fit_writes_params_and_metrics_at_their_steps(tmp_path: Path) -> None:
    logger = MLflowLogger(experiment_name="blobs", save_dir=tmp_path / "mlruns", tags={"k": 1})
    trainer = _fit(logger)

    client = MlflowClient(tracking_uri=logger.tracking_uri)
    run = client.get_run(logger.run_id)
    assert client.get_experiment(run.info.experiment_id).name == "blobs"
    assert run.data.params == {"features": "8", "classes": "3", "lr": "0.05"}
    assert run.data.tags["k"] == "1"
    assert run.info.status == "FINISHED"
    assert [step for step, _ in _history(client, logger.run_id, "train/loss")] == list(range(8))
    # Epoch metrics at the step each epoch ended; the last equals the Trainer's.
    val_acc = _history(client, logger.run_id, "val/acc")
    assert [step for step, _ in val_acc] == [3, 7]
    assert val_acc[-1][1] == pytest.approx(trainer.callback_metrics["val/acc"].item())
    # The file store is the save_dir, and the run's folder is its log_dir.
    assert logger.log_dir == os.path.join(
        tmp_path, "mlruns", run.info.experiment_id, run.info.run_id
    )
    assert os.path.isfile(os.path.join(logger.log_dir, "meta.yaml"))


def test_metrics_logged_without_a_step_are_at_step_0_as_lightning_writes_them(
    tmp_path: Path,
) -> None:
    logger = MLflowLogger(experiment_name="blobs", save_dir=tmp_path / "mlruns")
    logger.log_metrics({"test/acc": 0.5})  # code of a project's own, after a run
    client = MlflowClient(tracking_uri=logger.tracking_uri)
    assert _history(client, logger.run_id, "test/acc") == [(0, 0.5)]


def test_string_values_are_discarded_with_a_warning_as_lightning_does(tmp_path: Path) -> None:
    logger = MLflowLogger(experiment_name="blobs", save_dir=tmp_path / "mlruns")
    with pytest.warns(UserWarning, match=r"discards the metrics whose values are strings \(tag\)"):
        logger.log_metrics({"loss": 0.5, "tag": "blue"}, step=1)
    client = MlflowClient(tracking_uri=logger.tracking_uri)
    assert _history(client, logger.run_id, "loss") == [(1, 0.5)]
    assert _history(client, logger.run_id, "tag") == []


def test_nested_hyperparameters_and_prefix(tmp_path: Path) -> None:
    logger = MLflowLogger(save_dir=tmp_path, prefix="blobs")
    logger.log_hyperparams({"optim": {"lr": 0.1, "betas": [0.9, 0.99]}, "act": None})
    logger.log_metrics({"loss": 0.5}, step=3)
    logger.finalize("failed")

    client = MlflowClient(tracking_uri=logger.tracking_uri)
    run = client.get_run(logger.run_id)
    assert run.data.params == {"optim/lr": "0.1", "optim/betas": "[0.9, 0.99]", "act": "None"}
    assert _history(client, logger.run_id, "blobs-loss") == [(3, 0.5)]
    assert run.info.status == "FAILED"


def test_log_model_uploads_the_run_checkpoints(tmp_path: Path) -> None:
    logger = MLflowLogger(save_dir=tmp_path / "mlruns", log_model=True)
    checkpoint = trainkit.callbacks.ModelCheckpoint(monitor="val/acc", mode="max", save_last=True)
    _fit(logger, enable_checkpointing=True, callbacks=[checkpoint])

    saved = sorted(os.listdir(os.path.join(logger.log_dir, "checkpoints")))
    client = MlflowClient(tracking_uri=logger.tracking_uri)
    uploaded = sorted(
        os.path.basename(item.path) for item in client.list_artifacts(logger.run_id, "checkpoints")
    )
    assert "last.ckpt" in saved
    assert uploaded == [name for name in saved if name.endswith(".ckpt")]
    local = client.download_artifacts(logger.run_id, "checkpoints/last.ckpt", str(tmp_path))
    assert Path(local).read_bytes() == Path(checkpoint.last_model_path).read_bytes()


def test_log_model_all_uploads_each_checkpoint_as_it_is_saved(tmp_path: Path) -> None:
    logger = MLflowLogger(save_dir=tmp_path / "mlruns", log_model="all")
    seen: list[list[str]] = []

    class Watch(trainkit.Callback):
        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            # Before this epoch's save: what earlier saves uploaded during the run.
            client = MlflowClient(tracking_uri=logger.tracking_uri)
            found = client.list_artifacts(logger.run_id, "checkpoints")
            seen.append([item.path for item in found])

    checkpoint = trainkit.callbacks.ModelCheckpoint(save_last=True, save_top_k=-1)
    _fit(logger, max_epochs=2, enable_checkpointing=True, callbacks=[Watch(), checkpoint])
    assert seen[0] == []  # nothing saved yet
    assert "checkpoints/last.ckpt" in seen[1]  # epoch 0's save, uploaded before the run ended


def test_a_resumed_fit_continues_the_mlflow_run(tmp_path: Path) -> None:
    store = tmp_path / "mlruns"
    checkpoint = trainkit.callbacks.ModelCheckpoint(save_last=True)
    first = MLflowLogger(save_dir=store)
    _fit(first, max_epochs=1, enable_checkpointing=True, callbacks=[checkpoint])

    resumed = MLflowLogger(save_dir=store)
    trainer = trainkit.Trainer(
        **{**QUIET, "logger": resumed, "enable_checkpointing": True},
        max_epochs=2,
        limit_train_batches=4,
        log_every_n_steps=1,
    )
    trainer.fit(Classifier(lr=0.05), datamodule=BlobData(), ckpt_path=checkpoint.last_model_path)

    assert resumed.run_id == first.run_id
    client = MlflowClient(tracking_uri=resumed.tracking_uri)
    steps = [step for step, _ in _history(client, first.run_id, "train/loss")]
    assert steps == list(range(8))
    assert len(client.search_runs([first.experiment_id])) == 1


def test_an_explicit_run_id_continues_that_run(tmp_path: Path) -> None:
    first = MLflowLogger(save_dir=tmp_path)
    first.log_metrics({"loss": 1.0}, step=0)
    first.finalize("interrupted")
    assert MlflowClient(first.tracking_uri).get_run(first.run_id).info.status == "KILLED"

    again = MLflowLogger(save_dir=tmp_path, run_id=first.run_id)
    again.log_metrics({"loss": 0.5}, step=1)
    again.finalize("success")
    client = MlflowClient(tracking_uri=again.tracking_uri)
    assert _history(client, first.run_id, "loss") == [(0, 1.0), (1, 0.5)]
    assert client.get_run(first.run_id).info.status == "FINISHED"


def test_a_tracking_uri_is_used_as_given(tmp_path: Path) -> None:
    uri = (tmp_path / "elsewhere").as_uri()
    logger = MLflowLogger(tracking_uri=uri, save_dir=tmp_path / "unused")
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.finalize("success")
    assert logger.save_dir == str(tmp_path / "elsewhere")
    assert (tmp_path / "elsewhere").is_dir()
    assert not (tmp_path / "unused").exists()


def test_other_ranks_write_nothing(tmp_path: Path) -> None:
    from trainkit.utilities.rank_zero import rank_zero_only

    logger = MLflowLogger(save_dir=tmp_path / "mlruns")
    rank_zero_only.rank = 1
    try:
        logger.log_hyperparams({"lr": 0.1})
        logger.log_metrics({"loss": 1.0}, step=0)
        logger.finalize("success")
        # As Lightning's: a stand-in that takes any call and does nothing.
        assert logger.experiment.log_text("run", "x", "notes.txt") is None
        with pytest.raises(RuntimeError, match="read on a global rank other than 0"):
            logger.run_id  # noqa: B018 (no run here: rank 0 starts it)
    finally:
        rank_zero_only.rank = None
    assert not (tmp_path / "mlruns").exists()


def test_a_sharded_checkpoint_folder_is_uploaded_whole(tmp_path: Path) -> None:
    # FSDP's checkpoints are folders (trainkit.checkpoint.sharded): uploaded under their own name.
    from types import SimpleNamespace

    from trainkit.checkpoint.sharded import META_FILE

    folder = tmp_path / "checkpoints" / "step=3.ckpt"
    folder.mkdir(parents=True)
    (folder / META_FILE).write_bytes(b"index")
    (folder / "__0_0.distcp").write_bytes(b"shard")
    logger = MLflowLogger(save_dir=tmp_path / "mlruns", log_model="all")
    logger.log_metrics({"loss": 1.0}, step=0)
    saved = SimpleNamespace(dirpath=folder.parent, best_model_path=str(folder))
    logger.after_save_checkpoint(saved)
    client = MlflowClient(tracking_uri=logger.tracking_uri)
    uploaded = client.list_artifacts(logger.run_id, "checkpoints/step=3.ckpt")
    assert sorted(os.path.basename(item.path) for item in uploaded) == [
        "__0_0.distcp",
        META_FILE,
    ]
    logger.after_save_checkpoint(saved)  # unchanged: not uploaded again
    logger.finalize("success")


def test_synchronous_false_queues_writes_and_fit_waits_for_them(tmp_path: Path) -> None:
    logger = MLflowLogger(save_dir=tmp_path / "mlruns", synchronous=False)
    _fit(logger)
    # Every queued write reached the store before fit returned.
    client = MlflowClient(tracking_uri=logger.tracking_uri)
    run = client.get_run(logger.run_id)
    assert run.data.params == {"features": "8", "classes": "3", "lr": "0.05"}
    # Queued writes may reach the store in any order; each keeps its step.
    steps = sorted(step for step, _ in _history(client, logger.run_id, "train/loss"))
    assert steps == list(range(8))
    assert run.info.status == "FINISHED"


def test_a_queued_write_that_failed_fails_the_run_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Failed:
        def wait(self) -> None:
            raise OSError("the store is unreachable")

    logger = MLflowLogger(save_dir=tmp_path / "mlruns", synchronous=False)
    client = logger.experiment
    sent: list[Any] = []

    def log_batch(run_id: str, synchronous: bool | None = None, **values: Any) -> Failed:
        sent.append(synchronous)
        return Failed()

    monkeypatch.setattr(client, "log_batch", log_batch)
    logger.log_metrics({"loss": 1.0}, step=0)  # a new name: written at once
    logger.log_metrics({"loss": 0.5}, step=1)  # queued
    assert sent == [True, False]
    with pytest.raises(OSError, match="unreachable"):
        logger.finalize("success")
    monkeypatch.undo()
    assert MlflowClient(tracking_uri=logger.tracking_uri).get_run(logger.run_id).info.status == (
        "FAILED"
    )


def test_synchronous_false_writes_each_new_name_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MLflow's file store makes a name's folder with a check, then a makedirs that
    # fails if another of its logging threads made the folder in between. Widen
    # that window: two queued first writes under "train/" then both miss the
    # folder, and one fails with "File exists".
    from mlflow.store.tracking import file_store

    both_missed = threading.Barrier(2, timeout=0.5)

    def check_then_make(path: str) -> None:
        folder = os.path.dirname(path)
        if not os.path.exists(folder):
            with contextlib.suppress(threading.BrokenBarrierError):
                both_missed.wait()  # for a second writer that missed it too
            os.makedirs(folder)

    logger = MLflowLogger(save_dir=tmp_path / "mlruns", synchronous=False)
    logger.experiment  # noqa: B018 (starts the run: its own folders are made first)
    monkeypatch.setattr(file_store, "make_containing_dirs", check_then_make)
    logger.log_metrics({"train/loss": 1.0}, step=0)
    logger.log_metrics({"train/acc": 0.5}, step=0)
    logger.log_metrics({"train/loss": 0.5, "train/acc": 0.75}, step=1)
    logger.finalize("success")
    client = MlflowClient(tracking_uri=logger.tracking_uri)
    assert sorted(_history(client, logger.run_id, "train/loss")) == [(0, 1.0), (1, 0.5)]
    assert sorted(_history(client, logger.run_id, "train/acc")) == [(0, 0.5), (1, 0.75)]
    assert client.get_run(logger.run_id).info.status == "FINISHED"


def test_a_subclass_may_set_tracking_uri_before_init_and_read_the_client(tmp_path: Path) -> None:
    # Lightning code subclasses the logger and sets the URI as an attribute first.
    class Offline(MLflowLogger):
        def __init__(self, uri: str) -> None:
            self.tracking_uri = uri
            super().__init__(tracking_uri=self.tracking_uri, save_dir=tmp_path)

    store = tmp_path / "store"
    logger = Offline(f"file:{store}")
    assert logger.tracking_uri == f"file:{store}"
    # The client (Lightning's private _mlflow_client, read by projects) reads that store,
    # before the run starts and, once it has, is the run's own client.
    assert logger._mlflow_client.tracking_uri == f"file:{store}"
    logger.log_metrics({"loss": 1.0}, step=3)
    assert logger._mlflow_client is logger.experiment
    assert _history(logger._mlflow_client, logger.run_id, "loss") == [(3, 1.0)]
    logger.finalize("success")
    assert (store / logger.experiment_id / logger.run_id).is_dir()

    class Offline2(MLflowLogger):  # None, as a subclass marks itself offline
        def __init__(self) -> None:
            self.tracking_uri = None
            super().__init__(tracking_uri=self.tracking_uri, save_dir=tmp_path / "local")

    offline = Offline2()
    assert offline.tracking_uri is None  # the subclass's own value, as under Lightning
    offline.log_metrics({"loss": 2.0}, step=1)
    offline.finalize("success")
    assert (tmp_path / "local" / offline.experiment_id / offline.run_id).is_dir()

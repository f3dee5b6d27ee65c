"""Tests for WandbLogger in offline mode: the run's files, read back record by record."""

from __future__ import annotations

import glob
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest

import trainkit
from tests.helpers import QUIET, BlobData, Classifier
from trainkit.loggers import WandbLogger

wandb = pytest.importorskip("wandb")
from wandb.proto import wandb_internal_pb2  # noqa: E402


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Nothing may reach the network: offline mode, no key, W&B's own files in tmp_path.
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONSOLE", "off")  # leave sys.stdout to pytest
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wandb-data"))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


def _finish(logger: WandbLogger) -> str:
    """End the logger's run and wait until its file is complete; return the run's id.

    ``finish()`` returns before W&B's service process has written the whole file;
    ``wandb.teardown()`` waits for the service to exit.
    """
    run_id = logger.version
    logger.experiment.finish()
    wandb.teardown()
    return run_id


def _records(save_dir: Path, run_id: str) -> list[Any]:
    """The records of a run's ``.wandb`` file, parsed with wandb's own protos.

    The file is a 7-byte header (``:W&B``, magic, version) and then LevelDB's log
    format: 32 KiB blocks of chunks (CRC, length, type), a record being one FULL
    chunk or FIRST, MIDDLE..., LAST.
    """
    (path,) = glob.glob(os.path.join(save_dir, "wandb", f"offline-run-*-{run_id}", "*.wandb"))
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B"
    records, pending, offset, block = [], b"", 7, 32768
    while offset + 7 <= len(data):
        if block - offset % block < 7:  # a block's tail too short for a header is padding
            offset += block - offset % block
            continue
        length, kind = struct.unpack("<HB", data[offset + 4 : offset + 7])
        chunk = data[offset + 7 : offset + 7 + length]
        offset += 7 + length
        if kind == 0 and length == 0:
            continue
        pending += chunk
        if kind in (1, 4):  # FULL or LAST
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def _key(item: Any) -> str:
    # Flat names come as `key` or as a one-element `nested_key`, depending on the writer.
    return str(item.key or "/".join(item.nested_key))


def _history(records: list[Any]) -> list[dict[str, Any]]:
    rows = []
    for record in records:
        if record.WhichOneof("record_type") == "history":
            rows.append({_key(item): json.loads(item.value_json) for item in record.history.item})
    return rows


def _config(records: list[Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for record in records:
        if record.WhichOneof("record_type") == "config":
            config.update(
                {_key(item): json.loads(item.value_json) for item in record.config.update}
            )
    return config


def test_an_offline_fit_writes_config_and_metrics_by_step(tmp_path: Path) -> None:
    logger = WandbLogger(project="blobs", name="first", save_dir=tmp_path, offline=True)
    trainer = trainkit.Trainer(
        **{**QUIET, "logger": logger}, max_epochs=2, limit_train_batches=4, log_every_n_steps=1
    )
    trainer.fit(Classifier(lr=0.05), datamodule=BlobData())
    run_id = _finish(logger)

    records = _records(tmp_path, run_id)
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert (run.project, run.display_name, run.run_id) == ("blobs", "first", run_id)
    config = _config(records)
    assert (config["features"], config["classes"], config["lr"]) == (8, 3, 0.05)
    rows = _history(records)
    steps = [row["trainer/global_step"] for row in rows if "train/loss" in row]
    assert steps == list(range(8))
    val_acc = [(row["trainer/global_step"], row["val/acc"]) for row in rows if "val/acc" in row]
    assert [step for step, _ in val_acc] == [3, 7]
    assert val_acc[-1][1] == pytest.approx(trainer.callback_metrics["val/acc"].item())


def test_validate_and_test_after_fit_add_to_the_same_run(tmp_path: Path) -> None:
    logger = WandbLogger(save_dir=tmp_path, mode="offline", prefix="blobs")
    trainer = trainkit.Trainer(**{**QUIET, "logger": logger}, max_epochs=1, limit_train_batches=2)
    model, data = Classifier(), BlobData()
    trainer.fit(model, datamodule=data)
    trainer.test(model, datamodule=data)
    run_id = _finish(logger)

    rows = _history(_records(tmp_path, run_id))
    assert any("blobs-val/acc" in row for row in rows)
    assert any("blobs-test/acc" in row for row in rows)
    assert len(glob.glob(os.path.join(tmp_path, "wandb", "offline-run-*"))) == 1


def test_log_model_adds_the_checkpoints_as_an_artifact(tmp_path: Path) -> None:
    logger = WandbLogger(save_dir=tmp_path, offline=True, log_model=True)
    checkpoint = trainkit.callbacks.ModelCheckpoint(save_last=True)
    trainer = trainkit.Trainer(
        **{**QUIET, "logger": logger, "enable_checkpointing": True},
        callbacks=[checkpoint],
        max_epochs=1,
        limit_train_batches=2,
    )
    trainer.fit(Classifier(), datamodule=BlobData())
    run_id = _finish(logger)

    artifacts = [
        r.artifact for r in _records(tmp_path, run_id) if r.WhichOneof("record_type") == "artifact"
    ]
    assert [(a.name, a.type) for a in artifacts] == [(f"model-{run_id}", "model")]
    assert "last.ckpt" in {entry.path for entry in artifacts[0].manifest.contents}


def test_a_failed_run_is_finished_with_exit_code_1(tmp_path: Path) -> None:
    logger = WandbLogger(save_dir=tmp_path, offline=True)
    logger.log_metrics({"loss": 1.0}, step=0)
    run_id = logger.version
    logger.finalize("failed")  # ends the run
    wandb.teardown()
    exits = [
        r.exit.exit_code
        for r in _records(tmp_path, run_id)
        if r.WhichOneof("record_type") == "exit"
    ]
    assert exits == [1]


def test_offline_and_another_mode_contradict(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match='offline=True or mode="offline"'):
        WandbLogger(save_dir=tmp_path, offline=True, mode="online")


def test_a_sharded_checkpoint_folder_is_added_whole(tmp_path: Path) -> None:
    # FSDP's checkpoints are folders (trainkit.checkpoint.sharded): added under their own name.
    from types import SimpleNamespace

    from trainkit.checkpoint.sharded import META_FILE

    folder = tmp_path / "checkpoints" / "step=3.ckpt"
    folder.mkdir(parents=True)
    (folder / META_FILE).write_bytes(b"index")
    (folder / "__0_0.distcp").write_bytes(b"shard")
    logger = WandbLogger(save_dir=tmp_path, offline=True, log_model="all")
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.after_save_checkpoint(
        SimpleNamespace(dirpath=folder.parent, best_model_path=str(folder))
    )
    run_id = _finish(logger)

    artifacts = [
        r.artifact for r in _records(tmp_path, run_id) if r.WhichOneof("record_type") == "artifact"
    ]
    paths = {entry.path for entry in artifacts[0].manifest.contents}
    assert paths == {f"step=3.ckpt/{META_FILE}", "step=3.ckpt/__0_0.distcp"}

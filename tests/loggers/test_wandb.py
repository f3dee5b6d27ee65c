"""Tests for WandbLogger in offline mode: the run's files, read back record by record."""

from __future__ import annotations

import glob
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest
import torch

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
    # A fit's default root (checkpoints/last.ckpt's pointer) is the working directory.
    monkeypatch.chdir(tmp_path)


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


def test_metrics_logged_without_a_step_are_written(tmp_path: Path) -> None:
    logger = WandbLogger(project="blobs", save_dir=tmp_path, offline=True)
    logger.log_metrics({"test/acc": 0.5})  # as Lightning's allows
    logger.log_metrics({"test/acc": 0.75}, step=3)
    rows = [row for row in _history(_records(tmp_path, _finish(logger))) if "test/acc" in row]
    # W&B fills the step metric of a row without one (step_sync), as under Lightning.
    assert [(row["test/acc"], row["trainer/global_step"]) for row in rows] == [(0.5, 0), (0.75, 3)]


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


def test_log_model_uploads_each_checkpoint_as_a_version_of_model_ckpt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lightning's layout: one version per file, the file as model.ckpt, "best" on the
    # best one, its score, name and the ModelCheckpoint's settings in the metadata.
    made: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    original = wandb.Artifact.__init__

    def recording(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append((args, kwargs))
        original(self, *args, **kwargs)

    monkeypatch.setattr(wandb.Artifact, "__init__", recording)
    logger = WandbLogger(save_dir=tmp_path, offline=True, log_model=True)
    checkpoint = trainkit.callbacks.ModelCheckpoint(
        save_last=True, monitor="val/loss", save_top_k=2
    )
    trainer = trainkit.Trainer(
        **{**QUIET, "logger": logger, "enable_checkpointing": True},
        callbacks=[checkpoint],
        max_epochs=3,
        limit_train_batches=2,
    )
    trainer.fit(Classifier(), datamodule=BlobData())
    run_id = _finish(logger)

    artifacts = [
        r.artifact for r in _records(tmp_path, run_id) if r.WhichOneof("record_type") == "artifact"
    ]
    assert {(a.name, a.type) for a in artifacts} == {(f"model-{run_id}", "model")}
    # Made with keywords, as Lightning makes them (projects' tests check the call).
    assert [args for args, _ in made] == [()] * len(artifacts)
    assert all(kwargs["name"] == f"model-{run_id}" for _, kwargs in made)
    assert all([e.path for e in a.manifest.contents] == ["model.ckpt"] for a in artifacts)
    metadata = [json.loads(a.metadata) for a in artifacts]
    kept = sorted(os.path.basename(path) for path in checkpoint.best_k_models)
    assert [m["original_filename"] for m in metadata] == [*kept, "last.ckpt"]  # oldest first
    best = os.path.basename(checkpoint.best_model_path)
    for artifact, entry in zip(artifacts, metadata, strict=True):
        is_best = entry["original_filename"] == best
        assert sorted(artifact.aliases) == (["best", "latest"] if is_best else ["latest"])
        saved = str(Path(checkpoint.dirpath) / entry["original_filename"])
        score = checkpoint.best_k_models.get(saved)
        assert entry["score"] == (pytest.approx(float(score)) if score is not None else None)
        assert entry["ModelCheckpoint"] == {
            "monitor": "val/loss",
            "mode": "min",
            "save_last": True,
            "save_top_k": 2,
            "save_weights_only": False,
            "_every_n_train_steps": 0,
        }


def test_the_project_comes_from_wandb_project_when_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_PROJECT", "from-the-environment")
    assert WandbLogger(save_dir=tmp_path, offline=True).name == "from-the-environment"
    assert WandbLogger(save_dir=tmp_path, project="given", offline=True).name == "given"
    monkeypatch.delenv("WANDB_PROJECT")
    assert WandbLogger(save_dir=tmp_path, offline=True).name == "trainkit_logs"
    # The ported logger's default is Lightning's.
    from trainkit.lightning.loggers import WandbLogger as PortedWandbLogger

    assert PortedWandbLogger(save_dir=tmp_path, offline=True).name == "lightning_logs"


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
    assert paths == {f"model.ckpt/{META_FILE}", "model.ckpt/__0_0.distcp"}


# ------------------------------------------------- media, tables, given runs, artifacts
class _FakeArtifact:
    def __init__(self) -> None:
        self.roots: list[str | None] = []

    def download(self, root: str | None = None) -> str:
        self.roots.append(root)
        return root or "artifacts/default"


class _FakeRun:
    """A wandb run that records its method calls (watch and artifacts need a server)."""

    def __init__(self) -> None:
        self.id, self.project = "given123", "given-project"
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.artifact = _FakeArtifact()

    def __getattr__(self, name: str) -> Any:
        def method(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return self.artifact if name == "use_artifact" else None

        return method

    def logged(self) -> list[dict[str, Any]]:
        return [args[0] for name, args, _ in self.calls if name == "log"]


def _run_dir(save_dir: Path, run_id: str) -> Path:
    (folder,) = glob.glob(os.path.join(save_dir, "wandb", f"offline-run-*-{run_id}"))
    return Path(folder)


def test_log_image_writes_the_captioned_images_at_the_step(tmp_path: Path) -> None:
    import numpy as np

    logger = WandbLogger(save_dir=tmp_path, offline=True)
    black, white = np.zeros((8, 8, 3), np.uint8), np.full((8, 8, 3), 255, np.uint8)
    logger.log_image(key="samples", images=[black, white], step=5, caption=["tree", "person"])
    run_id = _finish(logger)

    (row,) = [row for row in _history(_records(tmp_path, run_id)) if "samples/_type" in row]
    assert row["trainer/global_step"] == 5
    assert (row["samples/count"], row["samples/captions"]) == (2, ["tree", "person"])
    for name in row["samples/filenames"]:
        assert (_run_dir(tmp_path, run_id) / "files" / name).is_file()


def test_log_table_and_log_text_write_tables(tmp_path: Path) -> None:
    logger = WandbLogger(save_dir=tmp_path, offline=True, prefix="eval")
    logger.log_table(key="preds", columns=["id", "label"], data=[[0, "cat"], [1, "dog"]], step=3)
    logger.log_text(key="samples", columns=["prompt", "reply"], data=[["2+2", "4"]])
    run_id = _finish(logger)

    rows = _history(_records(tmp_path, run_id))
    tables = {}
    for name in ("eval-preds", "eval-samples"):
        (row,) = [row for row in rows if f"{name}/_type" in row]
        assert row[f"{name}/_type"] == "table-file"
        tables[name] = (
            row,
            json.loads((_run_dir(tmp_path, run_id) / "files" / row[f"{name}/path"]).read_text()),
        )
    assert tables["eval-preds"][0]["trainer/global_step"] == 3
    assert tables["eval-preds"][1] == {"columns": ["id", "label"], "data": [[0, "cat"], [1, "dog"]]}
    assert tables["eval-samples"][1] == {"columns": ["prompt", "reply"], "data": [["2+2", "4"]]}


def test_log_audio_and_log_video_give_each_item_its_keywords(tmp_path: Path) -> None:
    import wave

    clip = tmp_path / "clip.wav"
    with wave.open(str(clip), "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(8000)
        file.writeframes(b"\0\0" * 80)
    movie = tmp_path / "movie.gif"
    movie.write_bytes(b"GIF89a")
    run = _FakeRun()
    logger = WandbLogger(experiment=run, save_dir=tmp_path)

    logger.log_audio(key="speech", audios=[str(clip), str(clip)], step=2, caption=["a", "b"])
    logger.log_video(key="clips", videos=[str(movie)], caption=["only"])

    speech, clips = run.logged()
    assert speech["trainer/global_step"] == 2
    assert [type(a) for a in speech["speech"]] == [wandb.Audio, wandb.Audio]
    assert [a._caption for a in speech["speech"]] == ["a", "b"]
    assert "trainer/global_step" not in clips  # no step given: none written
    assert [(type(v), v._caption) for v in clips["clips"]] == [(wandb.Video, "only")]


def test_media_keywords_need_one_value_per_item(tmp_path: Path) -> None:
    run = _FakeRun()
    logger = WandbLogger(experiment=run, save_dir=tmp_path)
    with pytest.raises(ValueError, match=r"key='samples'.*caption="):
        logger.log_image(key="samples", images=["a.png", "b.png"], caption=["one"])
    with pytest.raises(ValueError, match=r"key='clips'.*fps="):
        logger.log_video(key="clips", videos=["a.gif"], fps=[4, 8])
    with pytest.raises(TypeError, match="images must be a list"):
        logger.log_image(key="samples", images="a.png")  # type: ignore[arg-type]
    assert run.logged() == []


def test_experiment_logs_into_the_given_run(tmp_path: Path) -> None:
    run = wandb.init(project="mine", dir=tmp_path, mode="offline", reinit="create_new")
    logger = WandbLogger(experiment=run, save_dir=tmp_path)
    assert (logger.version, logger.name) == (run.id, "mine")
    logger.log_metrics({"loss": 1.0}, step=4)
    logger.finalize("failed")  # the caller's run: left open for its owner
    logger.log_metrics({"loss": 0.5}, step=5)
    assert logger.experiment is run
    run_id = _finish(logger)

    records = _records(tmp_path, run_id)
    assert len(glob.glob(os.path.join(tmp_path, "wandb", "offline-run-*"))) == 1
    metrics = [r.metric for r in records if r.WhichOneof("record_type") == "metric"]
    assert any(m.glob_name == "*" and m.step_metric == "trainer/global_step" for m in metrics)
    losses = [
        (row["trainer/global_step"], row["loss"]) for row in _history(records) if "loss" in row
    ]
    assert losses == [(4, 1.0), (5, 0.5)]
    assert [r.exit.exit_code for r in records if r.WhichOneof("record_type") == "exit"] == [0]


@pytest.mark.parametrize(("policy", "expected"), [(None, "mutable"), ("immutable", "immutable")])
def test_add_file_policy_reaches_the_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str | None, expected: str
) -> None:
    from types import SimpleNamespace

    from trainkit.checkpoint.sharded import META_FILE

    policies: list[tuple[str, Any]] = []
    for method in ("add_file", "add_dir"):
        original = getattr(wandb.Artifact, method)

        def record(
            self: Any, *args: Any, _name: str = method, _original: Any = original, **kwargs: Any
        ) -> Any:
            policies.append((_name, kwargs.get("policy")))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(wandb.Artifact, method, record)
    folder = tmp_path / "checkpoints"
    (folder / "sharded.ckpt").mkdir(parents=True)
    (folder / "sharded.ckpt" / META_FILE).write_bytes(b"index")
    (folder / "best.ckpt").write_bytes(b"weights")
    options = {} if policy is None else {"add_file_policy": policy}
    logger = WandbLogger(save_dir=tmp_path, offline=True, log_model="all", **options)  # type: ignore[arg-type]
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.after_save_checkpoint(
        SimpleNamespace(
            dirpath=folder,
            best_model_path=str(folder / "best.ckpt"),
            last_model_path=str(folder / "sharded.ckpt"),
        )
    )
    run_id = _finish(logger)

    assert ("add_file", expected) in policies and ("add_dir", expected) in policies
    assert {p for name, p in policies if name in ("add_file", "add_dir")} == {expected}
    artifacts = [
        r.artifact for r in _records(tmp_path, run_id) if r.WhichOneof("record_type") == "artifact"
    ]
    contents = sorted(sorted(e.path for e in a.manifest.contents) for a in artifacts)
    assert contents == [["model.ckpt"], [f"model.ckpt/{META_FILE}"]]


def test_a_bad_add_file_policy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match='"mutable" or "immutable"'):
        WandbLogger(save_dir=tmp_path, add_file_policy="frozen")  # type: ignore[arg-type]


def test_watch_calls_the_runs_watch(tmp_path: Path) -> None:
    run, model = _FakeRun(), torch.nn.Linear(2, 2)
    logger = WandbLogger(experiment=run, save_dir=tmp_path)
    logger.watch(model)
    logger.watch(model, log="all", log_freq=5, log_graph=False)
    watched = [(args, kwargs) for name, args, kwargs in run.calls if name == "watch"]
    assert watched == [
        ((model,), {"log": "gradients", "log_freq": 100, "log_graph": True}),
        ((model,), {"log": "all", "log_freq": 5, "log_graph": False}),
    ]


def test_use_artifact_records_the_use_on_the_run(tmp_path: Path) -> None:
    run = _FakeRun()
    logger = WandbLogger(experiment=run, save_dir=tmp_path)
    assert logger.use_artifact("team/mnist/model-1a2b:v3", artifact_type="model") is run.artifact
    assert ("use_artifact", ("team/mnist/model-1a2b:v3",), {"type": "model"}) in run.calls


class _FakeApi:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str | None]] = []
        self.found = _FakeArtifact()

    def artifact(self, name: str, type: str | None = None) -> _FakeArtifact:
        self.asked.append((name, type))
        return self.found


def test_download_artifact_without_a_run_reads_through_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = _FakeApi()
    monkeypatch.setattr(wandb, "Api", lambda: api)
    path = WandbLogger.download_artifact(
        "team/mnist/model-1a2b:v3", save_dir=tmp_path / "out", artifact_type="model"
    )
    assert path == str(tmp_path / "out")
    assert api.asked == [("team/mnist/model-1a2b:v3", "model")]


def test_download_artifact_records_the_use_on_the_current_wandb_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api, run = _FakeApi(), _FakeRun()
    monkeypatch.setattr(wandb, "Api", lambda: api)
    monkeypatch.setattr(wandb, "run", run)
    path = WandbLogger.download_artifact("model-1a2b:v3", save_dir=tmp_path, artifact_type="model")
    assert path == str(tmp_path)
    assert ("use_artifact", ("model-1a2b:v3",), {"type": "model"}) in run.calls and api.asked == []
    WandbLogger.download_artifact("model-1a2b:v3", use_artifact=False)  # no record: the API
    assert api.asked == [("model-1a2b:v3", None)]
    assert [name for name, _, _ in run.calls].count("use_artifact") == 1


def test_other_ranks_write_nothing(tmp_path: Path) -> None:
    run = _FakeRun()
    logger = WandbLogger(experiment=run, save_dir=tmp_path)
    trainkit.rank_zero_only.rank = 1
    try:
        logger.log_image(key="samples", images=["a.png"], caption=["a"], step=1)
        logger.log_audio(key="speech", audios=["a.wav"])
        logger.log_video(key="clips", videos=["a.gif"])
        logger.log_table(key="preds", columns=["a"], data=[[1]])
        logger.log_text(key="text", columns=["a"], data=[["x"]])
        logger.watch(torch.nn.Linear(2, 2))
        assert logger.use_artifact("model-1a2b:v3") is None
        # A logger that starts its own run: on this rank, a stand-in that does nothing,
        # as Lightning's experiment is there (code that logs from every rank runs).
        own = WandbLogger(save_dir=tmp_path / "own", offline=True)
        assert own.experiment.log({"image": 1}) is None
    finally:
        trainkit.rank_zero_only.rank = None
    assert run.calls == []
    assert not (tmp_path / "own").exists()


def test_a_given_run_without_define_metric_is_logged_to(tmp_path: Path) -> None:
    # Projects fake their W&B run in tests; one without define_metric still takes rows.
    rows: list[dict[str, Any]] = []

    class Bare:
        id, project = "bare1", "bare-project"

        def log(self, row: dict[str, Any]) -> None:
            rows.append(row)

    logger = WandbLogger(save_dir=tmp_path, experiment=Bare())  # type: ignore[arg-type]
    logger.log_metrics({"loss": 0.5}, step=3)
    assert rows == [{"loss": 0.5, "trainer/global_step": 3}]

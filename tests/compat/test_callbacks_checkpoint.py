"""ModelCheckpoint as Lightning documents it: names, schedules, scores, state."""

from __future__ import annotations

import os
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import ModelCheckpoint
from trainkit.checkpoint.files import CheckpointError, load

SCORES = [0.5, 0.3, 0.9, 0.1]


class Scored(Classifier):
    """Logs a scripted ``val_score`` (one value per epoch) and ``val/acc``."""

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_score", SCORES[self.current_epoch])
        self.log("val/acc", 1.0 - SCORES[self.current_epoch])


def _fit(tmp_path: Path, callback: ModelCheckpoint, epochs: int = 3, **kwargs: Any) -> Any:
    options = {**QUIET, **kwargs}
    trainer = trainkit.Trainer(
        max_epochs=epochs,
        callbacks=[callback],
        default_root_dir=tmp_path,
        num_sanity_val_steps=0,
        **options,
    )
    trainer.fit(Scored(), loader(blobs(64), 32), loader(blobs(32), 32))
    return trainer


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_class_constants() -> None:
    assert ModelCheckpoint.CHECKPOINT_JOIN_CHAR == "-"
    assert ModelCheckpoint.CHECKPOINT_EQUALS_CHAR == "="
    assert ModelCheckpoint.CHECKPOINT_NAME_LAST == "last"
    assert ModelCheckpoint.FILE_EXTENSION == ".ckpt"


def test_format_checkpoint_name_inserts_metric_names_and_format_specs() -> None:
    metrics = {"epoch": 1, "step": 20, "val_loss": torch.tensor(0.5)}
    auto = ModelCheckpoint(filename="{epoch}-{step}-{val_loss:.2f}")
    assert auto.format_checkpoint_name(metrics) == "epoch=1-step=20-val_loss=0.50.ckpt"
    plain = ModelCheckpoint(filename="{epoch}-{val_loss:.2f}", auto_insert_metric_name=False)
    assert plain.format_checkpoint_name(metrics) == "1-0.50.ckpt"
    padded = ModelCheckpoint(filename="name-{epoch:03d}")
    assert padded.format_checkpoint_name(metrics) == "name-epoch=001.ckpt"


def test_default_filename_is_epoch_and_step() -> None:
    assert ModelCheckpoint().format_checkpoint_name({"epoch": 1, "step": 2}) == (
        "epoch=1-step=2.ckpt"
    )


def test_format_checkpoint_name_version_prefix_and_dirpath(tmp_path: Path) -> None:
    callback = ModelCheckpoint(dirpath=tmp_path)
    metrics = {"epoch": 1, "step": 2}
    assert callback.format_checkpoint_name(metrics, ver=3) == str(
        tmp_path / "epoch=1-step=2-v3.ckpt"
    )
    assert callback.format_checkpoint_name(metrics, prefix="pre") == str(
        tmp_path / "pre-epoch=1-step=2.ckpt"
    )
    assert callback.format_checkpoint_name({}, filename="last") == str(tmp_path / "last.ckpt")


def test_a_name_that_was_not_logged_is_written_as_zero() -> None:
    callback = ModelCheckpoint(filename="{epoch}_{missing}")
    with pytest.warns(UserWarning, match="'missing', which was not logged"):
        assert callback.format_checkpoint_name({"epoch": 1}) == "epoch=1_missing=0.ckpt"


def test_slash_in_a_metric_name_becomes_underscore_with_a_warning() -> None:
    callback = ModelCheckpoint(filename="{epoch}-{val/loss:.2f}")
    with pytest.warns(UserWarning, match="'/' in a file name becomes '_'"):
        name = callback.format_checkpoint_name({"epoch": 1, "val/loss": 0.5})
    assert name == "epoch=1-val_loss=0.50.ckpt"


def test_top_k_scores_and_paths(tmp_path: Path) -> None:
    callback = ModelCheckpoint(
        monitor="val_score", save_top_k=2, filename="{epoch}-{val_score:.2f}", save_last=False
    )
    _fit(tmp_path, callback)
    folder = tmp_path / "checkpoints"
    assert _names(folder) == ["epoch=0-val_score=0.50.ckpt", "epoch=1-val_score=0.30.ckpt"]
    assert callback.best_model_path == str(folder / "epoch=1-val_score=0.30.ckpt")
    assert isinstance(callback.best_model_score, torch.Tensor)
    assert callback.best_model_score.item() == pytest.approx(0.3)
    assert callback.kth_best_model_path == str(folder / "epoch=0-val_score=0.50.ckpt")
    assert callback.kth_value.item() == pytest.approx(0.5)
    assert callback.current_score is not None
    assert callback.current_score.item() == pytest.approx(0.3)  # the last file saved
    assert {Path(p).name: round(v.item(), 4) for p, v in callback.best_k_models.items()} == {
        "epoch=0-val_score=0.50.ckpt": 0.5,
        "epoch=1-val_score=0.30.ckpt": 0.3,
    }


def test_mode_max_keeps_the_highest(tmp_path: Path) -> None:
    callback = ModelCheckpoint(monitor="val_score", mode="max", filename="{epoch}", save_last=False)
    _fit(tmp_path, callback)
    assert _names(tmp_path / "checkpoints") == ["epoch=2.ckpt"]
    assert callback.best_model_score is not None
    assert callback.best_model_score.item() == pytest.approx(0.9)


def test_save_top_k_zero_saves_no_scored_file(tmp_path: Path) -> None:
    callback = ModelCheckpoint(monitor="val_score", save_top_k=0, save_last=False)
    _fit(tmp_path, callback)
    assert _names(tmp_path / "checkpoints") == []
    assert callback.best_model_path == ""


def test_save_top_k_minus_one_keeps_every_file(tmp_path: Path) -> None:
    callback = ModelCheckpoint(monitor="val_score", save_top_k=-1, save_last=False)
    _fit(tmp_path, callback)
    assert _names(tmp_path / "checkpoints") == [
        "epoch=0-step=2.ckpt",
        "epoch=1-step=4.ckpt",
        "epoch=2-step=6.ckpt",
    ]


@pytest.mark.parametrize(("monitor", "mode", "best"), [("step", "max", 6), ("epoch", "min", 0)])
def test_monitor_epoch_or_step(tmp_path: Path, monitor: str, mode: str, best: int) -> None:
    callback = ModelCheckpoint(monitor=monitor, mode=mode, save_last=False)
    _fit(tmp_path, callback)
    assert callback.best_model_score is not None
    assert int(callback.best_model_score) == best
    assert len(_names(tmp_path / "checkpoints")) == 1


def test_monitor_a_metric_name_with_a_slash(tmp_path: Path) -> None:
    callback = ModelCheckpoint(monitor="val/acc", mode="max", save_last=False)
    _fit(tmp_path, callback)
    assert callback.best_model_score is not None
    assert callback.best_model_score.item() == pytest.approx(0.7)
    assert _names(tmp_path / "checkpoints") == ["epoch=1-step=4.ckpt"]


def test_every_n_epochs_zero_saves_no_scored_file(tmp_path: Path) -> None:
    callback = ModelCheckpoint(every_n_epochs=0, save_last=False)
    _fit(tmp_path, callback)
    assert _names(tmp_path / "checkpoints") == []


def test_every_n_train_steps(tmp_path: Path) -> None:
    callback = ModelCheckpoint(every_n_train_steps=3, save_top_k=-1, save_last=False)
    _fit(tmp_path, callback)
    assert _names(tmp_path / "checkpoints") == ["epoch=1-step=3.ckpt", "epoch=2-step=6.ckpt"]


class SetsTheStepSchedule(trainkit.Callback):
    """Sets the checkpoint's private step schedule before training, as projects do."""

    def on_fit_start(self, trainer: Any, module: Any) -> None:
        callback = trainer.checkpoint_callback
        assert callback._every_n_train_steps == 0
        callback._every_n_train_steps = 3


def test_every_n_train_steps_under_lightnings_private_name(tmp_path: Path) -> None:
    callback = ModelCheckpoint(save_top_k=-1, save_last=False, every_n_epochs=0)
    trainer = trainkit.Trainer(
        max_epochs=3,
        callbacks=[SetsTheStepSchedule(), callback],
        default_root_dir=tmp_path,
        **QUIET,
    )
    trainer.fit(Scored(), loader(blobs(64), 32), loader(blobs(32), 32))
    assert callback.every_n_train_steps == 3
    assert _names(tmp_path / "checkpoints") == ["epoch=1-step=3.ckpt", "epoch=2-step=6.ckpt"]


def test_train_time_interval_accepts_a_timedelta(tmp_path: Path) -> None:
    callback = ModelCheckpoint(
        train_time_interval=timedelta(microseconds=1), save_top_k=-1, save_last=False
    )
    _fit(tmp_path, callback, epochs=1)
    assert _names(tmp_path / "checkpoints") == ["epoch=0-step=1.ckpt", "epoch=0-step=2.ckpt"]


def test_schedules_are_mutually_exclusive() -> None:
    with pytest.raises(ValueError, match="takes one of"):
        ModelCheckpoint(every_n_train_steps=2, train_time_interval=timedelta(seconds=1))


def test_save_last_false_or_none_writes_no_last(tmp_path: Path) -> None:
    for save_last in (False, None):
        callback = ModelCheckpoint(save_last=save_last)
        _fit(tmp_path / str(save_last), callback, epochs=1)
        assert _names(tmp_path / str(save_last) / "checkpoints") == ["epoch=0-step=2.ckpt"]
        assert callback.last_model_path == ""


def test_save_last_writes_last_ckpt_and_last_model_path(tmp_path: Path) -> None:
    callback = ModelCheckpoint(save_last=True, every_n_epochs=0)
    _fit(tmp_path, callback, epochs=2)
    # last.ckpt follows every epoch, even with no scored schedule.
    assert _names(tmp_path / "checkpoints") == ["last.ckpt"]
    assert callback.last_model_path == str(tmp_path / "checkpoints" / "last.ckpt")
    assert load(tmp_path / "checkpoints" / "last.ckpt")["loop"]["epoch"] == 2


def test_checkpoint_name_last_can_be_a_template(tmp_path: Path) -> None:
    callback = ModelCheckpoint(save_top_k=0, save_last=True)
    callback.CHECKPOINT_NAME_LAST = "{epoch}-last"
    _fit(tmp_path, callback, epochs=2)
    assert _names(tmp_path / "checkpoints") == ["epoch=1-last.ckpt"]


def test_save_weights_only_writes_no_optimizer_state(tmp_path: Path) -> None:
    callback = ModelCheckpoint(save_weights_only=True, save_last=False)
    _fit(tmp_path, callback, epochs=1)
    path = tmp_path / "checkpoints" / "epoch=0-step=2.ckpt"
    checkpoint = load(path)
    assert "state_dict" in checkpoint
    assert "optimizer_states" not in checkpoint and "callbacks" not in checkpoint
    assert "rng" not in checkpoint and "callback_metrics" not in checkpoint
    # Lightning's weights-only file keeps the counters: tools print a file's epoch.
    assert (checkpoint["epoch"], checkpoint["global_step"]) == (0, 2)
    assert "loops" in checkpoint and "hyper_parameters" in checkpoint
    assert isinstance(Scored.load_from_checkpoint(path), Scored)
    with pytest.raises(CheckpointError, match="save_weights_only=True"):
        trainkit.Trainer(max_epochs=2, **QUIET).fit(
            Scored(), loader(blobs(64), 32), ckpt_path=str(path)
        )


def test_dirpath_default_is_under_the_root_dir(tmp_path: Path) -> None:
    callback = ModelCheckpoint()
    _fit(tmp_path, callback, epochs=1)
    assert callback.dirpath == str(tmp_path / "checkpoints")


def test_save_on_train_epoch_end_false_saves_after_each_validation(tmp_path: Path) -> None:
    callback = ModelCheckpoint(save_on_train_epoch_end=False, save_top_k=-1, save_last=False)
    _fit(tmp_path, callback, epochs=1, val_check_interval=1)
    # Validation after each of the two batches; each is followed by a save.
    assert _names(tmp_path / "checkpoints") == ["epoch=0-step=1.ckpt", "epoch=0-step=2.ckpt"]


def test_state_dict_holds_lightnings_keys(tmp_path: Path) -> None:
    callback = ModelCheckpoint(monitor="val_score", save_top_k=2)
    _fit(tmp_path, callback)
    state = callback.state_dict()
    for key in (
        "monitor",
        "best_model_score",
        "best_model_path",
        "current_score",
        "dirpath",
        "best_k_models",
        "kth_best_model_path",
        "kth_value",
        "last_model_path",
    ):
        assert key in state, key
    restored = ModelCheckpoint(dirpath=tmp_path / "checkpoints", monitor="val_score", save_top_k=2)
    restored.load_state_dict(state)
    assert restored.best_model_path == callback.best_model_path
    assert restored.kth_best_model_path == callback.kth_best_model_path
    assert restored.best_k_models.keys() == callback.best_k_models.keys()
    assert restored.last_model_path == callback.last_model_path


def test_state_is_saved_in_the_checkpoint_under_its_state_key(tmp_path: Path) -> None:
    callback = ModelCheckpoint(monitor="val_score", save_last=True)
    _fit(tmp_path, callback, epochs=1)
    assert callback.state_key == (
        "ModelCheckpoint{'monitor': 'val_score', 'mode': 'min', 'every_n_train_steps': 0, "
        "'every_n_epochs': 1, 'train_time_interval': None}"
    )
    saved = load(tmp_path / "checkpoints" / "last.ckpt")["callbacks"][callback.state_key]
    assert saved["best_model_path"] == callback.best_model_path


def test_load_state_dict_from_another_folder_keeps_only_best_model_path() -> None:
    callback = ModelCheckpoint(dirpath="/elsewhere")
    with pytest.warns(UserWarning, match="Only best_model_path is restored"):
        callback.load_state_dict(
            {"dirpath": "/old", "best_model_path": "/old/a.ckpt", "best_k_models": {"x": 1.0}}
        )
    assert callback.best_model_path == "/old/a.ckpt"
    assert callback.best_k_models == {}


def test_verbose_says_what_is_saved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    callback = ModelCheckpoint(monitor="val_score", verbose=True, save_last=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _fit(tmp_path, callback, epochs=3)
    out = capsys.readouterr().out
    assert "Epoch 0, global step 2: 'val_score' reached 0.50000 (best 0.50000)" in out
    assert "Epoch 2, global step 6: 'val_score' was not in top 1" in out


def test_check_monitor_top_k_and_to_yaml(tmp_path: Path) -> None:
    callback = ModelCheckpoint(monitor="val_score", save_top_k=2, save_last=False)
    trainer = _fit(tmp_path, callback)
    assert callback.check_monitor_top_k(trainer, torch.tensor(0.2))
    assert not callback.check_monitor_top_k(trainer, torch.tensor(0.6))
    assert not callback.check_monitor_top_k(trainer, None)
    callback.to_yaml()
    text = (tmp_path / "checkpoints" / "best_k_models.yaml").read_text()
    assert "epoch=0-step=2.ckpt: 0.5" in text and "epoch=1-step=4.ckpt: 0.3" in text


def test_fast_dev_run_saves_nothing(tmp_path: Path) -> None:
    callback = ModelCheckpoint()
    _fit(tmp_path, callback, fast_dev_run=True)
    assert _names(tmp_path / "checkpoints") == []


def test_save_last_is_off_by_default_and_last_falls_back_to_the_newest_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Lightning's default: ModelCheckpoint() keeps no last.ckpt.
    options = {**QUIET, "enable_checkpointing": True, "default_root_dir": tmp_path}
    callback = ModelCheckpoint(dirpath=tmp_path / "mine")
    trainkit.Trainer(max_epochs=2, callbacks=[callback], **options).fit(
        Classifier(), loader(blobs(64), 32)
    )
    assert sorted(os.listdir(tmp_path / "mine")) == ["epoch=1-step=4.ckpt"]
    # ckpt_path="last" then resumes from the newest checkpoint, and says so.
    again = ModelCheckpoint(dirpath=tmp_path / "mine")
    trainer = trainkit.Trainer(max_epochs=3, callbacks=[again], **options)
    trainer.fit(Classifier(), loader(blobs(64), 32), ckpt_path="last")
    out = capsys.readouterr().out
    assert "resumes from" in out and "epoch=1-step=4.ckpt" in out and "no last.ckpt" in out
    assert trainer.global_step == 6


def test_the_trainers_own_checkpoint_callback_keeps_last(tmp_path: Path) -> None:
    options = {**QUIET, "enable_checkpointing": True, "default_root_dir": tmp_path}
    trainkit.Trainer(max_epochs=1, **options).fit(Classifier(), loader(blobs(64), 32))
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["epoch=0-step=2.ckpt", "last.ckpt"]


def test_a_subclass_overriding_the_save_and_remove_steps_sees_every_file(tmp_path: Path) -> None:
    # Lightning's private steps, which projects override (scvi-tools writes a model
    # folder beside each file and removes it with the file).
    from trainkit.callbacks import ModelCheckpoint

    calls: list[tuple[str, str]] = []

    class Folders(ModelCheckpoint):
        def _save_checkpoint(self, trainer: Any, filepath: str) -> None:
            super()._save_checkpoint(trainer, filepath)
            calls.append(("save", os.path.basename(filepath)))

        def _remove_checkpoint(self, trainer: Any, filepath: str) -> None:
            super()._remove_checkpoint(trainer, filepath)
            calls.append(("remove", os.path.basename(filepath)))

        def _update_best_and_save(self, current: Any, trainer: Any, candidates: Any) -> None:
            super()._update_best_and_save(current, trainer, candidates)
            calls.append(("best", os.path.basename(self.best_model_path)))

    callback = Folders(
        dirpath=tmp_path, filename="{epoch}", monitor="train/loss", mode="min", save_top_k=1
    )
    trainer = trainkit.Trainer(
        max_epochs=4, callbacks=[callback], **{**QUIET, "enable_checkpointing": True}
    )
    trainer.fit(Classifier(), loader(blobs(64)))
    saves = [name for kind, name in calls if kind == "save"]
    assert len(saves) >= 2 and all(("best", name) in calls for name in saves), calls
    removed = [name for kind, name in calls if kind == "remove"]
    assert len(removed) == len(saves) - 1  # top 1: every earlier best left, through the hook
    assert sorted(p.name for p in tmp_path.glob("epoch=*.ckpt")) == [saves[-1]]


def test_enable_version_counter_false_says_it_changes_nothing() -> None:
    # Lightning would then overwrite a same-named file; trainkit never overwrites
    # another run's, so the option cannot do what it asks: it says so, once built.
    with pytest.warns(UserWarning, match=r"enable_version_counter=False\) has no effect"):
        ModelCheckpoint(enable_version_counter=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ModelCheckpoint(enable_version_counter=True)


@pytest.mark.parametrize("where", ["dirpath", "logger", "no logger"])
def test_the_private_resolve_ckpt_dir_names_the_folder_fit_saves_to(
    tmp_path: Path, where: str
) -> None:
    # Lightning's name-mangled ModelCheckpoint.__resolve_ckpt_dir, which projects
    # call before fit to learn where the checkpoints will go.
    callback = ModelCheckpoint(dirpath=tmp_path / "given" if where == "dirpath" else None)
    options = {**QUIET, "enable_checkpointing": True}
    if where == "logger":
        options["logger"] = trainkit.loggers.CSVLogger(tmp_path / "logs", name="run")
    trainer = trainkit.Trainer(
        max_epochs=1, default_root_dir=tmp_path, callbacks=[callback], **options
    )
    before = callback._ModelCheckpoint__resolve_ckpt_dir(trainer)  # type: ignore[attr-defined]
    trainer.fit(Classifier(), loader(blobs(64)))
    expected = {
        "dirpath": tmp_path / "given",
        "logger": tmp_path / "logs" / "run" / "version_0" / "checkpoints",
        "no logger": tmp_path / "checkpoints",
    }[where]
    assert Path(before) == Path(callback.dirpath) == expected
    assert Path(callback.best_model_path).parent == expected


def test_the_folder_holds_after_fit_and_is_the_loggers_for_a_run_without_fit(
    tmp_path: Path,
) -> None:
    # A callback reading trainer.checkpoint_callback.dirpath in test() after fit finds
    # fit's folder; a Trainer that only tests, its logger's (as in Lightning).
    seen: list[str | None] = []

    class Reads(trainkit.Callback):
        def on_test_start(self, trainer: Any, module: Any) -> None:
            seen.append(trainer.checkpoint_callback.dirpath)

    options = {**QUIET, "logger": True, "enable_checkpointing": True}
    trainer = trainkit.Trainer(
        max_epochs=1, default_root_dir=tmp_path, callbacks=[Reads()], **options
    )
    model = Classifier()
    trainer.fit(model, loader(blobs(32), 16))
    trainer.test(model, loader(blobs(16), 16), verbose=False)
    only = trainkit.Trainer(default_root_dir=tmp_path, callbacks=[Reads()], **options)
    only.test(model, loader(blobs(16), 16), verbose=False)
    assert seen == [
        str(tmp_path / "logs" / "version_0" / "checkpoints"),
        str(tmp_path / "logs" / "version_1" / "checkpoints"),
    ]
    assert trainer.checkpoint_callback.dirpath == seen[0]


def test_a_logger_class_of_ones_own_gets_lightnings_checkpoint_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # <save_dir>/<name>/<version>/checkpoints whatever its log_dir says, the name as str.
    from trainkit.lightning.loggers.logger import Logger

    class Own(Logger):
        def __init__(self, name: str | None, log_dir: str) -> None:
            super().__init__()
            self._name, self._log_dir = name, log_dir

        @property
        def name(self) -> str | None:  # Lightning's Logger.name may be None
            return self._name

        @property
        def version(self) -> int:
            return 3

        @property
        def save_dir(self) -> str:
            return str(tmp_path / "save")

        @property
        def log_dir(self) -> str:
            return self._log_dir

        def log_metrics(self, metrics: Any, step: int | None = None) -> None: ...

        def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None: ...

    monkeypatch.chdir(tmp_path)
    for name in ("exp", None):
        options = {**QUIET, "enable_checkpointing": True, "default_root_dir": tmp_path}
        options["logger"] = Own(name, str(tmp_path / "elsewhere"))
        trainer = trainkit.Trainer(max_epochs=1, **options)
        trainer.fit(Classifier(), loader(blobs(32), 16))
        folder = tmp_path / "save" / str(name) / "version_3" / "checkpoints"
        assert Path(trainer.checkpoint_callback.best_model_path).parent == folder
    assert not (tmp_path / "elsewhere").exists()

"""ModelCheckpoint: names, schedules, top-k, last.ckpt, and never touching others' files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import ModelCheckpoint
from trainkit.checkpoint.files import load

SCORES = [0.5, 0.3, 0.9, 0.1, 0.4, 0.2]


class Scored(Classifier):
    """Logs a scripted val/score, one per epoch."""

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val/score", SCORES[self.current_epoch])


def _fit(
    tmp_path: Path, callback: ModelCheckpoint, epochs: int = 6, **kwargs: Any
) -> trainkit.Trainer:
    trainer = trainkit.Trainer(
        max_epochs=epochs,
        callbacks=[callback],
        default_root_dir=tmp_path,
        num_sanity_val_steps=0,
        **QUIET,
        **kwargs,
    )
    trainer.fit(Scored(), loader(blobs(64), 32), loader(blobs(32), 32))
    return trainer


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_top_k_keeps_the_best_scores_and_last(tmp_path: Path) -> None:
    callback = ModelCheckpoint(
        monitor="val/score",
        mode="min",
        save_top_k=2,
        filename="{epoch}-{val/score:.2f}",
        save_last=True,
    )
    _fit(tmp_path, callback)
    folder = tmp_path / "checkpoints"
    assert _names(folder) == [
        "epoch=3-val_score=0.10.ckpt",
        "epoch=5-val_score=0.20.ckpt",
        "last.ckpt",
    ]
    assert callback.best_model_score == pytest.approx(0.1)
    assert Path(callback.best_model_path).name == "epoch=3-val_score=0.10.ckpt"
    # last.ckpt is the newest state (after epoch 5), a complete checkpoint of its own.
    assert load(folder / "last.ckpt")["loop"]["epoch"] == 6


def test_a_subclass_extending_monitor_candidates_ranks_by_what_it_adds(tmp_path: Path) -> None:
    # Lightning's private _monitor_candidates(self, trainer), which projects override to
    # monitor a value computed from the logged ones.
    class Negated(ModelCheckpoint):
        def _monitor_candidates(self, trainer: trainkit.Trainer) -> dict[str, Any]:
            candidates = super()._monitor_candidates(trainer)
            candidates["negated"] = -candidates["val/score"]
            return candidates

    callback = Negated(monitor="negated", mode="min", save_top_k=1, filename="{epoch}")
    _fit(tmp_path, callback)
    assert _names(tmp_path / "checkpoints") == ["epoch=2.ckpt"]  # the highest score, 0.9
    assert callback.best_model_score == pytest.approx(-0.9)


def test_mode_max_and_keep_all(tmp_path: Path) -> None:
    callback = ModelCheckpoint(monitor="val/score", mode="max", save_top_k=-1, save_last=False)
    _fit(tmp_path, callback)
    assert len(list((tmp_path / "checkpoints").iterdir())) == 6
    assert callback.best_model_score == pytest.approx(0.9)


def test_without_monitor_the_newest_are_kept(tmp_path: Path) -> None:
    callback = ModelCheckpoint(every_n_train_steps=1, save_top_k=2, save_last=True)
    _fit(tmp_path, callback, epochs=2)  # 2 steps an epoch
    assert _names(tmp_path / "checkpoints") == [
        "epoch=1-step=3.ckpt",
        "epoch=1-step=4.ckpt",
        "last.ckpt",
    ]


def test_every_n_epochs(tmp_path: Path) -> None:
    callback = ModelCheckpoint(every_n_epochs=2, save_top_k=-1, save_last=False)
    _fit(tmp_path, callback)
    assert _names(tmp_path / "checkpoints") == [
        "epoch=1-step=4.ckpt",
        "epoch=3-step=8.ckpt",
        "epoch=5-step=12.ckpt",
    ]


def test_train_time_interval(tmp_path: Path) -> None:
    callback = ModelCheckpoint(train_time_interval=1e-9, save_top_k=-1, save_last=False)
    _fit(tmp_path, callback, epochs=1)
    # Due after every step; saved at every resume point (after batch 0 and after the epoch).
    assert _names(tmp_path / "checkpoints") == ["epoch=0-step=1.ckpt", "epoch=0-step=2.ckpt"]


def test_the_ranks_agree_on_the_clock_only_where_it_was_read() -> None:
    # Each process reads its own clock in on_train_batch_end, and the ranks agree at the
    # resume point after: a collective a step. A subclass that calls the hook every n-th
    # step (to agree less often, as projects write) is agreed with every n-th step.
    from types import SimpleNamespace

    exchanged: list[str] = []

    def exchange(point: str, values: list[int]) -> list[list[int]]:
        exchanged.append(point)
        return [values, values]

    trainer = SimpleNamespace(world_size=2, strategy=SimpleNamespace(exchange=exchange))

    class EveryThird(ModelCheckpoint):
        def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
            if trainer.global_step % 3 == 0:
                super().on_train_batch_end(trainer, module, *args)

    for kind, agreed in [(ModelCheckpoint, 6), (EveryThird, 2)]:
        callback = kind(train_time_interval=3600)
        exchanged.clear()
        for step in range(1, 7):
            trainer.global_step = step
            callback.on_train_batch_end(trainer, None, None, None, step - 1)  # type: ignore[arg-type]
            callback.on_resume_point(trainer, None)  # type: ignore[arg-type]
        assert len(exchanged) == agreed


def test_a_file_another_run_wrote_is_never_overwritten_or_deleted(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    theirs = folder / "epoch=0-step=2.ckpt"
    theirs.write_bytes(b"someone else's file")
    callback = ModelCheckpoint(save_top_k=1, save_last=True)
    _fit(tmp_path, callback, epochs=2)
    assert theirs.read_bytes() == b"someone else's file"
    assert _names(folder) == ["epoch=0-step=2.ckpt", "epoch=1-step=4.ckpt", "last.ckpt"]


def test_same_name_twice_gets_a_version_suffix_for_foreign_files(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "fixed.ckpt").write_bytes(b"foreign")
    callback = ModelCheckpoint(filename="fixed", save_top_k=-1, save_last=False)
    _fit(tmp_path, callback, epochs=1)
    assert _names(folder) == ["fixed-v1.ckpt", "fixed.ckpt"]


def test_a_second_run_keeps_the_first_runs_last_ckpt_and_last_resumes_the_newest(
    tmp_path: Path,
) -> None:
    # Two fresh runs saving to one folder: the second writes last-v1.ckpt (as Lightning's
    # version counter names it) instead of replacing the first run's only checkpoint,
    # and ckpt_path="last" resumes the newest, which its resume then writes again.
    folder = tmp_path / "shared"

    def run(epochs: int, ckpt_path: str | None = None) -> trainkit.Trainer:
        callback = ModelCheckpoint(dirpath=folder, save_top_k=0, save_last=True)
        trainer = trainkit.Trainer(max_epochs=epochs, callbacks=[callback], **QUIET)
        trainer.fit(Classifier(), loader(blobs(64), 32), ckpt_path=ckpt_path)
        return trainer

    run(2)
    first = (folder / "last.ckpt").read_bytes()
    run(1)
    assert _names(folder) == ["last-v1.ckpt", "last.ckpt"]
    assert (folder / "last.ckpt").read_bytes() == first
    assert load(folder / "last-v1.ckpt")["global_step"] == 2
    resumed = run(2, "last")
    assert resumed.ckpt_path == str(folder / "last-v1.ckpt") and resumed.global_step == 4
    assert _names(folder) == ["last-v1.ckpt", "last.ckpt"]
    assert load(folder / "last-v1.ckpt")["global_step"] == 4
    assert (folder / "last.ckpt").read_bytes() == first


def test_validation_every_other_epoch_saves_after_validation_only(tmp_path: Path) -> None:
    # As in Lightning: an epoch without validation would rank its weights by the value
    # of the previous epoch's; the files are the validated epochs', each with its score.
    callback = ModelCheckpoint(monitor="val/score", save_top_k=-1, filename="{epoch}")
    _fit(tmp_path, callback, epochs=5, check_val_every_n_epoch=2)
    assert _names(tmp_path / "checkpoints") == ["epoch=1.ckpt", "epoch=3.ckpt"]
    scores = {os.path.basename(p): float(v) for p, v in callback.best_k_models.items()}
    assert scores == pytest.approx({"epoch=1.ckpt": SCORES[1], "epoch=3.ckpt": SCORES[3]})
    # Without validation data the epochs' ends are still where it saves.
    plain = ModelCheckpoint(dirpath=tmp_path / "plain", save_top_k=-1, filename="{epoch}")
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[plain], check_val_every_n_epoch=2, **QUIET)
    trainer.fit(Classifier(), loader(blobs(64), 32))
    assert _names(tmp_path / "plain") == ["epoch=0.ckpt", "epoch=1.ckpt"]


class ScoredPerRun(Classifier):
    """Logs a scripted val/score per validation run; remembers the weights each scored."""

    def __init__(self) -> None:
        super().__init__()
        self.validated: list[dict[str, torch.Tensor]] = []

    def on_validation_epoch_end(self) -> None:
        if not self.trainer.sanity_checking:
            self.log("val/score", SCORES[len(self.validated)])
            self.validated.append({k: v.clone() for k, v in self.state_dict().items()})


def _fit_8_steps(
    tmp_path: Path, callback: ModelCheckpoint, module: trainkit.Module, val_check_interval: float
) -> None:
    # One epoch of 8 steps, validated every val_check_interval.
    trainer = trainkit.Trainer(
        max_epochs=1,
        callbacks=[callback],
        default_root_dir=tmp_path,
        num_sanity_val_steps=0,
        val_check_interval=val_check_interval,
        **QUIET,
    )
    trainer.fit(module, loader(blobs(256), 32), loader(blobs(32), 32))


def test_validation_within_epochs_saves_after_each_validation(tmp_path: Path) -> None:
    # As in Lightning: validation 4 times an epoch (every 2 of 8 steps); each save holds
    # the weights its score was measured on, so the best file is the best validated model.
    callback = ModelCheckpoint(monitor="val/score", save_top_k=2, filename="{step}")
    module = ScoredPerRun()
    _fit_8_steps(tmp_path, callback, module, val_check_interval=0.25)
    # Scores 0.5, 0.3, 0.9, 0.1 at steps 2, 4, 6, 8: the two lowest are kept.
    assert _names(tmp_path / "checkpoints") == ["step=4.ckpt", "step=8.ckpt"]
    assert float(callback.best_model_score) == pytest.approx(0.1)  # type: ignore[arg-type]
    second = load(tmp_path / "checkpoints" / "step=4.ckpt")["state_dict"]
    assert all(torch.equal(second[k], v) for k, v in module.validated[1].items())


def test_unscored_files_also_save_at_the_epoch_end_with_validation_within_it(
    tmp_path: Path,
) -> None:
    # Without a monitor nothing is ranked: after each validation (steps 3 and 6, as in
    # Lightning) and at the epoch's end (step 8), so the newest state is kept.
    saved: list[int] = []

    class Record(ModelCheckpoint):
        def _save_checkpoint(self, trainer: Any, filepath: str) -> None:
            saved.append(trainer.global_step)
            super()._save_checkpoint(trainer, filepath)

    _fit_8_steps(tmp_path, Record(filename="{step}"), Scored(), val_check_interval=3)
    assert saved == [3, 6, 8]
    assert _names(tmp_path / "checkpoints") == ["step=8.ckpt"]


def test_missing_monitor_warns_and_still_saves_last(tmp_path: Path) -> None:
    callback = ModelCheckpoint(monitor="val/typo", save_last=True)
    with pytest.warns(UserWarning, match="found no value for it"):
        _fit(tmp_path, callback, epochs=1)
    assert _names(tmp_path / "checkpoints") == ["last.ckpt"]


def test_ckpt_path_last_without_a_checkpoint_starts_fresh(tmp_path: Path) -> None:
    trainer = trainkit.Trainer(max_epochs=1, default_root_dir=tmp_path, **QUIET)
    with pytest.warns(UserWarning, match="there is no last checkpoint available"):
        trainer.fit(Classifier(), loader(blobs(64), 32), ckpt_path="last")
    assert trainer.global_step == 2


def test_resume_continues_training_from_last(tmp_path: Path) -> None:
    def run(epochs: int, ckpt: str | None) -> Classifier:
        torch.manual_seed(0)
        model = Classifier()
        trainer = trainkit.Trainer(
            max_epochs=epochs,
            default_root_dir=tmp_path,
            seed=0,
            callbacks=[ModelCheckpoint(every_n_train_steps=1, save_last=True)],
            **QUIET,
        )
        trainer.fit(model, loader(blobs(96), 32, shuffle=True), ckpt_path=ckpt)
        return model

    full = run(3, None)
    os.remove(tmp_path / "checkpoints" / "last.ckpt")
    for file in (tmp_path / "checkpoints").iterdir():
        file.unlink()
    run(1, None)
    resumed = run(3, "last")
    assert all(
        torch.equal(a, b) for a, b in zip(full.parameters(), resumed.parameters(), strict=True)
    )


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"mode='average'\) must be \"min\" or \"max\""):
        ModelCheckpoint(mode="average")
    with pytest.raises(ValueError, match="save_top_k=-2"):
        ModelCheckpoint(save_top_k=-2)
    with pytest.raises(ValueError, match="takes one of every_n_train_steps"):
        ModelCheckpoint(every_n_train_steps=2, every_n_epochs=1)


# ------------------------------------------------------------- per-run folders
def _fit_logged(tmp_path: Path, epochs: int, ckpt_path: str | None = None) -> trainkit.Trainer:
    # A default ModelCheckpoint and a CSV logger: the checkpoints follow the run's version.
    options = {**QUIET, "enable_checkpointing": True}
    options.pop("logger")
    trainer = trainkit.Trainer(
        max_epochs=epochs,
        default_root_dir=tmp_path,
        logger=trainkit.loggers.CSVLogger(tmp_path),
        **options,
    )
    trainer.fit(Classifier(), loader(blobs(64), 32), ckpt_path=ckpt_path)
    return trainer


def test_two_runs_of_one_config_keep_two_sets_of_checkpoints(tmp_path: Path) -> None:
    first = _fit_logged(tmp_path, epochs=3)
    second = _fit_logged(tmp_path, epochs=1)  # as `trainer.max_epochs=1` on the command line
    runs = tmp_path / "logs"
    assert first.checkpoint_callback is not None and second.checkpoint_callback is not None
    assert first.checkpoint_callback.dirpath == str(runs / "version_0" / "checkpoints")
    assert second.checkpoint_callback.dirpath == str(runs / "version_1" / "checkpoints")
    # Each run's last.ckpt is its own: the second run replaced nothing of the first's.
    assert load(runs / "version_0" / "checkpoints" / "last.ckpt")["loop"]["epoch"] == 3
    assert load(runs / "version_1" / "checkpoints" / "last.ckpt")["loop"]["epoch"] == 1
    assert _names(runs / "version_0" / "checkpoints") == ["epoch=2-step=6.ckpt", "last.ckpt"]
    # Where an older trainkit kept last.ckpt: a link to the newest run's.
    pointer = tmp_path / "checkpoints" / "last.ckpt"
    assert pointer.is_symlink() and pointer.resolve() == (
        runs / "version_1" / "checkpoints" / "last.ckpt"
    )


def test_last_resumes_the_newest_run_says_which_and_keeps_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fit_logged(tmp_path, epochs=1)
    _fit_logged(tmp_path, epochs=2)
    newest = tmp_path / "logs" / "version_1" / "checkpoints" / "last.ckpt"
    capsys.readouterr()
    resumed = _fit_logged(tmp_path, epochs=3, ckpt_path="last")
    assert f"ckpt_path='last' resumes from {newest}" in capsys.readouterr().out
    assert resumed.ckpt_path == str(newest)
    # The resumed run writes on in the run's folder and logs: no version_2.
    assert load(newest)["loop"]["epoch"] == 3
    assert _names(tmp_path / "logs") == ["version_0", "version_1"]
    assert load(tmp_path / "logs" / "version_0" / "checkpoints" / "last.ckpt")["loop"]["epoch"] == 1


def test_a_real_file_where_the_link_would_go_is_never_replaced(tmp_path: Path) -> None:
    # An older trainkit kept every run's files in <default_root_dir>/checkpoints.
    old = tmp_path / "checkpoints" / "last.ckpt"
    old.parent.mkdir()
    old.write_bytes(b"an earlier run's checkpoint")
    with pytest.warns(UserWarning, match=f"{old} is a checkpoint an earlier run wrote there"):
        _fit_logged(tmp_path, epochs=1)
    assert old.read_bytes() == b"an earlier run's checkpoint" and not old.is_symlink()
    assert (tmp_path / "logs" / "version_0" / "checkpoints" / "last.ckpt").is_file()


def test_an_explicit_dirpath_still_wins_with_a_logger(tmp_path: Path) -> None:
    callback = ModelCheckpoint(dirpath=tmp_path / "mine", save_last=True)
    trainer = trainkit.Trainer(
        max_epochs=1,
        callbacks=[callback],
        default_root_dir=tmp_path,
        logger=trainkit.loggers.CSVLogger(tmp_path),
        **{**{k: v for k, v in QUIET.items() if k != "logger"}, "enable_checkpointing": True},
    )
    trainer.fit(Classifier(), loader(blobs(64), 32))
    assert _names(tmp_path / "mine") == ["epoch=0-step=2.ckpt", "last.ckpt"]
    assert not (tmp_path / "checkpoints").exists()


def test_every_save_is_reported_to_the_loggers(tmp_path: Path) -> None:
    """Loggers hear of each save (trackers upload checkpoints then: log_model="all")."""
    from trainkit.loggers import Logger

    class Listening(Logger):
        name = "listening"
        version = 0

        save_dir = "unused"

        def __init__(self) -> None:
            self.saves: list[tuple[str, str]] = []

        def log_metrics(self, metrics: Any, step: int) -> None:
            pass

        def log_hyperparams(self, params: Any) -> None:
            pass

        def after_save_checkpoint(self, checkpoint_callback: Any) -> None:
            callback = checkpoint_callback
            self.saves.append((callback.best_model_path, callback.last_model_path))

    listening = Listening()
    callback = ModelCheckpoint(dirpath=tmp_path, monitor="val/loss", save_top_k=1, save_last=True)
    trainer = trainkit.Trainer(
        **{**QUIET, "logger": listening, "enable_checkpointing": True},
        max_epochs=3,
        callbacks=[callback],
    )
    trainer.fit(Classifier(), loader(blobs(64), 16), loader(blobs(32, seed=1), 16))
    assert len(listening.saves) == 3  # one per epoch's save
    # Each report names the file just kept (an earlier best may be gone since, top 1).
    assert all(best.endswith(".ckpt") for best, _ in listening.saves)
    assert listening.saves[-1][0] == callback.best_model_path
    assert Path(callback.best_model_path).exists()
    assert all(Path(last).name == "last.ckpt" for _, last in listening.saves)


def test_a_dirpath_in_a_remote_store_is_refused_not_made_a_local_folder(tmp_path: Path) -> None:
    # Not a local folder named "memory:" in the working directory: the error says what to do.
    with pytest.raises(ValueError, match=r"not to memory:// stores\. Give a local folder"):
        ModelCheckpoint(dirpath="memory://checkpoints")
    assert ModelCheckpoint(dirpath=f"file://{tmp_path}").dirpath == str(tmp_path)

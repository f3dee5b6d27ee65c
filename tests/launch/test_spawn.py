"""``strategy="ddp_spawn"``: a failing rank ends the job within seconds; Ctrl-C reaches every rank.

The calling process starts two gloo ranks from inside ``fit`` (see
``trainkit.launch.spawn``); a rank raises at step 5 while the other waits for
it in the step's gradient all-reduce. When the ranks are done, the caller's
Trainer adopts the end of rank 0's run, which the launcher hands back.
"""

from __future__ import annotations

import os
import signal
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from torch.utils.data import DataLoader

import trainkit
from tests.helpers import Classifier, blobs, loader
from tests.launch.running import Job, alive, rank_pids
from trainkit.callbacks import ModelCheckpoint
from trainkit.checkpoint.preemption import SAME_INTERRUPT_S

ENDS_WITHIN_S = 10.0


@pytest.mark.parametrize("failing_rank", [0, 1])
def test_a_failing_spawned_rank_ends_every_rank_within_seconds(
    tmp_path: Path, failing_rank: int
) -> None:
    job = Job.python(tmp_path, "--strategy", "ddp_spawn", "--fail-rank", str(failing_rank))
    failed_at = job.wait_for(f"rank {failing_rank} failing")
    code, ended_at = job.wait()
    output = job.output
    assert code != 0
    assert ended_at - failed_at < ENDS_WITHIN_S, f"ended {ended_at - failed_at:.1f} s after"
    other = 1 - failing_rank
    assert f"trainkit: rank {failing_rank} failed (exit code 1); ending rank {other}" in output
    # The failing rank's traceback, raised in the calling process.
    assert f"Rank {failing_rank} of the ddp_spawn job failed with this error" in output
    assert f"deliberate failure on rank {failing_rank} at step 5" in output
    assert not any(alive(pid) for pid in rank_pids(tmp_path))


def test_ctrl_c_to_the_caller_reaches_every_rank_once(tmp_path: Path) -> None:
    # The ranks run in a process group of their own: the caller passes the
    # Ctrl-C on (once each; twice would be a second Ctrl-C).
    job = Job.python(tmp_path, "--strategy", "ddp_spawn", "--delay", "0.05", "--max-steps", "2000")
    job.wait_for("rank 0 step 5")
    job.signal_group(signal.SIGINT)  # the terminal's: reaches the caller only
    code, _ = job.wait()
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert code == 130, job.output[-3000:]
    assert f"trainkit: stopped by signal SIGINT after saving {last};" in job.output
    assert last.is_file()
    assert "Traceback" not in job.output
    assert not (tmp_path / "done.txt").exists()


def test_ctrl_c_twice_ends_the_spawned_ranks_at_once(tmp_path: Path) -> None:
    job = Job.python(tmp_path, "--strategy", "ddp_spawn", "--hang-rank", "1")
    job.wait_for("rank 1 hanging")
    job.signal_group(signal.SIGINT)
    time.sleep(SAME_INTERRUPT_S + 0.5)
    sent = time.monotonic()
    job.signal_group(signal.SIGINT)
    code, ended_at = job.wait()
    assert code == 130, job.output[-3000:]
    assert ended_at - sent < ENDS_WITHIN_S
    assert "trainkit: interrupted again: stopping the ranks now without saving" in job.output
    assert "Traceback" not in job.output
    assert not any(alive(pid) for pid in rank_pids(tmp_path))


class PreemptRankZero(trainkit.Callback):
    """Sends SIGTERM (a preemption notice) to rank 0's own process after step 3."""

    def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
        if trainer.global_rank == 0 and trainer.global_step == 3:
            os.kill(os.getpid(), signal.SIGTERM)


def _spawn_trainer(
    root: Path, *callbacks: trainkit.Callback, max_epochs: int = 2
) -> trainkit.Trainer:
    return trainkit.Trainer(
        strategy="ddp_spawn",
        accelerator="cpu",
        devices=2,
        seed=0,
        max_epochs=max_epochs,
        default_root_dir=root,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=list(callbacks),
    )


def _data() -> tuple[DataLoader[Any], DataLoader[Any]]:
    return loader(blobs(128), 16), loader(blobs(64, seed=1), 16)


def test_the_caller_adopts_rank_zeros_counters_metrics_and_callback_states(
    tmp_path: Path,
) -> None:
    # The caller's Trainer ran nothing itself: all of this is rank 0's, adopted.
    best = ModelCheckpoint(dirpath=tmp_path / "best", monitor="val/loss")
    own_folder = ModelCheckpoint(save_last=True)  # the run's folder, chosen on rank 0
    trainer = _spawn_trainer(tmp_path, best, own_folder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(Classifier(), *_data())
    assert not [w for w in caught if "ModelCheckpoint" in str(w.message)]
    assert own_folder.dirpath == str(tmp_path / "checkpoints")
    assert Path(own_folder.last_model_path).is_file()
    assert Path(own_folder.best_model_path).parent == tmp_path / "checkpoints"
    assert trainer.global_step == 2 * 4  # 2 epochs of 128 / (16 x 2 ranks) batches
    assert trainer.current_epoch == 2
    assert trainer.state.status == "finished"
    assert not trainer.preempted and trainer.preemption.stopped_by is None
    assert {"train/loss", "val/loss", "val/acc"} <= set(trainer.callback_metrics)
    assert Path(best.best_model_path).parent == tmp_path / "best"
    assert Path(best.best_model_path).is_file()
    # Evaluating without a model, as after any fit: the ranks take the module they
    # trained, from the best checkpoint (they say so on stderr).
    results = trainer.validate(dataloaders=_data()[1], verbose=False)
    assert set(results[0]) >= {"val/loss", "val/acc"}


class FirstStep(trainkit.Callback):
    """Notes the step each fit starts training at (rank 0's, adopted by the caller)."""

    def __init__(self) -> None:
        self.first: list[int] = []

    def on_train_start(self, trainer: Any, module: Any) -> None:
        self.first.append(trainer.global_step)

    def state_dict(self) -> dict[str, Any]:
        return {"first": self.first}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.first = list(state["first"])


def test_a_second_spawned_fit_continues_from_the_first(tmp_path: Path) -> None:
    first_step = FirstStep()
    trainer = _spawn_trainer(tmp_path, first_step, max_epochs=1)
    model = Classifier()
    trainer.fit(model, _data()[0])
    trainer.fit_loop.max_epochs = 2
    trainer.fit(model, _data()[0])
    assert first_step.first == [0, 4]  # not from step 0 again
    assert (trainer.current_epoch, trainer.global_step) == (2, 8)


def test_the_caller_adopts_the_signal_rank_zero_stopped_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Long enough to end by the ranks' stop vote (a few resume points after the signal).
    epochs = 1000
    trainer = _spawn_trainer(tmp_path, PreemptRankZero(), max_epochs=epochs)
    with pytest.raises(SystemExit) as stop:
        trainer.fit(Classifier(), *_data())
    # The caller ends as rank 0 did: for SIGTERM (status 0), after the ranks saved.
    assert stop.value.code == 0
    assert trainer.preempted and trainer.state.status == "finished"
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert f"trainkit: stopped by signal SIGTERM after saving {last};" in capsys.readouterr().out
    assert last.is_file()
    assert 3 < trainer.global_step < epochs * 4

"""RunState: what a resume restores is every progress field, and nothing else."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.loops.state import RunState


def test_every_progress_field_round_trips_and_status_fields_are_not_saved() -> None:
    state = RunState(
        fn="fit",
        stage="train",
        status="running",
        preempted=True,
        num_training_batches=10.0,
        epoch=3,
        global_step=42,
        batch_idx=5,
        should_stop=True,
        batches_seen=17,
        samples_per_step=64,
        epoch_start_rng={"global": {}},
        lineage="abc",
    )
    saved = state.state_dict()
    assert set(saved) == {
        "epoch",
        "global_step",
        "batch_idx",
        "should_stop",
        "batches_seen",
        "samples_per_step",
        "epoch_start_rng",
        "lineage",
    }
    restored = RunState()
    restored.load_state_dict(saved)
    assert {k: getattr(restored, k) for k in saved} == saved
    assert (restored.fn, restored.stage, restored.status, restored.preempted) == (
        None,
        None,
        "initializing",
        False,
    )


def test_a_new_progress_field_is_saved_without_touching_anything_else() -> None:
    # What "adding a counter touches state.py only" means: state_dict follows the fields.
    @dataclasses.dataclass
    class WithCounter(RunState):
        tokens_seen: int = 0

    state = WithCounter(tokens_seen=9, epoch=2)
    assert state.state_dict()["tokens_seen"] == 9
    restored = WithCounter()
    restored.load_state_dict(state.state_dict())
    assert (restored.tokens_seen, restored.epoch) == (9, 2)
    restored.start_fit(lineage="new")
    assert restored.tokens_seen == 0


def test_an_older_checkpoint_without_a_field_keeps_its_default() -> None:
    state = RunState(batches_seen=4)
    state.load_state_dict({"epoch": 1, "global_step": 2, "batch_idx": 0})
    assert (state.epoch, state.global_step, state.batches_seen) == (1, 2, 4)


def test_the_trainer_reports_stage_and_status_as_a_run_goes() -> None:
    seen: list[tuple[str | None, str | None, str]] = []

    class Probe(trainkit.Callback):
        def _record(self, trainer: trainkit.Trainer) -> None:
            seen.append((trainer.state.fn, trainer.state.stage, trainer.state.status))

        def on_sanity_check_start(self, trainer: trainkit.Trainer, module: object) -> None:
            self._record(trainer)

        def on_train_start(self, trainer: trainkit.Trainer, module: object) -> None:
            self._record(trainer)

        def on_validation_start(self, trainer: trainkit.Trainer, module: object) -> None:
            self._record(trainer)

        def on_test_start(self, trainer: trainkit.Trainer, module: object) -> None:
            self._record(trainer)

    trainer = trainkit.Trainer(max_epochs=1, callbacks=[Probe()], **QUIET)
    model = Classifier()
    trainer.fit(model, loader(blobs(64), 32), loader(blobs(32), 32))
    # After the run, fn names the run that ended and nothing runs (as in Lightning).
    assert (trainer.state.fn, trainer.state.stage, trainer.state.status) == (
        "fit",
        None,
        "finished",
    )
    assert trainer.state.finished and not trainer.interrupted
    trainer.test(model, loader(blobs(32), 32))
    assert seen == [
        ("fit", "sanity_check", "running"),
        ("fit", "sanity_check", "running"),
        ("fit", "train", "running"),
        ("fit", "validate", "running"),
        ("test", "test", "running"),
    ]

    class Broken(Classifier):
        def training_step(self, batch: object, batch_idx: int) -> torch.Tensor:
            raise KeyboardInterrupt

    # Handled as Lightning handles it: the run is marked interrupted, then the process exits.
    trainer.fit_loop.max_epochs = 2  # this Trainer's first fit trained its one epoch
    with pytest.raises(SystemExit) as exited:
        trainer.fit(Broken(), loader(blobs(64), 32))
    assert exited.value.code == 130
    assert trainer.state.status == "interrupted" and trainer.interrupted


def test_running_stages_say_whether_they_evaluate_and_their_dataloader_hook() -> None:
    # Lightning's values: code that builds a hook's name as f"{prefix}_dataloader" reads them.
    from trainkit.loops.state import RunningStage

    assert {stage.value: (stage.evaluating, stage.dataloader_prefix) for stage in RunningStage} == {
        "train": (False, "train"),
        "sanity_check": (True, "val"),
        "validate": (True, "val"),
        "test": (True, "test"),
        "predict": (False, "predict"),
    }

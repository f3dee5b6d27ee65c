"""LearningRateFinder: the search at fit start, then the same training as with that lr."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, MemoryLogger, blobs, loader
from trainkit.callbacks.lr_finder import LearningRateFinder


def _fit(tmp_path: Path, model: Classifier, callbacks: list[Any], **kwargs: Any) -> Any:
    trainer = trainkit.Trainer(
        **{**QUIET, "logger": MemoryLogger(), "default_root_dir": str(tmp_path)},
        max_epochs=2,
        callbacks=callbacks,
        seed=7,
        **kwargs,
    )
    trainer.fit(model, loader(blobs(128), 16, shuffle=True), loader(blobs(64, seed=1), 32))
    return trainer


def test_fit_trains_with_the_suggestion_exactly_as_without_the_search(tmp_path: Path) -> None:
    torch.manual_seed(0)
    tuned = Classifier()
    finder = LearningRateFinder(min_lr=1e-4, max_lr=1.0, num_training_steps=30)
    trainer = _fit(tmp_path / "a", tuned, [finder])
    assert finder.optimal_lr is not None
    lr = finder.optimal_lr.suggestion()
    assert lr is not None and tuned.hparams.lr == lr
    assert len(finder.optimal_lr.results["lr"]) == 30
    # The search left no trace: the same fit with lr set by hand ends bitwise equal.
    torch.manual_seed(0)
    plain = Classifier(lr=lr)
    reference = _fit(tmp_path / "b", plain, [])
    assert (trainer.global_step, trainer.current_epoch) == (16, 2)
    assert (reference.global_step, reference.current_epoch) == (16, 2)
    for key, value in tuned.state_dict().items():
        assert torch.equal(value, plain.state_dict()[key]), key
    assert trainer.logger.rows == reference.logger.rows


def test_the_search_writes_no_file(tmp_path: Path) -> None:
    def files(root: Path) -> list[str]:
        # An event file's name holds the time it was made: compare up to there.
        return sorted(str(p.relative_to(root)).split(".tfevents.")[0] for p in root.rglob("*"))

    for name, callbacks in (("with", [LearningRateFinder(num_training_steps=10)]), ("without", [])):
        trainer = trainkit.Trainer(
            default_root_dir=str(tmp_path / name),
            max_epochs=1,
            enable_progress_bar=False,
            accelerator="cpu",
            callbacks=callbacks,
        )
        trainer.fit(Classifier(), loader(blobs(64), 16))
    assert files(tmp_path / "with") == files(tmp_path / "without") != []


def test_on_fit_start_can_be_overridden_to_search_at_other_epochs(tmp_path: Path) -> None:
    class EveryEpoch(LearningRateFinder):
        def __init__(self) -> None:
            super().__init__(min_lr=1e-3, num_training_steps=12)
            self.searched_at: list[tuple[int, int]] = []

        def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
            return None

        def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
            self.lr_find(trainer, pl_module)
            self.searched_at.append((trainer.current_epoch, trainer.global_step))

    finder = EveryEpoch()
    trainer = _fit(tmp_path, Classifier(), [finder])
    assert finder.searched_at == [(0, 0), (1, 8)]  # counters untouched by the searches
    assert trainer.global_step == 16


def test_mode_is_checked() -> None:
    with pytest.raises(ValueError, match="either of"):
        LearningRateFinder(mode="cosine")


def test_snapshot_restores_changed_callback_states_only(tmp_path: Path) -> None:
    from trainkit.callbacks.base import Callback
    from trainkit.tuner.trial import Snapshot

    class Scale(Callback):  # stands for the float16 loss scaler a trial moves
        def __init__(self, name: str) -> None:
            self.scale, self.loads, self.name = torch.tensor(1024.0), 0, name

        @property
        def state_key(self) -> str:  # two of them: each its own checkpoint entry
            return f"Scale[{self.name}]"

        def state_dict(self) -> dict[str, Any]:
            return {"scale": self.scale}

        def load_state_dict(self, state: dict[str, Any]) -> None:
            self.scale, self.loads = state["scale"].clone(), self.loads + 1

    scale, still = Scale("moved"), Scale("still")
    snapshots: list[Any] = []

    class Probe(Callback):
        def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
            snapshot = Snapshot(trainer)
            scale.scale.mul_(0.5)
            snapshot.restore(trainer)
            snapshots.append(snapshot)

    trainer = trainkit.Trainer(**QUIET, max_steps=1, callbacks=[scale, still, Probe()])
    trainer.fit(Classifier(), loader(blobs(64), 16))
    assert snapshots and scale.scale.item() == 1024.0
    assert (scale.loads, still.loads) == (1, 0)

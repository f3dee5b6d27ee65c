"""trainer.validate_loop, test_loop and predict_loop: Lightning's loop objects, as views.

The values asserted are those Lightning 2.6.6 gives for the same code (checked
side by side), except where a docstring says trainkit knows more.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader


class Probe(Classifier):
    """Records the grad mode of each evaluation step, and what predict_loop shows."""

    def __init__(self) -> None:
        super().__init__()
        self.modes: dict[str, set[tuple[bool, bool]]] = {}
        self.at_batch_start: list[list[int]] = []
        self.at_batch_end: list[int] = []
        self.at_epoch_end: Any = None

    def _mode(self, stage: str) -> None:
        grad = torch.is_grad_enabled(), torch.is_inference_mode_enabled()
        self.modes.setdefault(stage, set()).add(grad)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self._mode("validate")

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self._mode("test")

    def predict_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> torch.Tensor:
        self._mode("predict")
        return self(batch[0])

    def on_predict_batch_start(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        self.at_batch_start.append(self.trainer.predict_loop.current_batch_indices)

    def on_predict_batch_end(
        self, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self.at_batch_end.append(len(self.trainer.predict_loop.predictions))

    def on_predict_epoch_end(self) -> None:
        loop = self.trainer.predict_loop
        self.at_epoch_end = (len(loop.predictions), loop.num_dataloaders, loop.epoch_batch_indices)


def test_each_loop_runs_under_its_own_inference_mode_setting() -> None:
    trainer = trainkit.Trainer(**QUIET)
    loops = trainer.validate_loop, trainer.test_loop, trainer.predict_loop
    assert [loop.inference_mode for loop in loops] == [True, True, True]
    assert trainer.test_loop is trainer.test_loop  # one view per Trainer: settings hold
    trainer.test_loop.inference_mode = False
    model, data = Probe(), loader(blobs(20), 8)
    trainer.validate(model, data, verbose=False)
    trainer.test(model, data, verbose=False)
    trainer.predict(model, data)
    # (grad enabled, inference mode): test runs under no_grad, the others under inference_mode.
    assert model.modes == {
        "validate": {(False, True)},
        "test": {(False, False)},
        "predict": {(False, True)},
    }
    # Trainer(inference_mode=False) is every loop's starting value.
    assert not trainkit.Trainer(inference_mode=False, **QUIET).validate_loop.inference_mode


def test_predict_loop_shows_the_predictions_as_they_are_kept() -> None:
    trainer = trainkit.Trainer(**QUIET)
    loop = trainer.predict_loop
    assert (loop.predictions, loop.return_predictions, loop.num_dataloaders) == ([], False, 0)
    model, data = Probe(), loader(blobs(20), 8)
    returned = trainer.predict(model, data)
    # A batch's output joins after its on_predict_batch_end, as in Lightning.
    assert model.at_batch_end == [0, 1, 2]
    assert model.at_batch_start == [[0, 1, 2, 3, 4, 5, 6, 7], list(range(8, 16)), [16, 17, 18, 19]]
    assert model.at_epoch_end == (3, 1, [[list(range(8)), list(range(8, 16)), [16, 17, 18, 19]]])
    assert returned is not None and loop.return_predictions and len(loop.predictions) == 3
    assert all(a is b for a, b in zip(returned, loop.predictions, strict=True))

    model.at_batch_end.clear()
    trainer.predict(model, [data, data])  # two loaders: one list each, from the start
    assert model.at_batch_end == [2] * 6
    assert [len(each) for each in loop.predictions] == [3, 3] and loop.num_dataloaders == 2

    assert trainer.predict(model, data, return_predictions=False) is None
    assert loop.predictions == [] and loop.return_predictions is False


def test_kept_predictions_are_moved_to_the_cpu() -> None:
    # On an accelerator Lightning keeps (and returns) predictions on the CPU; a
    # prediction on the "meta" device stands in for one on an accelerator here.
    class OffCPU(Classifier):
        def predict_step(self, batch: Any, batch_idx: int) -> Any:
            meta = torch.empty(2, device="meta")
            return {"cpu": batch[0], "elsewhere": meta}

    trainer = trainkit.Trainer(**QUIET)
    with pytest.raises(NotImplementedError, match="meta"):
        # A meta tensor cannot be copied: the attempt proves the move is made.
        trainer.predict(OffCPU(), loader(blobs(4), 4))
    # Not kept, nothing is moved.
    assert trainer.predict(OffCPU(), loader(blobs(4), 4), return_predictions=False) is None


def test_loop_machinery_is_refused_with_what_to_call_instead() -> None:
    trainer = trainkit.Trainer(**QUIET)
    with pytest.raises(AttributeError, match=r"cannot be driven by hand.*trainer\.validate\("):
        trainer.validate_loop.run()
    assert not hasattr(trainer.predict_loop, "setup_data")
    with pytest.raises(AttributeError, match=r"test_loop\.trainer_fn cannot be set"):
        trainer.test_loop.trainer_fn = "fit"


def test_a_loop_subclass_set_as_the_test_loop_prints_the_results_its_way(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Projects subclass Lightning's private _EvaluationLoop to print their own table.
    from trainkit.lightning.loops.evaluation_loop import _EvaluationLoop
    from trainkit.lightning.trainer.states import RunningStage, TrainerFn

    printed: list[tuple[list[str], str]] = []

    class OwnTable(_EvaluationLoop):
        @staticmethod
        def _print_results(results: list[dict[str, Any]], stage: str) -> None:
            assert all(v.ndim == 0 for result in results for v in result.values())  # tensors
            printed.append(([name for result in results for name in result], stage))

    trainer = trainkit.Trainer(**QUIET)
    model = Classifier()
    trainer.test(model, loader(blobs(32)))
    assert "Test metric" in capsys.readouterr().out  # trainkit's own table
    trainer.test_loop = OwnTable(
        trainer, TrainerFn.TESTING, RunningStage.TESTING, inference_mode=False
    )
    assert not trainer.test_loop.inference_mode
    results = trainer.test(model, loader(blobs(32)))
    assert printed == [(list(results[0]), "test")]
    assert "Test metric" not in capsys.readouterr().out
    trainer.test(model, loader(blobs(32)), verbose=False)
    assert len(printed) == 1
    trainer.validate(model, loader(blobs(32)))  # the validate loop is still trainkit's
    assert "Validate metric" in capsys.readouterr().out
    with pytest.raises(TypeError, match="made for validate"):
        trainer.validate_loop = trainer.test_loop


class PredictsNothing(Classifier):
    def predict_step(self, batch: Any, batch_idx: int) -> None:
        return None  # forgot the return


def test_a_predict_step_returning_none_warns_once_in_lightnings_words() -> None:
    trainer = trainkit.Trainer(**QUIET)
    with pytest.warns(UserWarning, match="predict returned None if it was on purpose") as caught:
        predictions = trainer.predict(PredictsNothing(), loader(blobs(96), 32))
    assert predictions == [None, None, None]
    said = [w for w in caught if "predict returned None" in str(w.message)]
    assert len(said) == 1 and "returned None for batch 0" in str(said[0].message)


def test_ckpt_path_best_with_several_model_checkpoints_says_it_uses_the_first(
    tmp_path: Any,
) -> None:
    from trainkit.callbacks import ModelCheckpoint

    first = ModelCheckpoint(dirpath=tmp_path / "a", monitor="val/loss")
    trainer = trainkit.Trainer(
        max_epochs=1,
        callbacks=[first, ModelCheckpoint(dirpath=tmp_path / "b")],
        **{**QUIET, "enable_checkpointing": True},
    )
    trainer.fit(Classifier(), loader(blobs(64)), loader(blobs(32)))
    with pytest.warns(UserWarning, match="best checkpoint path from first checkpoint callback"):
        trainer.test(Classifier(), loader(blobs(32)), ckpt_path="best", verbose=False)
    assert trainer.ckpt_path == first.best_model_path

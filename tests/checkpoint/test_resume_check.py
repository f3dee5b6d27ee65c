"""fit(ckpt_path=...) compares the saved run's settings with this one's (resume_check.py)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.checkpoint.files import CheckpointError


class Scheduled(Classifier):
    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
        return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, step_size=4)]


def _saved(tmp_path: Path, model: Classifier | None = None, **options: Any) -> Path:
    torch.manual_seed(0)
    trainer = trainkit.Trainer(**{**QUIET, "max_epochs": 1, **options})
    trainer.fit(model or Classifier(), loader(blobs(64), 16))
    path = tmp_path / "saved.ckpt"
    trainer.save_checkpoint(path)
    return path


def _resume(path: Path, model: Classifier | None = None, **options: Any) -> list[str]:
    """Resume ``path`` for one more epoch; the warnings the resume gave."""
    trainer = trainkit.Trainer(**{**QUIET, "max_epochs": 2, **options})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(model or Classifier(), loader(blobs(64), 16), ckpt_path=path)
    return [str(w.message) for w in caught if "saved with other settings" in str(w.message)]


def test_a_longer_run_with_the_same_settings_resumes_without_a_word(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    assert _resume(path, resume_mismatch="error") == []


def test_error_refuses_a_resume_that_changes_the_step_and_names_every_key(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    model = Classifier(lr=0.5)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointError) as error:
        _resume(path, model, accumulate_grad_batches=2, resume_mismatch="error")
    message = str(error.value)
    assert str(path) in message
    assert "trainer.accumulate_grad_batches: 1 -> 2" in message
    assert "model.init_args.lr: 0.1 -> 0.5" in message
    assert "resume_mismatch='warn'" in message
    # Refused before anything was restored: the model keeps its own weights.
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_warn_the_default_names_the_keys_and_resumes(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    trainer_steps: list[int] = []

    class Counting(Classifier):
        def on_train_end(self) -> None:
            trainer_steps.append(self.trainer.global_step)

    said = _resume(path, Counting(), gradient_clip_val=1.0)
    assert len(said) == 1
    assert "trainer.gradient_clip_val: None -> 1.0" in said[0]
    assert str(path) in said[0]
    assert trainer_steps == [8]  # resumed at step 4, trained one more epoch


def test_ignore_resumes_silently(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    assert _resume(path, gradient_clip_val=1.0, resume_mismatch="ignore") == []


def test_a_longer_run_matters_only_when_a_scheduler_was_built_for_the_saved_length(
    tmp_path: Path,
) -> None:
    plain = _saved(tmp_path)
    assert _resume(plain, resume_mismatch="error") == []  # max_epochs 1 -> 2: what resumes are for
    scheduled = _saved(tmp_path, Scheduled())
    with pytest.raises(CheckpointError, match=r"trainer\.max_epochs: 1 -> 2"):
        _resume(scheduled, Scheduled(), resume_mismatch="error")


def test_where_the_run_computes_and_prints_never_matters(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    said = _resume(
        path, log_every_n_steps=1, num_sanity_val_steps=0, enable_model_summary=True,
        resume_mismatch="error",
    )  # fmt: skip
    assert said == []


def test_a_checkpoint_without_recorded_options_is_not_compared(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    checkpoint = torch.load(path, weights_only=False)
    del checkpoint["trainer_options"]
    del checkpoint["integrity"]
    older = tmp_path / "older.ckpt"
    torch.save(checkpoint, older)
    assert _resume(older, Classifier(lr=0.5), resume_mismatch="error") == []


def test_a_misspelt_mode_is_refused_with_a_suggestion() -> None:
    with pytest.raises(ValueError, match=r"resume_mismatch='eror'.*Did you mean 'error'"):
        trainkit.Trainer(resume_mismatch="eror")


def test_hyperparameters_stored_as_an_address_are_not_compared(tmp_path: Path) -> None:
    class WithActivation(Classifier):
        def __init__(self, activation: Any = None, lr: float = 0.1) -> None:
            super().__init__(lr=lr)
            self.save_hyperparameters()

    path = _saved(tmp_path, WithActivation(activation=lambda x: x))
    assert _resume(path, WithActivation(activation=lambda x: x), resume_mismatch="error") == []


def test_a_checkpoint_saved_past_max_epochs_is_refused_one_at_it_trains_nothing(
    tmp_path: Path,
) -> None:
    # As Lightning: the file save_checkpoint writes after 4 epochs records epoch 4
    # (Lightning's current_epoch then); it does not resume under max_epochs=3.
    torch.manual_seed(0)
    saving = trainkit.Trainer(**{**QUIET, "max_epochs": 4})
    saving.fit(Classifier(), loader(blobs(64), 16))
    path = tmp_path / "four.ckpt"
    saving.save_checkpoint(path)
    before = torch.load(path, weights_only=True)["state_dict"]
    model = Classifier()
    with pytest.raises(CheckpointError, match=r"saved in epoch 4, past this run's max_epochs=3"):
        trainkit.Trainer(**{**QUIET, "max_epochs": 3, "resume_mismatch": "ignore"}).fit(
            model, loader(blobs(64), 16), ckpt_path=path
        )
    assert not torch.equal(model.state_dict()["net.0.weight"], before["net.0.weight"])
    # At the limit (a finished run started again): nothing to train, and a warning.
    again = trainkit.Trainer(**{**QUIET, "max_epochs": 4, "resume_mismatch": "ignore"})
    with pytest.warns(UserWarning, match="fit trains nothing"):
        again.fit(Classifier(), loader(blobs(64), 16), ckpt_path=path)
    assert again.global_step == saving.global_step

"""Callbacks that are not trainkit.Callback subclasses: the hooks they have are called.

Lightning calls whatever hooks a callback object has; a ported class without
trainkit's base, or a test's Mock, must work without trainkit's own methods.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader


class Plain:
    """A callback with a few of Lightning's hooks and a state, and no base class."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.restored: dict[str, Any] | None = None

    def setup(self, trainer: Any, module: Any, stage: str) -> None:
        self.calls.append(f"setup:{stage.value}")

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        self.calls.append(f"on_train_epoch_end:{trainer.current_epoch}")

    def teardown(self, trainer: Any, module: Any, stage: str) -> None:
        self.calls.append(f"teardown:{stage.value}")

    @property
    def state_key(self) -> str:
        return "plain"

    def state_dict(self) -> dict[str, Any]:
        return {"calls": len(self.calls)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.restored = state


def test_an_object_without_trainkits_base_gets_the_hooks_it_has(tmp_path: Path) -> None:
    plain = Plain()
    run = {**QUIET, "enable_checkpointing": True, "default_root_dir": str(tmp_path)}
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[plain], **run)
    trainer.fit(Classifier(), loader(blobs(64)))
    assert plain.calls == [
        "setup:fit",
        "on_train_epoch_end:0",
        "on_train_epoch_end:1",
        "teardown:fit",
    ]
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["callbacks"]["plain"] == {"calls": 3}
    resumed = Plain()
    trainer = trainkit.Trainer(max_epochs=3, callbacks=[resumed], **run)
    trainer.fit(Classifier(), loader(blobs(64)), ckpt_path=str(last))
    assert resumed.restored == {"calls": 3}
    assert resumed.calls[1:-1] == ["on_train_epoch_end:2"]


def test_a_mock_callback_records_lightnings_hooks_and_no_trainkit_only_one(tmp_path: Path) -> None:
    mock = MagicMock()
    trainer = trainkit.Trainer(max_epochs=1, callbacks=mock, **QUIET)
    trainer.fit(Classifier(), loader(blobs(64)))
    names = [call[0] for call in mock.method_calls]
    assert names[:3] == ["setup", "on_fit_start", "on_train_start"]
    assert names.count("on_train_batch_end") == 2 and names[-1] == "teardown"
    assert "on_resume_point" not in names  # trainkit's own hook, not Lightning's
    assert "configure_step" not in names and "uses_hook" not in names
    trainer.save_checkpoint(tmp_path / "mocked.ckpt")  # a Mock's state_dict() is no dict: none
    saved = torch.load(tmp_path / "mocked.ckpt", weights_only=True)["callbacks"]
    assert saved["MagicMock"] == {}


@pytest.mark.parametrize("wrong", [trainkit.Callback, "ModelCheckpoint", 3])
def test_what_is_not_a_callback_is_named(wrong: Any) -> None:
    with pytest.raises(TypeError, match="not a callback: pass instances"):
        trainkit.Trainer(callbacks=[wrong], **QUIET)


def test_checkpointing_callbacks_run_last_whatever_the_order_given(tmp_path: Path) -> None:
    # As Lightning documents: a checkpoint sees what every other callback logged at the
    # same hook, and ported code reads the user's ModelCheckpoint as callbacks[-1].
    from trainkit.callbacks import ModelCheckpoint

    order: list[str] = []

    class Logs(trainkit.Callback):
        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            order.append("logs")
            module.log("late", 1.0)

    class Saves(ModelCheckpoint):
        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            order.append(f"saves: late={float(trainer.callback_metrics['late'])}")
            super().on_train_epoch_end(trainer, module)

    saves = Saves(dirpath=tmp_path)
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[saves, Logs()], logger=False)
    assert trainer.callbacks[-1] is saves
    trainer.fit(Classifier(), loader(blobs(64)))
    assert order == ["logs", "saves: late=1.0"]


def test_two_stateful_callbacks_under_one_state_key_are_refused() -> None:
    # As Lightning: their states would share one checkpoint entry (one lost on resume).
    from trainkit.callbacks import ModelCheckpoint

    class Counter(trainkit.Callback):
        def __init__(self, start: int) -> None:
            self.count = start

        def state_dict(self) -> dict[str, Any]:
            return {"count": self.count}

    with pytest.raises(RuntimeError, match=r"more than one stateful callback of type `Counter`"):
        trainkit.Trainer(callbacks=[Counter(1), Counter(2)], logger=False)
    with pytest.raises(RuntimeError, match=r"state_key \"ModelCheckpoint\{'monitor': 'a'"):
        trainkit.Trainer(callbacks=[ModelCheckpoint(monitor="a"), ModelCheckpoint(monitor="a")])
    # Different settings make different keys; stateless callbacks and mocks have none.
    trainkit.Trainer(
        callbacks=[
            ModelCheckpoint(monitor="a"),
            ModelCheckpoint(monitor="b"),
            trainkit.Callback(),
            trainkit.Callback(),
            MagicMock(),
            MagicMock(),
        ],
        logger=False,
    )


def test_hooks_take_lightnings_keyword_for_the_module() -> None:
    # Lightning code calls hooks by keyword: super().on_x(trainer=trainer, pl_module=...).
    from trainkit.callbacks import EarlyStopping
    from trainkit.callbacks.base import hook_method

    seen: list[Any] = []

    class Mine(trainkit.Callback):
        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            seen.append(pl_module)
            super().on_train_epoch_end(trainer=trainer, pl_module=pl_module)

    Mine().on_train_epoch_end(trainer=None, pl_module="module")
    assert seen == ["module"]
    stopping = EarlyStopping(monitor="loss")
    stopping.setup(trainer=None, pl_module=None, stage="validate")  # no TypeError
    # The loop calls the hook's own function: no keyword mapping on its path.
    bound = hook_method(stopping, "setup")
    assert bound.__func__ is EarlyStopping.setup.__trainkit_hook__  # type: ignore[attr-defined]
    assert hook_method(Mine(), "on_train_epoch_end").__func__ is Mine.on_train_epoch_end

"""Hooks fire in the documented order: the Module's first, then each callback's."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader

MODULE_HOOKS = [
    "setup",
    "teardown",
    "on_fit_start",
    "on_fit_end",
    "on_train_start",
    "on_train_end",
    "on_train_epoch_start",
    "on_train_epoch_end",
    "on_train_batch_start",
    "on_train_batch_end",
    "on_validation_start",
    "on_validation_end",
    "on_validation_epoch_start",
    "on_validation_epoch_end",
    "on_validation_batch_start",
    "on_validation_batch_end",
    "on_test_start",
    "on_test_end",
    "on_test_epoch_start",
    "on_test_epoch_end",
    "on_test_batch_start",
    "on_test_batch_end",
    "on_predict_start",
    "on_predict_end",
    "on_predict_epoch_start",
    "on_predict_epoch_end",
    "on_predict_batch_start",
    "on_predict_batch_end",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
]
CALLBACK_ONLY = ["on_sanity_check_start", "on_sanity_check_end"]


def _recorder(calls: list[str], owner: str, base: type, names: list[str]) -> type:
    def make(name: str) -> Any:
        def hook(self: Any, *args: Any, **kwargs: Any) -> None:
            calls.append(f"{owner}.{name}")

        return hook

    return type(f"Recording{owner}", (base,), {name: make(name) for name in names})


def test_hooks_fire_in_documented_order() -> None:
    calls: list[str] = []
    module_cls = _recorder(calls, "module", Classifier, MODULE_HOOKS)
    callback_cls = _recorder(calls, "callback", trainkit.Callback, MODULE_HOOKS + CALLBACK_ONLY)
    model = module_cls()
    trainer = trainkit.Trainer(
        max_epochs=1,
        limit_train_batches=2,
        limit_val_batches=1,
        num_sanity_val_steps=1,
        callbacks=[callback_cls()],
        **QUIET,
    )
    trainer.fit(model, loader(blobs(64), 32), loader(blobs(64), 32))

    # Lightning's order: each callback's hook, then the Module's (the epoch ends
    # too: only checkpointing and early stopping wait for the Module's).
    def both(*names: str) -> list[str]:
        return [f"{owner}.{name}" for name in names for owner in ("callback", "module")]

    validation = [
        *both(
            "on_validation_start",
            "on_validation_epoch_start",
            "on_validation_batch_start",
            "on_validation_batch_end",
            "on_validation_epoch_end",
            "on_validation_end",
        ),
    ]
    # The last step's gradients are cleared before the forward pass (Lightning: after
    # training_step), so on_train_batch_end still sees the step's gradients.
    batch = both(
        "on_train_batch_start",
        "on_before_zero_grad",
        "on_before_backward",
        "on_after_backward",
        "on_before_optimizer_step",
        "on_train_batch_end",
    )
    expected = [
        *both("setup", "on_fit_start"),
        "callback.on_sanity_check_start",
        *validation,
        "callback.on_sanity_check_end",
        *both("on_train_start", "on_train_epoch_start"),
        *batch,
        *batch,
        *validation,
        *both("on_train_epoch_end", "on_train_end", "on_fit_end", "teardown"),
    ]
    assert calls == expected

    calls.clear()
    trainer.test(model, loader(blobs(32), 32))
    assert calls == [
        *both(
            "setup",
            "on_test_start",
            "on_test_epoch_start",
            "on_test_batch_start",
            "on_test_batch_end",
            "on_test_epoch_end",
            "on_test_end",
        ),
        "callback.teardown",
        "module.teardown",
    ]
    calls.clear()
    trainer.predict(model, loader(blobs(32), 32))
    assert calls == [
        *both(
            "setup",
            "on_predict_start",
            "on_predict_epoch_start",
            "on_predict_batch_start",
            "on_predict_batch_end",
            "on_predict_epoch_end",
            "on_predict_end",
        ),
        "callback.teardown",
        "module.teardown",
    ]


def test_on_train_batch_start_returning_minus_one_ends_the_epoch() -> None:
    steps: list[int] = []

    class SkipRest(Classifier):
        def on_train_batch_start(self, batch: Any, batch_idx: int) -> int | None:
            steps.append(batch_idx)
            return -1 if batch_idx == 2 else None

    trainer = trainkit.Trainer(max_epochs=2, **QUIET)
    trainer.fit(SkipRest(), loader(blobs(320), 32))
    assert steps == [0, 1, 2, 0, 1, 2] and trainer.global_step == 4


def test_a_none_batch_is_skipped_with_a_warning_and_its_batch_end_hooks_still_run() -> None:
    calls: list[tuple[str, int, Any]] = []

    class Watching(Classifier):
        def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
            calls.append(("start", batch_idx, None))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            calls.append(("step", batch_idx, None))
            return super().training_step(batch, batch_idx)

        def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
            calls.append(("end", batch_idx, outputs if outputs is None else sorted(outputs)))

    data = blobs(64)
    batches = [None, (data.tensors[0][:32], data.tensors[1][:32]), None]
    trainer = trainkit.Trainer(max_epochs=2, **QUIET)
    with pytest.warns(UserWarning, match=r"^train_dataloader yielded None\.") as said:
        trainer.fit(Watching(), batches)
    assert sum("yielded None" in str(w.message) for w in said) == 1  # once a fit
    one_epoch = [("end", 0, None), ("start", 1, None), ("step", 1, None)]
    one_epoch += [("end", 1, ["loss"]), ("end", 2, None)]
    assert calls == one_epoch * 2 and trainer.global_step == 2


def test_on_exception_and_teardown_run_when_a_step_raises() -> None:
    calls: list[str] = []

    class Boom(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            raise RuntimeError("boom")

    class Watch(trainkit.Callback):
        def on_exception(self, trainer: Any, module: Any, exception: BaseException) -> None:
            calls.append(f"exception:{exception}")

        def teardown(self, trainer: Any, module: Any, stage: str) -> None:
            calls.append(f"teardown:{stage.value}")

    trainer = trainkit.Trainer(max_epochs=1, callbacks=[Watch()], **QUIET)
    try:
        trainer.fit(Boom(), loader(blobs(64), 32))
    except RuntimeError as error:
        assert str(error) == "boom"
    else:
        raise AssertionError("the step's exception must propagate")
    assert calls == ["exception:boom", "teardown:fit"]


class _EpochEndOrder(Classifier):
    def __init__(self, calls: list[str]) -> None:
        super().__init__()
        self.calls = calls

    def on_train_epoch_end(self) -> None:
        self.calls.append("module")


class _EpochEndCallback(trainkit.Callback):
    def __init__(self, calls: list[str], name: str) -> None:
        self.calls, self.name = calls, name

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        self.calls.append(self.name)


class _Monitoring(_EpochEndCallback):
    monitors_epoch_end = True


def test_a_callback_declaring_monitors_epoch_end_runs_after_the_modules_epoch_end() -> None:
    calls: list[str] = []
    callbacks = [_Monitoring(calls, "monitoring"), _EpochEndCallback(calls, "plain")]
    trainer = trainkit.Trainer(max_epochs=1, callbacks=callbacks, limit_train_batches=2, **QUIET)
    trainer.fit(_EpochEndOrder(calls), loader(blobs(16), batch_size=8))
    # As ModelCheckpoint and EarlyStopping: after the Module, whatever the list's order.
    assert calls == ["plain", "module", "monitoring"]


class _Pair:
    """A batch type of the user's own, moved by its own ``to``."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, moves: list[str]) -> None:
        self.x, self.y, self._moves = x, y, moves

    def to(self, device: torch.device) -> _Pair:
        self._moves.append(str(device))
        return _Pair(self.x.to(device), self.y.to(device), self._moves)


class _SeesBatches(Classifier):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.seen.append(batch)
        if isinstance(batch, _Pair):
            batch = (batch.x, batch.y)
        return super().training_step(batch, batch_idx)


def _fit_recording_moves(
    monkeypatch: Any, accelerator: bool, batches: list[Any]
) -> tuple[list[Any], int]:
    from trainkit.loops import hooks
    from trainkit.strategies.base import Strategy

    calls = []
    move = Strategy.batch_to_device

    def counted(self: Strategy, batch: Any, dataloader_idx: int = 0) -> Any:
        calls.append(dataloader_idx)
        return move(self, batch, dataloader_idx)

    monkeypatch.setattr(Strategy, "batch_to_device", counted)
    monkeypatch.setattr(hooks, "_accelerator_available", lambda: accelerator)
    model = _SeesBatches()
    trainkit.Trainer(max_epochs=1, **QUIET).fit(model, batches)
    return model.seen, len(calls)


def test_without_an_accelerator_tensor_batches_reach_the_step_unmoved(monkeypatch: Any) -> None:
    data = blobs(64)
    batches = [[data.tensors[0][i : i + 16], data.tensors[1][i : i + 16]] for i in (0, 16, 32)]
    seen, moves = _fit_recording_moves(monkeypatch, False, batches)
    # On a machine with only a CPU there is nowhere else a tensor could be: the
    # loader's own tensors are trained on, and no device check runs per batch.
    assert moves == 0
    assert all(got is sent for got, sent in zip(seen, batches, strict=True))
    # With an accelerator in the machine, every batch goes through the strategy's move.
    _, moves = _fit_recording_moves(monkeypatch, True, batches)
    assert moves == 3


def test_without_an_accelerator_a_batch_type_of_the_users_own_is_still_moved(
    monkeypatch: Any,
) -> None:
    data, moved = blobs(32), []
    x, y = data.tensors
    batches = [_Pair(x[i : i + 16], y[i : i + 16], moved) for i in (0, 16)]
    seen, moves = _fit_recording_moves(monkeypatch, False, batches)
    assert moves == 2 and moved == ["cpu", "cpu"]  # its own `to`, once per batch
    assert all(isinstance(batch, _Pair) and batch not in batches for batch in seen)

"""The optimization step: its order is the code, whichever callbacks fill its slots."""

from __future__ import annotations

from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, MemoryLogger, blobs, loader
from trainkit.callbacks import GradientClipping, MixedPrecision, NonFiniteLoss
from trainkit.callbacks.slots import StepSlots


class _Scaler:
    """A stand-in GradScaler that records what the step asks of it."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        self.calls.append("scale")
        return loss * 1.0

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        self.calls.append("unscale")

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        self.calls.append("step")
        optimizer.step()

    def update(self) -> None:
        self.calls.append("update")


class RecordingPrecision(trainkit.Callback):
    """Fills the precision slot: an autocast stand-in and the recording scaler."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.scaler = _Scaler(calls)
        self.scales_loss = True

    def configure_step(self, slots: StepSlots) -> None:
        slots.set_precision(self)  # type: ignore[arg-type]

    def forward_context(self) -> AbstractContextManager[Any]:
        @contextmanager
        def autocast() -> Any:
            self.calls.append("autocast in")
            yield
            self.calls.append("autocast out")

        return autocast()


class RecordingClipping(trainkit.Callback):
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.by_norm = True

    def configure_step(self, slots: StepSlots) -> None:
        slots.set_clipping(self)

    def clip(self, optimizer: torch.optim.Optimizer, module: trainkit.Module) -> None:
        self.calls.append("clip")


class RecordingHooks(trainkit.Callback):
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def on_before_backward(self, trainer: Any, module: Any, loss: torch.Tensor) -> None:
        self.calls.append("on_before_backward")

    def on_after_backward(self, trainer: Any, module: Any) -> None:
        self.calls.append("on_after_backward")

    def on_before_optimizer_step(self, trainer: Any, module: Any, optimizer: Any) -> None:
        self.calls.append("on_before_optimizer_step")

    def on_before_zero_grad(self, trainer: Any, module: Any, optimizer: Any) -> None:
        self.calls.append("on_before_zero_grad")


class StepRecorder(Classifier):
    def __init__(self, calls: list[str]) -> None:
        super().__init__()
        self.calls = calls

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.calls.append("training_step")
        return super().training_step(batch, batch_idx)


# The gradients are cleared at the start of each window (the last step's, kept for
# the hooks after it), before the forward pass.
ONE_STEP = [
    "on_before_zero_grad",
    "autocast in",
    "training_step",
    "autocast out",
    "on_before_backward",
    "scale",
    "on_after_backward",
    "unscale",
    "on_before_optimizer_step",
    "clip",
    "step",
    "update",
]


def test_one_automatic_step_runs_in_the_documented_order() -> None:
    calls: list[str] = []
    callbacks = [RecordingHooks(calls), RecordingPrecision(calls), RecordingClipping(calls)]
    trainer = trainkit.Trainer(max_steps=1, callbacks=callbacks, **QUIET)
    trainer.fit(StepRecorder(calls), loader(blobs(64), 32))
    assert calls == ONE_STEP


def test_the_order_does_not_depend_on_the_callback_list_order() -> None:
    calls: list[str] = []
    callbacks = [RecordingClipping(calls), RecordingPrecision(calls), RecordingHooks(calls)]
    trainer = trainkit.Trainer(max_steps=1, callbacks=callbacks, **QUIET)
    trainer.fit(StepRecorder(calls), loader(blobs(64), 32))
    assert calls == ONE_STEP


def test_accumulation_steps_once_per_window_and_syncs_only_then() -> None:
    calls: list[str] = []
    trainer = trainkit.Trainer(
        max_steps=1,
        accumulate_grad_batches=2,
        callbacks=[RecordingHooks(calls)],
        **QUIET,
    )
    trainer.fit(StepRecorder(calls), loader(blobs(64), 16))
    window = ["training_step", "on_before_backward", "on_after_backward"]
    assert calls == ["on_before_zero_grad", *window, *window, "on_before_optimizer_step"]


class ManualRecorder(StepRecorder):
    def __init__(self, calls: list[str]) -> None:
        super().__init__(calls)
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> None:
        self.calls.append("training_step")
        x, y = batch
        optimizer = self.optimizers()
        optimizer.zero_grad()
        self.manual_backward(torch.nn.functional.cross_entropy(self(x), y))
        optimizer.step()


def test_manual_optimization_goes_through_the_same_pieces() -> None:
    calls: list[str] = []
    callbacks = [RecordingHooks(calls), RecordingPrecision(calls), RecordingClipping(calls)]
    trainer = trainkit.Trainer(max_steps=1, callbacks=callbacks, **QUIET)
    trainer.fit(ManualRecorder(calls), loader(blobs(64), 32))
    assert calls == [
        "autocast in",
        "training_step",
        "on_before_zero_grad",
        "on_before_backward",
        "scale",
        "on_after_backward",
        "unscale",
        "on_before_optimizer_step",
        "clip",
        "step",
        "update",
        "autocast out",
    ]
    assert trainer.global_step == 1


class StepsOutsideTrainingStep(trainkit.Callback):
    """Steps the Module's optimizer after each batch, recording ``global_step``."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
        module.optimizers().step()
        self.seen.append(trainer.global_step)


class StepsUncounted(ManualRecorder):
    """Steps once counted, then once with the step's counting hooks swapped out."""

    def training_step(self, batch: Any, batch_idx: int) -> None:
        super().training_step(batch, batch_idx)
        optimizer = self.optimizers()
        saved = optimizer._on_before_step, optimizer._on_after_step
        optimizer._on_before_step = optimizer._on_after_step = lambda: None
        try:
            optimizer.step()
        finally:
            optimizer._on_before_step, optimizer._on_after_step = saved


def test_manual_steps_count_inside_training_step_unless_their_hooks_are_swapped() -> None:
    callback = StepsOutsideTrainingStep()
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[callback], **QUIET)
    trainer.fit(StepsUncounted([]), loader(blobs(96), 32))
    # One counted step a batch: neither the swapped-hook step nor the callback's counts.
    assert callback.seen == [1, 2, 3]
    assert trainer.global_step == 3


def test_manual_optimization_refuses_accumulation() -> None:
    trainer = trainkit.Trainer(max_steps=1, accumulate_grad_batches=2, **QUIET)
    with pytest.raises(ValueError, match="works with automatic optimization only"):
        trainer.fit(ManualRecorder([]), loader(blobs(64), 32))


def test_a_vetoed_step_still_updates_the_scaler_and_clears_the_gradients() -> None:
    calls: list[str] = []

    class NaNOnce(StepRecorder):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = super().training_step(batch, batch_idx)
            return loss * float("nan") if batch_idx == 0 else loss

    callbacks = [RecordingHooks(calls), RecordingPrecision(calls), NonFiniteLoss("skip")]
    trainer = trainkit.Trainer(max_steps=1, callbacks=callbacks, **QUIET)
    model = NaNOnce(calls)
    before = [p.detach().clone() for p in model.parameters()]
    trainer.fit(model, loader(blobs(64), 32))
    assert "step" not in calls and calls[-1] == "update"
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    # The skipped window's gradients are cleared before the next window's forward
    # pass: the next step applies only its own.
    calls.clear()
    callbacks = [RecordingHooks(calls), RecordingPrecision(calls), NonFiniteLoss("skip")]
    model = NaNOnce(calls)
    trainkit.Trainer(max_steps=2, callbacks=callbacks, **QUIET).fit(model, loader(blobs(64), 32))
    assert calls.count("step") == 1 and calls.count("on_before_zero_grad") == 2
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())


class TestSlots:
    def test_each_slot_takes_one_contributor(self) -> None:
        with pytest.raises(ValueError, match="MixedPrecision is given twice"):
            trainkit.Trainer(callbacks=[MixedPrecision("bf16-mixed"), MixedPrecision("16-mixed")])
        with pytest.raises(ValueError, match="clipping slot is filled twice"):
            trainkit.Trainer(callbacks=[GradientClipping(max_norm=1.0), RecordingClipping([])])

    def test_strategies_ask_the_slots_what_the_step_does(self) -> None:
        plain = trainkit.Trainer(**QUIET).step_slots
        assert not (plain.scales_loss or plain.accumulates or plain.clips_by_norm)
        shaped = trainkit.Trainer(
            precision="16-mixed", accumulate_grad_batches={0: 1, 3: 2}, gradient_clip_val=1.0
        ).step_slots
        assert shaped.scales_loss and shaped.accumulates and shaped.clips_by_norm
        by_value = trainkit.Trainer(gradient_clip_val=1.0, gradient_clip_algorithm="value")
        assert not by_value.step_slots.clips_by_norm
        assert not trainkit.Trainer(precision="bf16-mixed").step_slots.scales_loss

    def test_steps_per_epoch_follow_the_accumulation_schedule(self) -> None:
        slots = trainkit.Trainer(accumulate_grad_batches={0: 4, 2: 1}).step_slots
        assert [slots.steps_in_epoch(10, epoch) for epoch in range(3)] == [3, 3, 10]


def test_a_callback_written_for_the_old_step_hooks_is_refused() -> None:
    class OldScaling(trainkit.Callback):
        def scale_loss(self, trainer: Any, module: Any, loss: torch.Tensor) -> torch.Tensor:
            return loss * 2

    with pytest.raises(TypeError, match=r"OldScaling defines scale_loss.*configure_step"):
        trainkit.Trainer(callbacks=[OldScaling()])


def test_a_callback_of_ones_own_in_the_nonfinite_slot_replaces_the_default_check() -> None:
    class Lenient(trainkit.Callback):
        vetoes_steps = False

        def __init__(self) -> None:
            self.seen = 0
            self.windows = 0

        def configure_step(self, slots: StepSlots) -> None:
            slots.set_nonfinite(self)

        def observe(self, loss: torch.Tensor, global_step: int) -> None:
            self.seen += 1

        def allow_step(self, global_step: int) -> bool:
            return True

        def end_window(self) -> None:
            self.windows += 1

    watcher = Lenient()
    trainer = trainkit.Trainer(max_steps=3, callbacks=[watcher], **QUIET)
    assert not any(isinstance(cb, NonFiniteLoss) for cb in trainer.callbacks)
    trainer.fit(Classifier(), loader(blobs(128), 32))
    # Every loss seen, every window's end told (also on the plain step).
    assert watcher.seen == 3 and watcher.windows == 3


class FusedStrategy(trainkit.strategies.SingleDeviceStrategy):
    """Computes each batch's loss together with its gradients, as a pipeline does."""

    def __init__(self, calls: list[str]) -> None:
        super().__init__("cpu")
        self.calls = calls
        self.module: Classifier | None = None
        self.losses: list[float] = []
        self.slots: StepSlots | None = None

    def fused_backward(self, slots: StepSlots) -> Any:
        self.slots = slots

        def forward_backward(batch: Any, loss_scale: float) -> torch.Tensor:
            assert self.module is not None
            self.calls.append(f"pass {loss_scale}")
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.module(x), y)
            (loss * loss_scale).backward()  # type: ignore[no-untyped-call]
            self.losses.append(float(loss.detach()))
            return loss.detach()

        return forward_backward


class RecordsLoggedLoss(trainkit.Callback):
    def __init__(self) -> None:
        self.logged: list[float] = []

    def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
        self.logged.append(float(trainer.callback_metrics["train/loss"]))


def test_a_strategys_fused_pass_is_the_steps_forward_and_backward() -> None:
    # The step runs the pass in place of training_step + backward, hands it the
    # window's loss scale, logs its loss once per step and runs the hooks after it.
    calls: list[str] = []
    strategy, logged = FusedStrategy(calls), RecordsLoggedLoss()
    trainer = trainkit.Trainer(
        max_steps=2,
        strategy=strategy,
        accumulate_grad_batches=2,
        callbacks=[RecordingHooks(calls), logged],
        **QUIET,
    )
    model = StepRecorder(calls)
    strategy.module = model
    before = [p.detach().clone() for p in model.parameters()]
    trainer.fit(model, loader(blobs(64), 16))
    assert strategy.slots is trainer.step_slots
    micro_batch = ["pass 0.5", "on_before_backward", "on_after_backward"]
    one_step = ["on_before_zero_grad", *micro_batch, *micro_batch, "on_before_optimizer_step"]
    assert calls == [*one_step, *one_step]  # training_step never runs
    assert logged.logged == pytest.approx(strategy.losses)
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_manual_optimization_refuses_a_fused_pass() -> None:
    trainer = trainkit.Trainer(max_steps=1, strategy=FusedStrategy([]), **QUIET)
    with pytest.raises(ValueError, match="manual optimization"):
        trainer.fit(ManualRecorder([]), loader(blobs(64), 32))


# ------------------------------------------- the plain step and the general one
class Outputs(Classifier):
    """Returns the loss as a tensor (logged or not), in a dict, or None (skip) by batch."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        if self.kind == "unlogged":  # the progress bar shows the step's loss itself
            return torch.nn.functional.cross_entropy(self(batch[0]), batch[1])
        loss = super().training_step(batch, batch_idx)
        if self.kind == "dict":
            return {"loss": loss, "batch_idx": batch_idx}
        if self.kind == "skip" and batch_idx % 3 == 1:
            return None
        return loss


class SeesEveryBatch(trainkit.Callback):
    """Records what each batch's end receives and shows (no step hook: the plain step runs)."""

    def __init__(self) -> None:
        self.outputs: list[Any] = []

    def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, *args: Any) -> None:
        received = {k: v.item() if torch.is_tensor(v) else v for k, v in outputs.items()}
        self.outputs.append((received, trainer.progress_bar_metrics))


class ShapesTheStep(SeesEveryBatch):
    """The same, with a step hook overridden: the general step runs."""

    def on_before_zero_grad(self, trainer: Any, module: Any, optimizer: Any) -> None:
        pass


@pytest.mark.filterwarnings("ignore:`training_step` returned `None`")
@pytest.mark.parametrize("kind", ["tensor", "unlogged", "dict", "skip"])
def test_the_plain_step_trains_exactly_as_the_general_one(kind: str) -> None:
    # Nothing shapes the step: the loop runs Optimization.plain, one function for the
    # common case. It must be the general step minus what is absent, bit for bit:
    # weights, step count, what each batch's end receives, the bar, the loggers' rows.
    runs = []
    for seen in (SeesEveryBatch(), ShapesTheStep()):
        logger = MemoryLogger()
        trainer = trainkit.Trainer(
            max_epochs=2,
            log_every_n_steps=2,
            callbacks=[seen],
            **{**QUIET, "logger": logger},
        )
        torch.manual_seed(0)
        module = Outputs(kind)
        trainer.fit(module, loader(blobs(160), 32))
        chosen = trainer._optimization.batch_step().__name__
        runs.append((chosen, module.state_dict(), trainer.global_step, seen.outputs, logger.rows))
    (plain, plain_weights, *plain_run), (general, general_weights, *general_run) = runs
    assert (plain, general) == ("plain", "automatic")
    for name in plain_weights:
        assert torch.equal(plain_weights[name], general_weights[name]), name
    assert plain_run == general_run
    steps, outputs, rows = plain_run
    assert steps == 10 and len(outputs) == 10  # 5 batches in each of 2 epochs
    assert all(("loss" in received) != (received == {}) for received, _ in outputs)
    assert all("loss" in shown or "train/loss" in shown for _, shown in outputs)
    written = [row for row in rows if "train/loss" in row]
    assert len(written) == (0 if kind == "unlogged" else 5)  # every log_every_n_steps=2


class KeepsOutputs(trainkit.Callback):
    """Keeps what each batch's end receives, as a callback collecting losses does."""

    def __init__(self) -> None:
        self.outputs: list[Any] = []

    def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, *args: Any) -> None:
        self.outputs.append(outputs)


class ReturnsLoss(Classifier):
    """Returns its loss as a tensor, in a dict, or None; steps itself when ``manual``."""

    def __init__(self, kind: str, manual: bool) -> None:
        super().__init__()
        self.kind, self.automatic_optimization = kind, not manual
        self.losses: list[float] = []

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = torch.nn.functional.cross_entropy(self(batch[0]), batch[1])
        self.losses.append(loss.item())
        if not self.automatic_optimization:
            optimizer = self.optimizers()
            optimizer.zero_grad()
            self.manual_backward(loss)
            optimizer.step()
        if self.kind == "dict":
            return {"extra": batch_idx, "loss": loss}
        return None if self.kind == "none" else loss


@pytest.mark.parametrize(
    ("kind", "manual", "accumulate"),
    [
        ("tensor", False, 1),
        ("dict", False, 1),
        ("tensor", False, 2),
        ("dict", False, 2),
        ("tensor", True, 1),
        ("dict", True, 1),
        ("none", True, 1),
    ],
)
def test_batch_end_hooks_receive_the_loss_detached_in_a_dict(
    kind: str, manual: bool, accumulate: int
) -> None:
    # As in Lightning: a dict whose loss is detached (a callback that keeps it keeps no
    # graph) and divided as backward took it under accumulation; {} for None.
    kept = KeepsOutputs()
    trainer = trainkit.Trainer(
        max_epochs=1, accumulate_grad_batches=accumulate, callbacks=[kept], **QUIET
    )
    module = ReturnsLoss(kind, manual)
    trainer.fit(module, loader(blobs(64), 16))
    assert len(kept.outputs) == 4
    for batch_idx, (outputs, loss) in enumerate(zip(kept.outputs, module.losses, strict=True)):
        if kind == "none":
            assert outputs == {}
            continue
        if kind == "dict":  # automatic: the loss first; manual: the dict's own order
            assert list(outputs) == (["extra", "loss"] if manual else ["loss", "extra"])
        else:
            assert list(outputs) == ["loss"]
        assert not outputs["loss"].requires_grad and outputs["loss"].grad_fn is None
        assert outputs["loss"].item() == pytest.approx(loss / accumulate)
        if kind == "dict":
            assert outputs["extra"] == batch_idx


def test_a_steps_gradients_are_there_after_it_and_gone_before_the_next_forward() -> None:
    # As in Lightning, hooks after the step (on_train_batch_end, on_train_epoch_end)
    # read its gradients; they are freed before the next forward pass, where memory peaks.
    seen: list[str] = []

    def state(module: trainkit.Module) -> str:
        grads = [p.grad for p in module.parameters()]
        return "none" if all(g is None for g in grads) else "kept"

    class Probe(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            seen.append(f"forward {state(self)}")
            return super().training_step(batch, batch_idx)

        def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
            seen.append(f"batch end {state(self)}")

        def on_train_epoch_end(self) -> None:
            seen.append(f"epoch end {state(self)}")

    for accumulate in (1, 2):  # the plain step, and the general one with a window
        seen.clear()
        trainer = trainkit.Trainer(max_epochs=1, accumulate_grad_batches=accumulate, **QUIET)
        trainer.fit(Probe(), loader(blobs(64), 16))
        window = ["forward none", "batch end kept"] + (
            ["forward kept", "batch end kept"] if accumulate == 2 else []
        )
        assert seen == window * (4 // accumulate) + ["epoch end kept"]


class _LBFGSClassifier(Classifier):
    """A Classifier stepped by LBFGS, which evaluates the loss again within each step."""

    def __init__(self) -> None:
        super().__init__()
        self.evaluations = 0
        self.zero_grads = 0

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.evaluations += 1
        return super().training_step(batch, batch_idx)

    def on_before_zero_grad(self, optimizer: Any) -> None:
        self.zero_grads += 1

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.LBFGS(self.parameters(), lr=0.5, max_iter=4)


class _LBFGSOverride(_LBFGSClassifier):
    """The same, stepping in Lightning's documented form of an optimizer_step override."""

    def optimizer_step(
        self, epoch: int, batch_idx: int, optimizer: Any, closure: Any = None
    ) -> None:
        optimizer.step(closure=closure)


@pytest.mark.parametrize("kind", [_LBFGSClassifier, _LBFGSOverride])
def test_lbfgs_in_automatic_optimization_evaluates_again_as_a_hand_written_loop(
    kind: type[_LBFGSClassifier],
) -> None:
    data = loader(blobs(96), 32)
    torch.manual_seed(0)
    model = kind()
    expected = Classifier()
    expected.load_state_dict(model.state_dict())
    optimizer = torch.optim.LBFGS(expected.parameters(), lr=0.5, max_iter=4)
    evaluations = 0
    for x, y in data:

        def closure(x: torch.Tensor = x, y: torch.Tensor = y) -> torch.Tensor:
            nonlocal evaluations
            evaluations += 1
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(expected(x), y)
            loss.backward()  # type: ignore[no-untyped-call]
            return loss

        optimizer.step(closure)
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(model, data)
    assert trainer.global_step == 3
    # Each closure call after the step's first runs training_step again, after a zero_grad.
    assert model.evaluations == evaluations > 3 and model.zero_grads == evaluations
    for got, want in zip(model.parameters(), expected.parameters(), strict=True):
        torch.testing.assert_close(got, want)

"""MixedPrecision, GradientClipping and NonFiniteLoss, and how they interact."""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import GradientClipping, MixedPrecision, NonFiniteLoss, NonFiniteLossError

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


class DtypeProbe(Classifier):
    """Records the dtype the forward pass computes in, and the parameters' dtype."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        logits = self(x)
        self.seen = (logits.dtype, next(self.parameters()).dtype)
        return torch.nn.functional.cross_entropy(logits.float(), y)


def _accuracy(precision: str) -> tuple[float, DtypeProbe, trainkit.Trainer]:
    torch.manual_seed(0)
    model = DtypeProbe(lr=0.2)
    trainer = trainkit.Trainer(max_epochs=8, precision=precision, **QUIET)
    trainer.fit(model, loader(blobs(1024), 32, shuffle=True))
    result = trainkit.Trainer(**QUIET).validate(model.float(), loader(blobs(300, seed=1), 100))
    return result[0]["val/acc"], model, trainer


def test_bf16_mixed_on_cpu_trains_as_well_as_fp32_and_really_runs_in_bf16() -> None:
    fp32, model32, _ = _accuracy("32-true")
    bf16, model16, trainer = _accuracy("bf16-mixed")
    assert model32.seen == (torch.float32, torch.float32)
    assert model16.seen == (torch.bfloat16, torch.float32)  # bf16 compute, fp32 weights
    assert fp32 >= 0.9 and bf16 >= 0.9, (fp32, bf16)
    # Optimizer state stays float32.
    states = trainer.optimizers[0].state_dict()["state"]
    assert all(
        t.dtype == torch.float32
        for s in states.values()
        for t in s.values()
        if isinstance(t, torch.Tensor) and t.is_floating_point()
    )


def test_bf16_true_casts_the_model() -> None:
    torch.manual_seed(0)
    model = DtypeProbe()
    trainkit.Trainer(max_epochs=1, precision="bf16-true", **QUIET).fit(model, loader(blobs(64), 32))
    assert model.seen == (torch.bfloat16, torch.bfloat16)


def test_16_true_casts_the_model() -> None:
    torch.manual_seed(0)
    model = DtypeProbe()
    trainer = trainkit.Trainer(max_epochs=1, precision="16-true", **QUIET)
    trainer.fit(model, loader(blobs(64), 32))
    assert model.seen == (torch.float16, torch.float16)
    precision = next(cb for cb in trainer.callbacks if isinstance(cb, MixedPrecision))
    assert trainer.precision == "16-true" and not precision.scales_loss  # no scaler
    assert all(torch.isfinite(parameter).all() for parameter in model.parameters())


class Float64Probe(Classifier):
    """Records the dtypes each hook sees under precision="64-true"."""

    def __init__(self) -> None:
        super().__init__(lr=0.2)
        self.seen: dict[str, Any] = {}

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        self.seen.setdefault("before transfer", tuple(t.dtype for t in batch))
        return batch

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.seen.setdefault("made in the step", torch.zeros(1).dtype)
        return super().training_step(batch, batch_idx)

    def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.seen.setdefault("predicting", batch[0].dtype)
        return self(batch[0])


def test_64_true_trains_in_float64_what_a_float64_model_on_float64_data_trains() -> None:
    """As Lightning's "64-true": the model and each batch's floating tensors (not its
    labels) in float64, before the transfer hooks; float64 the default dtype inside
    the steps; init_module builds in float64. The weights equal those of a float64
    copy trained by the plain Trainer on float64 data."""
    data = blobs(256)
    trainer = trainkit.Trainer(max_epochs=2, precision="64-true", **QUIET)
    with trainer.init_module():
        assert next(Float64Probe().parameters()).dtype == torch.float64
    torch.manual_seed(0)
    model = Float64Probe()  # float32: the Trainer casts it
    trainer.fit(model, loader(data, 32, shuffle=False))
    predictions = trainer.predict(model, loader(data, 64))
    assert model.seen == {
        "before transfer": (torch.float64, torch.int64),
        "made in the step": torch.float64,
        "predicting": torch.float64,
    }
    assert predictions is not None and predictions[0].dtype == torch.float64
    assert torch.get_default_dtype() == torch.float32  # restored after each step

    torch.manual_seed(0)
    expected = Float64Probe().double()
    inputs, labels = data.tensors
    doubled = torch.utils.data.TensorDataset(inputs.double(), labels)
    trainkit.Trainer(max_epochs=2, **QUIET).fit(expected, loader(doubled, 32, shuffle=False))
    for got, want in zip(model.parameters(), expected.parameters(), strict=True):
        assert torch.equal(got, want)


def test_float16_on_the_cpu_is_said_once_and_runs_as_asked() -> None:
    # Lightning switches to bf16-mixed on the CPU; trainkit runs float16, and says so.
    outputs: list[torch.dtype] = []

    class Probe(Classifier):
        def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self(batch[0])

    trainer = trainkit.Trainer(max_epochs=1, precision="16-mixed", **QUIET)
    model = Probe()
    with pytest.warns(UserWarning, match=r"precision='16-mixed' on the CPU.*float16") as said:
        trainer.fit(model, loader(blobs(64), 32))
        outputs += [p.dtype for p in trainer.predict(model, loader(blobs(32), 32))]
    assert sum("on the CPU" in str(w.message) for w in said) == 1
    assert outputs == [torch.float16]


def test_fp16_scaler_state_survives_a_checkpoint(tmp_path: Path) -> None:
    torch.manual_seed(0)
    trainer = trainkit.Trainer(max_epochs=1, precision="16-mixed", **QUIET)
    trainer.fit(Classifier(), loader(blobs(128), 32))
    precision = next(cb for cb in trainer.callbacks if isinstance(cb, MixedPrecision))
    assert precision.scaler is not None
    precision.scaler.update(1234.0)  # a distinctive scale
    trainer.save_checkpoint(tmp_path / "fp16.ckpt")

    resumed = trainkit.Trainer(max_epochs=1, precision="16-mixed", **QUIET)
    resumed_precision = next(cb for cb in resumed.callbacks if isinstance(cb, MixedPrecision))
    resumed.fit(Classifier(), loader(blobs(128), 32), ckpt_path=tmp_path / "fp16.ckpt")
    assert resumed_precision.scaler is not None
    # Restored (and not trained further: the checkpoint was at the end of max_epochs).
    assert resumed_precision.scaler.get_scale() == 1234.0


class NormProbe(trainkit.Callback):
    """Records the gradient norm the optimizer stepped with (kept until the next step)."""

    def __init__(self) -> None:
        self.norms: list[float] = []

    def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
        grads = [p.grad for p in module.parameters() if p.grad is not None]
        self.norms.append(
            float(
                torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
            )
        )


@pytest.mark.parametrize("precision", ["32-true", "16-mixed"])
def test_clipping_bounds_the_norm_of_the_real_gradients(precision: str) -> None:
    probe = NormProbe()
    trainer = trainkit.Trainer(
        max_epochs=1, precision=precision, gradient_clip_val=0.01, callbacks=[probe], **QUIET
    )
    trainer.fit(Classifier(lr=0.5), loader(blobs(256), 32))
    stepped = [n for n in probe.norms if n > 0]
    assert stepped, probe.norms
    assert all(n <= 0.01 + 1e-6 for n in probe.norms)
    # Clipped at 0.01, not at 0.01 / scale: clipping saw unscaled gradients.
    assert all(n == pytest.approx(0.01, rel=1e-3) for n in stepped)


def test_clipping_by_value_and_logging_the_norm() -> None:
    probe = NormProbe()
    clip = GradientClipping(max_norm=1e-3, log_grad_norm=True)
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[clip, probe], **QUIET)
    trainer.fit(Classifier(), loader(blobs(64), 32))
    assert float(trainer.callback_metrics["grad_norm"]) > 1e-3  # logged before clipping
    with pytest.raises(ValueError, match="exactly one of max_norm and max_value"):
        GradientClipping(max_norm=1.0, max_value=1.0)
    seen: list[float] = []

    class MaxProbe(trainkit.Callback):
        def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
            seen.append(max(float(p.grad.abs().max()) for p in module.parameters()))

    trainkit.Trainer(
        max_epochs=1,
        gradient_clip_val=1e-4,
        gradient_clip_algorithm="value",
        callbacks=[MaxProbe()],
        **QUIET,
    ).fit(Classifier(), loader(blobs(64), 32))
    assert all(value <= 1e-4 for value in seen)


class NanAtStep7(Classifier):
    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if self.global_step == 7 else loss


def test_a_nan_loss_stops_with_the_step_and_the_last_finite_loss() -> None:
    trainer = trainkit.Trainer(max_epochs=2, log_every_n_steps=50, **QUIET)
    with pytest.raises(NonFiniteLossError) as info:
        trainer.fit(NanAtStep7(), loader(blobs(320), 32))
    message = str(info.value)
    assert message.startswith("The training loss is nan at step 7 (the last finite loss was ")
    assert "at step 6)" in message and "NonFiniteLoss('skip')" in message
    # On the CPU the loss is read at once: no step is taken after the NaN.
    assert trainer.global_step == 7


class LossWatcher(Classifier):
    """Keeps a weak reference to every step's loss, to see which are still alive."""

    def __init__(self) -> None:
        super().__init__()
        self.losses: list[weakref.ref[torch.Tensor]] = []
        self.alive_at_step: list[int] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        # Losses of steps before the previous one (the Trainer keeps the last one).
        self.alive_at_step.append(sum(ref() is not None for ref in self.losses[:-1]))
        loss = super().training_step(batch, batch_idx)
        self.losses.append(weakref.ref(loss))
        return loss


def test_the_nan_check_keeps_no_step_s_loss_and_graph_alive() -> None:
    # It checks 50 steps at a time; holding the losses (and their autograd graphs)
    # until then slowed small DDP steps by 5-10%.
    model = LossWatcher()
    trainer = trainkit.Trainer(max_steps=20, log_every_n_steps=50, **QUIET)
    trainer.fit(model, loader(blobs(640), 32))
    assert model.alive_at_step == [0] * 20


def test_no_checkpoint_is_written_after_a_nan(tmp_path: Path) -> None:
    from trainkit.callbacks import ModelCheckpoint

    trainer = trainkit.Trainer(
        max_epochs=2,
        default_root_dir=tmp_path,
        **QUIET,
        callbacks=[ModelCheckpoint(every_n_train_steps=9)],
    )
    with pytest.raises(NonFiniteLossError, match="at step 7"):
        trainer.fit(NanAtStep7(), loader(blobs(320), 32))
    assert not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize("at_once", [True, False])
def test_warn_mode_trains_on_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, at_once: bool
) -> None:
    # at_once=False: the accelerator's path, which reads the losses every 50 steps.
    monkeypatch.setattr(trainkit.callbacks.nonfinite, "READ_CPU_LOSSES_AT_ONCE", at_once)
    watcher = NonFiniteLoss("warn")
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[watcher], **QUIET)
    model = NanAtStep7()
    with pytest.warns(UserWarning, match="nan at step 7 \\(the last finite loss was") as caught:
        trainer.fit(model, loader(blobs(320), 32))
    assert sum("training goes on" in str(w.message) for w in caught) == 1
    assert trainer.global_step == 20
    # The NaN step updated the weights: every later loss is NaN too, and listed.
    assert watcher.nonfinite_steps == list(range(7, 20))
    assert not all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.parametrize("precision", ["32-true", "16-mixed"])
def test_skip_mode_skips_the_step_and_finishes_with_finite_parameters(precision: str) -> None:
    watcher = NonFiniteLoss("skip")
    trainer = trainkit.Trainer(max_epochs=2, precision=precision, callbacks=[watcher], **QUIET)
    model = NanAtStep7()
    trainer.fit(model, loader(blobs(320), 32))
    assert watcher.skipped_steps == [7]
    assert trainer.global_step == 20
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_manual_optimization_goes_through_the_scaler() -> None:
    norms: list[float] = []

    class Manual(Classifier):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch: Any, batch_idx: int) -> None:
            optimizer = self.optimizers()
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self(x), y)
            optimizer.zero_grad()
            self.manual_backward(loss)
            optimizer.step()
            norms.append(float(self.net[0].weight.grad.norm()))

    trainer = trainkit.Trainer(max_epochs=1, precision="16-mixed", **QUIET)
    trainer.fit(Manual(), loader(blobs(128), 32))
    assert trainer.global_step == 4
    # The gradients the step used were unscaled (a scaled one would be ~65536x larger).
    assert all(0 < n < 100 for n in norms), norms


def test_bad_precision() -> None:
    with pytest.raises(ValueError, match="precision='transformer-engine' is not supported"):
        trainkit.Trainer(precision="transformer-engine")
    with pytest.raises(ValueError, match="only '16-mixed' takes a scaler"):
        MixedPrecision("bf16-mixed", scaler=torch.amp.GradScaler("cpu"))
    with pytest.raises(ValueError, match="MixedPrecision is given twice"):
        trainkit.Trainer(precision="bf16-mixed", callbacks=[MixedPrecision("bf16-mixed")])


@gpu
def test_fp16_mixed_on_cuda_trains() -> None:
    accuracy, model, _ = _accuracy_on("cuda")
    assert accuracy >= 0.9
    assert model.seen == (torch.float16, torch.float32)


def _accuracy_on(device: str) -> tuple[float, DtypeProbe, trainkit.Trainer]:
    torch.manual_seed(0)
    model = DtypeProbe(lr=0.2)
    trainer = trainkit.Trainer(
        max_epochs=8,
        precision="16-mixed",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        accelerator=device,
    )
    trainer.fit(model, loader(blobs(1024), 32, shuffle=True))
    result = trainer.validate(model, loader(blobs(300, seed=1), 100))
    return result[0]["val/acc"], model, trainer

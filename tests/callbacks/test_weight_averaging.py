"""WeightAveraging: torch's AveragedModel run by hand, validation and checkpoints, exact resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import ModelCheckpoint
from trainkit.callbacks.weight_averaging import EMAWeightAveraging, WeightAveraging

DATA = blobs(96)
VAL = blobs(64, seed=1)


class Net(Classifier):
    """Classifier with BatchNorm (buffers to average), made from a fixed seed."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(8, 32),
            torch.nn.BatchNorm1d(32),
            torch.nn.ReLU(),
            torch.nn.Linear(32, 3),
        )


class EMA(WeightAveraging):
    """The EMA of the docs: decay 0.9, updated from optimizer step 3 on."""

    def __init__(self) -> None:
        super().__init__(multi_avg_fn=get_ema_multi_avg_fn(0.9))

    def should_update(self, step_idx: int | None = None, epoch_idx: int | None = None) -> bool:
        return step_idx is not None and step_idx >= 3


def by_hand(
    epochs: int, first_step: int = 0, steps: int = -1, **kwargs: Any
) -> tuple[Net, AveragedModel]:
    """The same training as a plain loop, updating AveragedModel after steps >= first_step."""
    model = Net()
    optimizer = model.configure_optimizers()
    averaged = AveragedModel(model, use_buffers=True, **kwargs)
    step = 0
    for _ in range(epochs):
        for x, y in loader(DATA, 16):
            if step == steps:
                break
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if step >= first_step:
                averaged.update_parameters(model)
            step += 1
    return model, averaged


def fit(callback: WeightAveraging, epochs: int = 2, **options: Any) -> tuple[Net, Any]:
    model = Net()
    callbacks = [callback, *options.pop("callbacks", [])]
    trainer = trainkit.Trainer(
        max_epochs=epochs, callbacks=callbacks, **{**QUIET, "num_sanity_val_steps": 0, **options}
    )
    trainer.fit(model, loader(DATA, 16), loader(VAL, 64))
    return model, trainer


def assert_close(mine: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor]) -> None:
    assert list(mine) == list(theirs)
    for name, value in mine.items():
        assert torch.allclose(value.float(), theirs[name].float(), atol=1e-6, rtol=0), name


def test_the_default_is_the_mean_after_every_step_and_the_model_ends_with_it() -> None:
    callback = WeightAveraging()
    model, _ = fit(callback)
    _, averaged = by_hand(2)
    assert int(averaged.n_averaged) == 12
    assert_close(model.state_dict(), averaged.module.state_dict())


def test_ema_subclass_with_should_update() -> None:
    model, _ = fit(EMA())
    trained, averaged = by_hand(2, first_step=3, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    assert int(averaged.n_averaged) == 9
    assert_close(model.state_dict(), averaged.module.state_dict())
    assert not torch.allclose(model.net[0].weight, trained.net[0].weight)


def test_lightnings_ema_callback_is_the_ema_by_hand() -> None:
    # decay 0.9 from step 3 on: the same average as the subclass above, by hand.
    model, _ = fit(EMAWeightAveraging(decay=0.9, update_starting_at_step=3))
    _, averaged = by_hand(2, first_step=3, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    assert_close(model.state_dict(), averaged.module.state_dict())
    every_other = EMAWeightAveraging(update_every_n_steps=2, update_starting_at_epoch=1)
    assert [s for s in range(6) if every_other.should_update(step_idx=s)] == [0, 2, 4]
    assert [e for e in range(3) if every_other.should_update(epoch_idx=e)] == [1, 2]
    with pytest.raises(ValueError, match="decay must lie in"):
        EMAWeightAveraging(decay=1.5)


def test_epoch_updates() -> None:
    class PerEpoch(WeightAveraging):
        def should_update(self, step_idx: int | None = None, epoch_idx: int | None = None) -> bool:
            return epoch_idx is not None

    model, _ = fit(PerEpoch(), epochs=3)
    averaged = AveragedModel(Net(), use_buffers=True)
    for epochs in (1, 2, 3):  # the weights after each epoch
        averaged.update_parameters(by_hand(epochs)[0])
    assert_close(model.state_dict(), averaged.module.state_dict())


def test_validation_uses_the_averaged_weights_and_training_the_current_ones() -> None:
    seen: list[tuple[str, torch.Tensor]] = []

    class Watch(trainkit.Callback):
        def on_validation_batch_start(self, trainer: Any, module: Any, *args: Any) -> None:
            seen.append(("val", module.net[0].weight.detach().clone()))

        def on_train_epoch_start(self, trainer: Any, module: Any) -> None:
            seen.append(("train", module.net[0].weight.detach().clone()))

    _, trainer = fit(EMA(), callbacks=[Watch()])
    _, averaged = by_hand(2, first_step=3, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    # The last validation ran on the averaged weights; its metrics are theirs.
    assert torch.allclose(seen[-1][1], averaged.module.net[0].weight, atol=1e-6)
    x, y = VAL.tensors
    averaged.module.eval()
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(averaged.module(x), y)
    assert float(trainer.callback_metrics["val/loss"]) == pytest.approx(float(expected), abs=1e-6)
    # Epoch 1 trained on from the current weights, not the averaged ones.
    one_epoch, _ = by_hand(1)
    assert seen[2][0] == "train"
    assert torch.allclose(seen[2][1], one_epoch.net[0].weight, atol=1e-6)


class CountsSwaps(EMA):
    """Overrides the two methods a subclass written for Lightning overrides, by their names."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def _swap_models(self, module: Any) -> None:
        self.calls.append("swap")
        super()._swap_models(module)

    def _copy_average_to_current(self, module: Any) -> None:
        self.calls.append("copy")
        super()._copy_average_to_current(module)


def test_a_subclass_overriding_lightnings_swap_and_copy_methods_has_them_called() -> None:
    callback = CountsSwaps()
    model, _ = fit(callback)
    # Into the model and back around each epoch's validation; the average copied in at the end.
    assert callback.calls == ["swap", "swap", "swap", "swap", "copy"]
    _, averaged = by_hand(2, first_step=3, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    assert torch.allclose(model.net[0].weight, averaged.module.net[0].weight, atol=1e-6)


def test_checkpoints_hold_the_averaged_weights_as_state_dict(tmp_path: Path) -> None:
    model = Net()
    trainer = trainkit.Trainer(max_steps=5, callbacks=[EMA()], **QUIET)
    trainer.fit(model, loader(DATA, 16))
    trainer.save_checkpoint(tmp_path / "end.ckpt")
    _, averaged = by_hand(1, first_step=3, steps=5, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    saved = torch.load(tmp_path / "end.ckpt", weights_only=True)
    assert int(saved["averaging_state"]["n_averaged"]) == 2  # after steps 3 and 4
    # At the end of fit the model holds the average, so both entries hold it here.
    assert_close(saved["state_dict"], averaged.module.state_dict())
    assert_close(saved["current_model_state"], averaged.module.state_dict())
    loaded = Net.load_from_checkpoint(tmp_path / "end.ckpt")
    assert_close(loaded.state_dict(), averaged.module.state_dict())


def test_a_mid_fit_checkpoint_separates_the_averaged_and_current_weights(tmp_path: Path) -> None:
    saved: dict[str, Any] = {}

    class Grab(trainkit.Callback):
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            if trainer.global_step == 6:
                trainer.save_checkpoint(tmp_path / "mid.ckpt")
                saved.update(torch.load(tmp_path / "mid.ckpt", weights_only=True))

    fit(EMA(), callbacks=[Grab()])
    trained, averaged = by_hand(1, first_step=3, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    assert_close(saved["state_dict"], averaged.module.state_dict())
    assert_close(saved["current_model_state"], trained.state_dict())
    assert int(saved["averaging_state"]["n_averaged"]) == 3


class Stop(trainkit.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError("stopped")


@pytest.mark.parametrize(("accumulate", "stop"), [(1, 8), (2, 5)])  # in epoch 1
def test_a_killed_run_resumes_bitwise_equal(tmp_path: Path, accumulate: int, stop: int) -> None:
    # With accumulation, the batches after a resume point share its global_step:
    # the saved latest_update_step keeps them from updating the average again.
    def run(stop: int | None, ckpt: str | None) -> Net:
        model = Net()
        trainer = trainkit.Trainer(
            max_epochs=3,
            accumulate_grad_batches=accumulate,
            seed=0,
            default_root_dir=tmp_path,
            callbacks=[
                EMA(),
                ModelCheckpoint(every_n_train_steps=1),
                *([Stop(stop)] if stop else []),
            ],
            **{**QUIET, "enable_checkpointing": True},
        )
        trainer.fit(model, loader(DATA, 16, shuffle=True), loader(VAL, 64), ckpt_path=ckpt)
        return model

    full = run(None, None)
    for file in (tmp_path / "checkpoints").iterdir():
        file.unlink()
    with pytest.raises(RuntimeError, match="stopped"):
        run(stop, None)  # after validation ran on the averaged weights
    resumed = run(None, "last")
    for (name, a), b in zip(full.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_strategies_that_shard_the_parameters_are_refused() -> None:
    from types import SimpleNamespace

    from trainkit.callbacks.weight_averaging import check_unsharded
    from trainkit.strategies.ddp import DDPStrategy
    from trainkit.strategies.fsdp import FSDPStrategy
    from trainkit.strategies.model_parallel import ModelParallelStrategy

    for sharded in (FSDPStrategy(), ModelParallelStrategy(2, 2)):
        with pytest.raises(ValueError, match="shards the parameters"):
            check_unsharded(SimpleNamespace(strategy=sharded), "EMA")  # type: ignore[arg-type]
    check_unsharded(SimpleNamespace(strategy=DDPStrategy()), "EMA")  # type: ignore[arg-type]


def test_the_average_is_made_in_setup_as_in_lightning() -> None:
    # Callbacks after it (and code that calls the hook by itself, without a Trainer)
    # find the average once setup("fit") has run.
    alone = EMAWeightAveraging()
    alone.setup(None, Net(), "fit")  # type: ignore[arg-type]
    assert isinstance(alone._average_model, AveragedModel)

    seen: dict[str, bool] = {}
    ema = EMAWeightAveraging()

    class Probe(trainkit.Callback):
        def setup(self, trainer: trainkit.Trainer, module: trainkit.Module, stage: str) -> None:
            seen[stage] = ema._average_model is not None

    fit(ema, epochs=1, callbacks=[Probe()])
    assert seen == {"fit": True}


def test_a_module_that_builds_its_layers_late_has_them_averaged() -> None:
    class Late(Classifier):
        def __init__(self) -> None:
            super().__init__()
            del self.net

        def configure_model(self) -> None:
            if not hasattr(self, "net"):
                torch.manual_seed(0)
                self.net = torch.nn.Linear(8, 3)

    ema = EMAWeightAveraging()
    model = Late()
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[ema], **QUIET)
    trainer.fit(model, loader(DATA, 16))
    assert ema._average_model is not None
    averaged = ema._average_model.module.state_dict()
    assert list(averaged) == ["net.weight", "net.bias"]
    torch.manual_seed(0)
    initial = torch.nn.Linear(8, 3).weight
    # Averaged over the steps, and left in the model at the end.
    assert not torch.equal(averaged["net.weight"], initial)
    assert torch.equal(averaged["net.weight"], model.net.weight)

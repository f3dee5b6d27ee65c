"""strategy="dp": combining the device copies' losses and logs; the one-device fallback."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.distributed.wrapping import StepModule
from trainkit.strategies import SingleDeviceStrategy
from trainkit.strategies.dp import DataParallelStrategy, _combine_output, batch_shares, combine


def test_the_combined_loss_equals_the_whole_batch_loss() -> None:
    torch.manual_seed(0)
    logits, targets = torch.randn(10, 3), torch.randint(0, 3, (10,))
    shares = batch_shares(10, [0, 1, 2])
    assert list(shares.values()) == [4, 4, 2]
    # What each device copy returns for its chunk, as DataParallel gathers them.
    per_copy = torch.stack(
        [F.cross_entropy(x, y) for x, y in zip(logits.split(4), targets.split(4), strict=True)]
    )
    whole = F.cross_entropy(logits, targets)
    torch.testing.assert_close(_combine_output(per_copy, [4, 4, 2]), whole)
    output = _combine_output({"loss": per_copy, "extra": 1}, [4, 4, 2])
    torch.testing.assert_close(output["loss"], whole)
    assert output["extra"] == 1


def test_a_batch_smaller_than_the_devices_leaves_devices_out() -> None:
    assert batch_shares(2, [0, 1, 2, 3]) == {0: 1, 1: 1}


@pytest.mark.parametrize(
    ("reduce_fx", "expected"), [("mean", 1.75), ("sum", 5.0), ("max", 4.0), ("min", 1.0)]
)
def test_logged_values_combine_as_one_device_would(reduce_fx: str, expected: float) -> None:
    values = [torch.tensor(1.0), torch.tensor(4.0)]
    assert combine(values, [3, 1], reduce_fx).item() == pytest.approx(expected)


# Without CUDA, nn.DataParallel runs the module itself: the strategy's training
# step (capturing the copies' logs, combining them) still runs, on CPU.
@pytest.mark.skipif(torch.cuda.is_available(), reason="DataParallel would scatter to the GPUs")
def test_the_step_logs_into_the_results_store_it_was_handed() -> None:
    trainer = trainkit.Trainer(**QUIET)
    model = Classifier()
    model.trainer = trainer  # Module.log records into trainer.results
    strategy = DataParallelStrategy([0, 1])
    strategy.connect_results(trainer.results)
    wrapped = nn.DataParallel(StepModule(model), device_ids=[0, 1])
    step = strategy.step_function(wrapped, "training_step")
    batch = next(iter(loader(blobs(16), batch_size=16)))
    trainer.results.enter_training_step(batch)
    loss = step(batch, 0)
    logged = trainer.results.train.step_values(sync=False)
    assert list(logged) == ["train/loss"]
    torch.testing.assert_close(logged["train/loss"], loss.detach())


@pytest.mark.skipif(torch.cuda.device_count() == 1, reason="DataParallel needs both devices")
def test_a_step_without_the_results_store_says_what_is_missing() -> None:
    wrapped = nn.DataParallel(StepModule(Classifier()), device_ids=[0, 1])
    with pytest.raises(RuntimeError, match=r"connect_results\(results\)"):
        DataParallelStrategy([0, 1]).step_function(wrapped, "training_step")


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="this machine has several GPUs")
def test_with_fewer_than_two_gpus_it_says_so_and_trains_on_one_device() -> None:
    with pytest.warns(UserWarning, match="two or more CUDA devices.*training on one device"):
        trainer = trainkit.Trainer(strategy="dp", devices=2, max_epochs=1, **QUIET)
    assert isinstance(trainer.strategy, SingleDeviceStrategy)
    model = Classifier()
    trainer.fit(model, loader(blobs(64), batch_size=16))
    assert trainer.global_step == 4


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_two_gpus_give_the_single_device_result() -> None:  # pragma: no cover - GPU only
    results = []
    for strategy, devices in (("dp", 2), ("single_device", 1)):
        torch.manual_seed(0)
        model = Classifier()
        trainer = trainkit.Trainer(
            strategy=strategy, accelerator="cuda", devices=devices, max_steps=6, **QUIET
        )
        trainer.fit(model, loader(blobs(96), batch_size=16))
        results.append({k: v.cpu() for k, v in model.state_dict().items()})
    for key, value in results[0].items():
        torch.testing.assert_close(value, results[1][key], rtol=1e-5, atol=1e-6)

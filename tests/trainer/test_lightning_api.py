"""The Trainer's smaller Lightning names: init_module, print and the run's views."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import trainkit
from tests.helpers import QUIET, BlobData, Classifier
from trainkit.strategies.ddp import DDPStrategy


def test_init_module_builds_on_the_runs_device_and_precision() -> None:
    with trainkit.Trainer(**QUIET).init_module():
        plain = nn.Linear(4, 4)
    assert plain.weight.device == torch.device("cpu") and plain.weight.dtype == torch.float32
    with trainkit.Trainer(precision="bf16-true", **QUIET).init_module():
        halved = nn.Linear(4, 4)
    assert halved.weight.dtype == torch.bfloat16
    assert torch.get_default_dtype() == torch.float32  # put back on the way out


def test_init_module_empty_init_skips_the_random_initialization() -> None:
    torch.manual_seed(0)
    state = torch.random.get_rng_state()
    with trainkit.Trainer(**QUIET).init_module(empty_init=True):
        nn.Linear(64, 64)
    # No initializer ran: the generator drew nothing (a normal build draws 4160 numbers).
    assert torch.equal(torch.random.get_rng_state(), state)
    with trainkit.Trainer(**QUIET).init_module(empty_init=False):
        nn.Linear(64, 64)
    assert not torch.equal(torch.random.get_rng_state(), state)


def test_a_model_built_in_init_module_trains_as_one_built_outside() -> None:
    torch.manual_seed(0)
    outside = Classifier()
    torch.manual_seed(0)
    trainer = trainkit.Trainer(max_steps=4, **QUIET)
    with trainer.init_module():
        inside = Classifier()
    torch.manual_seed(1)  # the same shuffle for both
    trainer.fit(inside, datamodule=BlobData())
    torch.manual_seed(1)
    trainkit.Trainer(max_steps=4, **QUIET).fit(outside, datamodule=BlobData())
    for a, b in zip(inside.parameters(), outside.parameters(), strict=True):
        assert torch.equal(a, b)


class LateClassifier(Classifier):
    """Classifier whose network is built in configure_model (idempotently), counting calls."""

    def __init__(self) -> None:
        super().__init__()
        del self.net
        self.net: nn.Module | None = None
        self.configured: list[tuple[str, torch.dtype, bool]] = []

    def configure_model(self) -> None:
        stage = self.trainer.state.fn
        self.configured.append((stage, torch.get_default_dtype(), self.net is None))
        if self.net is None:
            self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))


def test_configure_model_builds_the_layers_at_every_stage_under_one_device() -> None:
    torch.manual_seed(0)
    model = LateClassifier()
    trainer = trainkit.Trainer(max_steps=4, limit_val_batches=2, **QUIET)
    trainer.fit(model, datamodule=BlobData())  # the optimizer sees the late layers
    trainer.validate(model, datamodule=BlobData(), verbose=False)
    assert trainer.global_step == 4 and model.net is not None
    assert model.configured == [("fit", torch.float32, True), ("validate", torch.float32, False)]
    halved = LateClassifier()
    trainkit.Trainer(max_steps=1, precision="bf16-true", **QUIET).fit(halved, datamodule=BlobData())
    assert halved.configured[0][1] == torch.bfloat16  # the precision's dtype while it builds
    assert all(p.dtype == torch.bfloat16 for p in halved.parameters())
    assert torch.get_default_dtype() == torch.float32


class LegacyClassifier(Classifier):
    """Builds its network in configure_sharded_model, Lightning's older name of the hook."""

    def __init__(self) -> None:
        super().__init__()
        del self.net
        self.net: nn.Module | None = None

    def configure_sharded_model(self) -> None:
        if self.net is None:
            self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))


def test_configure_sharded_model_is_called_as_configure_model_with_a_warning(
    tmp_path: Path,
) -> None:
    trainer = trainkit.Trainer(
        max_steps=2, default_root_dir=tmp_path, **{**QUIET, "enable_checkpointing": True}
    )
    with pytest.warns(UserWarning, match="configure_sharded_model is the older name"):
        trainer.fit(LegacyClassifier(), datamodule=BlobData())
    assert trainer.global_step == 2
    loaded = LegacyClassifier.load_from_checkpoint(trainer.checkpoint_callback.last_model_path)
    assert loaded.net is not None  # built before the weights were loaded into it

    class Both(LegacyClassifier):
        def configure_model(self) -> None:
            pass

    with pytest.raises(RuntimeError, match="overrides both configure_model and configure_"):
        trainkit.Trainer(max_steps=1, **QUIET).fit(Both(), datamodule=BlobData())


def test_print_prints_on_the_first_process_of_each_machine(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer = trainkit.Trainer(**QUIET)
    trainer.print("from local rank 0", end="!\n")
    assert capsys.readouterr().out == "from local rank 0!\n"
    monkeypatch.setattr(type(trainer.strategy), "local_rank", property(lambda self: 1))
    trainer.print("from local rank 1")
    assert capsys.readouterr().out == ""


def test_evaluating_is_true_in_validation_the_sanity_check_and_test() -> None:
    seen: dict[str, bool] = {}

    class Probe(trainkit.Callback):
        def on_sanity_check_start(self, trainer: Any, module: Any) -> None:
            seen["sanity_check"] = trainer.evaluating

        def on_train_batch_start(self, trainer: Any, module: Any, *args: Any) -> None:
            seen["train"] = trainer.evaluating

        def on_validation_batch_start(self, trainer: Any, module: Any, *args: Any) -> None:
            if not trainer.sanity_checking:
                seen["validate"] = trainer.evaluating

        def on_test_batch_start(self, trainer: Any, module: Any, *args: Any) -> None:
            seen["test"] = trainer.evaluating

        def on_predict_batch_start(self, trainer: Any, module: Any, *args: Any) -> None:
            seen["predict"] = trainer.evaluating

    trainer = trainkit.Trainer(max_steps=2, **{**QUIET, "callbacks": [Probe()]})
    data, model = BlobData(), Classifier()
    trainer.fit(model, datamodule=data)
    trainer.validate(model, datamodule=data)
    trainer.test(model, datamodule=data)
    trainer.predict(model, datamodule=data)
    assert seen == {
        "sanity_check": True,
        "train": False,
        "validate": True,
        "test": True,
        "predict": False,
    }


def test_received_sigterm_during_a_fit(tmp_path: Any) -> None:
    seen: list[bool] = []

    class Terminated(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            seen.append(self.trainer.received_sigterm)
            if batch_idx == 1:
                os.kill(os.getpid(), signal.SIGTERM)  # the handler notes it; the step goes on
            loss = super().training_step(batch, batch_idx)
            seen.append(self.trainer.received_sigterm)
            return loss

    trainer = trainkit.Trainer(max_epochs=1, default_root_dir=tmp_path, **QUIET)
    with pytest.raises(SystemExit):  # saved at the next resume point, then exits
        trainer.fit(Terminated(), datamodule=BlobData())
    assert seen == [False, False, False, True]


def test_scaler_and_sampler_views() -> None:
    trainer = trainkit.Trainer(**QUIET)
    assert trainer.scaler is None and trainer.distributed_sampler_kwargs is None
    strategy = DDPStrategy(rank=1, world_size=4)
    assert strategy.distributed_sampler_kwargs == {"num_replicas": 4, "rank": 1}


class SLURMEnvironment:
    """Stands in for Lightning's plugin of that name (only its class name matters)."""


class MixedPrecision:
    pass


def test_plugins_are_refused_naming_the_option_that_does_their_job() -> None:
    for empty in (None, []):
        trainkit.Trainer(plugins=empty, **QUIET)
    with pytest.raises(ValueError, match=r"SLURMEnvironment \(trainkit reads the job's ranks"):
        trainkit.Trainer(plugins=[SLURMEnvironment()], **QUIET)
    with pytest.raises(ValueError, match=r"MixedPrecision \(pass Trainer\(precision=\.\.\.\)"):
        trainkit.Trainer(plugins=MixedPrecision(), **QUIET)
    with pytest.raises(ValueError, match=r"object \(no trainkit counterpart\)\. Drop those"):
        trainkit.Trainer(plugins=[object()], **QUIET)

"""The loops' ``_data_source``: where each stage's dataloaders come from, as Lightning says.

Ported projects read it to know whether fit validates (gluonts chooses its LR
scheduler's monitor with ``fit_loop.epoch_loop.val_loop._data_source.is_defined()``
in ``configure_optimizers``). Side by side with Lightning when it is installed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from trainkit.trainer.data_source import AttachedData


def _loader() -> DataLoader[Any]:
    return DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=4)


def _sources(trainer: Any) -> str:
    """Each loop's source: is_defined, is_module and what it is."""
    loops = {
        "fit": trainer.fit_loop,
        "fit-val": trainer.fit_loop.epoch_loop.val_loop,
        "validate": trainer.validate_loop,
        "test": trainer.test_loop,
        "predict": trainer.predict_loop,
    }
    seen = []
    for name, loop in loops.items():
        source = loop._data_source
        instance = source.instance
        kind = "loader" if isinstance(instance, DataLoader) else type(instance).__name__
        seen.append(f"{name}:{'+' if source.is_defined() else '-'}{kind}")
    return " ".join(seen)


def run(prefix: str) -> dict[str, str]:
    """Each case's sources, read in configure_optimizers (fit) or after the call."""
    L: Any = importlib.import_module(prefix)
    read: list[str] = []

    class Net(L.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            pass

        def test_step(self, batch: Any, batch_idx: int) -> None:
            pass

        def predict_step(self, batch: Any, batch_idx: int) -> int:
            return 0

        def configure_optimizers(self) -> Any:
            read.append(_sources(self.trainer))
            return torch.optim.SGD(self.parameters(), lr=0.1)

    class NetWithData(Net):
        def train_dataloader(self) -> Any:
            return _loader()

        def val_dataloader(self) -> Any:
            return _loader()

    class Data(L.LightningDataModule):  # type: ignore[misc,name-defined]
        def train_dataloader(self) -> Any:
            return _loader()

    class DataWithVal(Data):
        def val_dataloader(self) -> Any:
            return _loader()

        def test_dataloader(self) -> Any:
            return _loader()

    cases: dict[str, Callable[[Any], Any]] = {
        "train loader": lambda t: t.fit(Net(), _loader()),
        "train and val loaders": lambda t: t.fit(Net(), _loader(), _loader()),
        "the module's methods": lambda t: t.fit(NetWithData()),
        "a datamodule without val": lambda t: t.fit(Net(), datamodule=Data()),
        "a datamodule with val": lambda t: t.fit(Net(), datamodule=DataWithVal()),
        "validate a loader": lambda t: t.validate(Net(), _loader(), verbose=False),
        "test a datamodule": lambda t: t.test(Net(), datamodule=DataWithVal(), verbose=False),
        "predict a loader": lambda t: t.predict(Net(), _loader()),
    }
    seen = {}
    for name, call in cases.items():
        read.clear()
        trainer = L.Trainer(
            max_epochs=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            limit_val_batches=0 if name == "train and val loaders" else 1.0,  # no effect
        )
        call(trainer)
        after = _sources(trainer)
        if read:  # fit: the same in configure_optimizers as after the run
            assert read == [after], name
        seen[name] = after
    return seen


#: What Lightning 2.6.6 answers in the same cases.
EXPECTED = {
    "train loader": "fit:+loader fit-val:-Net validate:-Net test:-Net predict:-Net",
    "train and val loaders": "fit:+loader fit-val:+loader validate:+loader test:-Net predict:-Net",
    "the module's methods": (
        "fit:+NetWithData fit-val:+NetWithData validate:+NetWithData test:-NetWithData "
        "predict:-NetWithData"
    ),
    "a datamodule without val": "fit:+Data fit-val:-Data validate:-Data test:-Data predict:-Data",
    "a datamodule with val": (
        "fit:+DataWithVal fit-val:+DataWithVal validate:+DataWithVal test:+DataWithVal "
        "predict:-DataWithVal"
    ),
    "validate a loader": "fit:-Net fit-val:+loader validate:+loader test:-Net predict:-Net",
    "test a datamodule": (
        "fit:+DataWithVal fit-val:+DataWithVal validate:+DataWithVal test:+DataWithVal "
        "predict:-DataWithVal"
    ),
    "predict a loader": "fit:-Net fit-val:-Net validate:-Net test:-Net predict:+loader",
}


def test_each_loops_data_source_is_lightnings() -> None:
    ported = run("trainkit.lightning")
    assert ported == EXPECTED
    if importlib.util.find_spec("lightning") is not None:
        assert run("lightning.pytorch") == ported


def test_a_datamodule_without_the_method_leaves_it_to_the_module() -> None:
    # trainkit then calls the Module's val_dataloader, so the source says so.
    class Net(trainkit.Module):
        def val_dataloader(self) -> Any:
            return _loader()

    class Data(trainkit.DataModule):
        pass

    trainer = trainkit.Trainer(logger=False)
    source = trainer.validate_loop._data_source
    assert source.instance is None and not source.is_defined()  # nothing attached yet
    trainer._attached = AttachedData(Net(), Data(), {})
    assert isinstance(source.instance, Net) and source.is_defined() and source.is_module()
    assert source.name == "val_dataloader"


def test_fit_validation_loop_says_it_runs_under_no_grad_and_refuses_another_mode() -> None:
    val_loop = trainkit.Trainer(logger=False).fit_loop.epoch_loop.val_loop
    assert val_loop.inference_mode is False
    with pytest.raises(AttributeError, match=r"validate_loop\.inference_mode"):
        val_loop.inference_mode = True
    refused = r"^trainer\.fit_loop\.epoch_loop\.val_loop has no 'run'"
    with pytest.raises(AttributeError, match=refused):
        val_loop.run()
    with pytest.raises(
        AttributeError, match=r"val_loop\.verbose cannot be set: .* no setting from this view\. "
    ):
        val_loop.verbose = False

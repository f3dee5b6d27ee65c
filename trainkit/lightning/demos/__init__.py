"""Lightning's ``lightning.pytorch.demos`` names: the boring classes and the language models."""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing
from trainkit.lightning.demos.boring_classes import BoringDataModule, BoringModel, DemoModel
from trainkit.lightning.demos.lstm import LightningLSTM, SequenceSampler, SimpleLSTM
from trainkit.lightning.demos.transformer import LightningTransformer, Transformer, WikiText2

__all__ = [
    "BoringDataModule",
    "BoringModel",
    "DemoModel",
    "LightningLSTM",
    "LightningTransformer",
    "SequenceSampler",
    "SimpleLSTM",
    "Transformer",
    "WikiText2",
]


def __getattr__(name: str) -> Any:
    return submodule_or_missing(__name__, name, __all__)

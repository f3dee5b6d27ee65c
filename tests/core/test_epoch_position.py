"""core/epoch_position: a fit resumed inside an epoch of an iterable.

Loaders that keep their own position go on from the saved one; others are read again
up to it. Either way the epoch continues exactly as the uninterrupted one.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset

import trainkit
from tests.helpers import QUIET
from trainkit.callbacks import ModelCheckpoint
from trainkit.checkpoint.files import load

BATCHES = 6


def _batch(i: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(i)
    return torch.randn(4, 8, generator=generator), torch.randint(0, 3, (4,), generator=generator)


class Stream(IterableDataset):  # type: ignore[type-arg]
    """The same six batches in every run, and no index to skip to."""

    def __iter__(self) -> Any:
        return (_batch(i) for i in range(BATCHES))


class Positioned:
    """An iterable that keeps its own position (state_dict/load_state_dict)."""

    def __init__(self) -> None:
        self.index = 0

    def __iter__(self) -> Any:
        if self.index >= BATCHES:
            self.index = 0  # the last epoch ended: a new one starts over
        while self.index < BATCHES:
            self.index += 1
            yield _batch(self.index - 1)

    def state_dict(self) -> dict[str, int]:
        return {"index": self.index}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.index = state["index"]


class Sized(Positioned):
    def __len__(self) -> int:
        return BATCHES


class Records(trainkit.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Linear(8, 3)
        self.seen: list[float] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        self.seen.append(round(float(x[0, 0]), 4))
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.parametrize(
    "make",
    [lambda: DataLoader(Stream(), batch_size=None), Positioned, Sized],
    ids=["iterable dataset", "stateful, no length", "stateful, with a length"],
)
def test_a_fit_resumed_inside_an_epoch_of_an_iterable_trains_as_the_uninterrupted_one(
    tmp_path: Path, make: Any
) -> None:
    whole = Records()
    trainkit.Trainer(max_epochs=2, **QUIET).fit(whole, make())
    every = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=1, save_top_k=-1)
    trainkit.Trainer(
        max_epochs=1, callbacks=[every], **{**QUIET, "enable_checkpointing": True}
    ).fit(Records(), make())
    (saved,) = tmp_path.glob("epoch=0-step=2.ckpt")
    data = make()
    stateful = hasattr(data, "state_dict")
    fit_loop = load(saved)["loops"]["fit_loop"]["state_dict"]
    assert fit_loop.get("combined_loader") == ([{"index": 2}] if stateful else None)
    resumed = Records()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainkit.Trainer(max_epochs=2, **QUIET).fit(resumed, data, ckpt_path=saved)
    read_again = [w for w in caught if "your dataloader is not resumable" in str(w.message)]
    assert len(read_again) == (0 if stateful else 1)
    assert resumed.seen == whole.seen[2:]  # the rest of epoch 0, then epoch 1
    for mine, theirs in zip(resumed.parameters(), whole.parameters(), strict=True):
        assert torch.equal(mine, theirs)


def test_the_saved_positions_must_match_the_stateful_loaders(tmp_path: Path) -> None:
    every = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=1, save_top_k=-1)
    trainkit.Trainer(
        max_epochs=1, callbacks=[every], **{**QUIET, "enable_checkpointing": True}
    ).fit(Records(), Sized())
    both = {"a": Sized(), "b": Sized()}
    with pytest.raises(
        ValueError, match="positions of 1 stateful training loaders, but this fit has 2"
    ):
        trainkit.Trainer(max_epochs=1, **QUIET).fit(
            Records(), both, ckpt_path=tmp_path / "epoch=0-step=2.ckpt"
        )

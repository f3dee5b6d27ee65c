"""SpikeDetection: a loss far above its recent mean stops training and names the batches."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from tests.distributed.spawn import run_processes
from tests.helpers import QUIET
from trainkit.callbacks import SpikeDetection
from trainkit.callbacks.spike import TrainingSpikeException


class Scripted(trainkit.Module):
    """Returns the losses of a script, one per batch (the weights never matter)."""

    def __init__(self, losses: list[float | None]) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(()))
        self.losses = losses

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor | None:
        loss = self.losses[batch_idx]
        return None if loss is None else self.weight * 0 + loss  # None: skip the batch

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.0)


def _fit(losses: list[float | None], root: Path, **options: Any) -> trainkit.Trainer:
    trainer = trainkit.Trainer(
        max_epochs=1, default_root_dir=str(root), callbacks=[SpikeDetection(**options)], **QUIET
    )
    data = DataLoader(TensorDataset(torch.zeros(len(losses))), batch_size=1)
    trainer.fit(Scripted(losses), data)
    return trainer


# The same decisions as Lightning's SpikeDetection on the same scripts (checked side
# by side): a jump at batch 6; a rise that outgrows its mean at 4 (at 6 with a window
# of 2); the max mode's drop past atol.
@pytest.mark.parametrize(
    ("losses", "options", "batch"),
    [
        ([5, 4, 3.5, 3, 2.9, 2.8, 30, 2.7], {}, 6),
        ([1, 2, 3, 4, 9, 10, 30, 31], {}, 4),
        ([1, 2, 3, 4, 9, 10, 30, 31], {"window": 2}, 6),
        ([5, 6, 7, 8, 0.1, 9, 10, 11], {"mode": "max", "rtol": None, "atol": 3.0}, 4),
    ],
)
def test_a_spike_stops_training_and_writes_the_batches_to_skip(
    tmp_path: Path, losses: list[float], options: dict[str, Any], batch: int
) -> None:
    with pytest.raises(TrainingSpikeException, match=f"detected in batch {batch}$"):
        _fit(losses, tmp_path, **options)
    assert json.loads((tmp_path / "skip_batches.json").read_text()) == [batch - 1, batch]


@pytest.mark.parametrize(
    ("losses", "options"),
    [
        ([5, 4, 4.5, 4.2, 4.6, 4.4, 4.8, 5.0], {}),  # noise, not spikes
        ([5, 6, 7, 8, 0.1, 9, 10, 11], {"mode": "max"}),  # rtol 2: a fall of 7 is not 2x
        ([1, 2, 30, 4, 5, 6, 7, 8], {"warmup": 3}),  # the jump comes before the warm-up ends
    ],
)
def test_no_spike_no_stop(tmp_path: Path, losses: list[float], options: dict[str, Any]) -> None:
    assert _fit(losses, tmp_path, **options).global_step == len(losses)
    assert not (tmp_path / "skip_batches.json").exists()


@pytest.mark.filterwarnings("ignore:`training_step` returned `None`")
def test_a_skipped_batch_is_no_loss(tmp_path: Path) -> None:
    # training_step returned None at batch 3: the hooks receive {}, which is not a loss.
    with pytest.raises(TrainingSpikeException, match=r"detected in batch 6$"):
        _fit([5, 4, 3.5, None, 3, 2.9, 30, 2.7], tmp_path)
    assert json.loads((tmp_path / "skip_batches.json").read_text()) == [5, 6]


def test_the_file_goes_where_asked_and_the_state_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "runs" / "bad.json"
    with pytest.raises(TrainingSpikeException):
        _fit([5, 4, 3, 40], tmp_path / "root", exclude_batches_path=target)
    assert json.loads(target.read_text()) == [2, 3]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TrainingSpikeException):
        _fit([5, 4, 3, 40], tmp_path / "root", exclude_batches_path="here.json")  # relative
    assert json.loads((tmp_path / "here.json").read_text()) == [2, 3]
    detector = SpikeDetection(window=3)
    detector.load_state_dict({"last_val": 2.0, "recent": [1.0, 2.0, 3.0, 4.0], "bad_batches": [7]})
    assert list(detector._recent) == [2.0, 3.0, 4.0] and detector.bad_batches == [7]
    with pytest.raises(ValueError, match="mode='mean'"):
        SpikeDetection(mode="mean")  # type: ignore[arg-type]


def _spike_on_rank_one(root: str) -> dict[str, Any]:
    rank = int(os.environ["RANK"])  # set for each process before it starts
    losses = [5.0, 4.0, 3.0, 3.0, 3.0, 3.0]
    if rank == 1:
        losses[4] = 50.0
    trainer = trainkit.Trainer(
        max_epochs=1, strategy="ddp", default_root_dir=root, callbacks=[SpikeDetection()], **QUIET
    )
    data = DataLoader(TensorDataset(torch.zeros(12)), batch_size=1)
    try:
        trainer.fit(Scripted(losses), data)
    except TrainingSpikeException as error:
        return {"stopped_at": error.batch_idx}
    return {"stopped_at": None}


def test_a_spike_on_one_process_stops_every_process(tmp_path: Path) -> None:
    ranks = run_processes(_spike_on_rank_one, 2, str(tmp_path))
    assert ranks == [{"stopped_at": 4}, {"stopped_at": 4}]
    assert json.loads((tmp_path / "skip_batches.json").read_text()) == [3, 4]

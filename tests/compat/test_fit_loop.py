"""trainer.fit_loop and a Trainer's later fits, side by side with Lightning when it is installed."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset


def _progress(trainer: Any) -> tuple[Any, ...]:
    loop = trainer.fit_loop
    epochs, batches = loop.epoch_progress, loop.epoch_loop.batch_progress
    return (
        trainer.current_epoch,
        trainer.global_step,
        loop.total_batch_idx,
        loop.batch_idx,
        tuple(getattr(epochs.current, name) for name in ("ready", "processed", "completed")),
        (batches.current.ready, batches.current.completed),
        (batches.total.ready, batches.total.completed),
        loop.done,
    )


def run(prefix: str) -> dict[str, Any]:
    """Fit one Trainer four times under ``prefix``, changing its limits; what it saw."""
    L: Any = importlib.import_module(prefix)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(20, 4), torch.randn(20, 1))
    seen: list[tuple[str, tuple[Any, ...]]] = []

    class Net(L.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.05)

    class Probe(L.Callback):  # type: ignore[misc,name-defined]
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            seen.append(("batch", _progress(trainer)))
            if trainer.global_step == 17:  # in the third fit: stop at once, mid-epoch
                trainer.fit_loop.epoch_loop.max_steps = 18

        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            seen.append(("epoch end", _progress(trainer)))
            if trainer.current_epoch == 0:
                trainer.should_stop = True  # the first fit ends after one epoch

    trainer = L.Trainer(
        max_epochs=3,
        callbacks=[Probe()],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    model = Net()
    fits = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # each framework's own notes
        for change in (None, None, ("max_epochs", 6), ("max_epochs", 6)):
            if change is not None:
                setattr(trainer.fit_loop, *change)
            trainer.fit(model, DataLoader(data, batch_size=4))
            fits.append(_progress(trainer))
    return {"seen": seen, "fits": fits, "weight": model.layer.weight.detach().clone()}


def test_a_trainers_fits_and_its_fit_loop_counts_are_lightnings() -> None:
    ported = run("trainkit.lightning")
    # Fit 1 stops after epoch 0 (should_stop); fit 2 continues to max_epochs=3; fit 3,
    # raised to 6, stops at step 18 (max_steps set mid-epoch); fit 4 trains nothing.
    assert [fit[:2] for fit in ported["fits"]] == [(1, 5), (3, 15), (4, 18), (4, 18)]
    assert ported["fits"][-1] == (4, 18, 17, 2, (4, 4, 4), (3, 3), (18, 18), True)
    if importlib.util.find_spec("lightning") is not None:
        original = run("lightning.pytorch")
        assert original["fits"] == ported["fits"]
        assert original["seen"] == ported["seen"]
        torch.testing.assert_close(original["weight"], ported["weight"])

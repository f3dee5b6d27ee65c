"""A small Lightning-style project using Lightning's helper names; the prefix picks the framework.

``run("lightning.pytorch")`` and ``run("trainkit.lightning")`` train the same model on
the same data: a dict of training loaders, a sequential CombinedLoader for
validation, type annotations from ``utilities.types``, an Accelerator object, a
SLURM environment plugin, SpikeDetection, ``is_overridden`` and ``ModelSummary``.
"""

from __future__ import annotations

import importlib
import tempfile
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset


def _data(n: int, seed: int) -> TensorDataset:
    return TensorDataset(torch.randn(n, 4, generator=torch.Generator().manual_seed(seed)))


def run(prefix: str) -> dict[str, Any]:
    """Train under ``prefix`` (``lightning.pytorch`` or ``trainkit.lightning``); what it saw."""
    L: Any = importlib.import_module(prefix)
    helpers = importlib.import_module(prefix + ".utilities.model_helpers")
    summary = importlib.import_module(prefix + ".utilities.model_summary")
    environments = importlib.import_module(prefix + ".plugins.environments")
    accelerators = importlib.import_module(prefix + ".accelerators")
    callbacks = importlib.import_module(prefix + ".callbacks")
    combined = importlib.import_module(prefix + ".utilities.combined_loader")
    types = importlib.import_module(prefix + ".utilities.types")

    class Net(L.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self, lr: float = 0.05) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: Any, batch_idx: int) -> types.STEP_OUTPUT:  # type: ignore[name-defined]
            x = torch.cat([batch["labelled"][0], batch["extra"][0]])
            loss = (self.layer(x) ** 2).mean()
            self.log("loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
            self.log("val", (self.layer(batch[0]) ** 2).mean())

        def configure_optimizers(self) -> types.OptimizerLRScheduler:  # type: ignore[name-defined]
            return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

    train = {
        "labelled": DataLoader(_data(8, 1), batch_size=2),
        "extra": DataLoader(_data(12, 2), batch_size=2),
    }
    val = combined.CombinedLoader(
        [DataLoader(_data(4, 3), batch_size=2), DataLoader(_data(2, 4), batch_size=2)],
        "sequential",
    )
    torch.manual_seed(0)
    model = Net()
    trainer = L.Trainer(
        max_epochs=2,
        accelerator=accelerators.CPUAccelerator(),
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        default_root_dir=tempfile.mkdtemp(),
        plugins=[environments.SLURMEnvironment(auto_requeue=False)],
        callbacks=[callbacks.SpikeDetection()],
    )
    trainer.fit(model, train, val)
    return {
        "steps": trainer.global_step,
        "overridden": helpers.is_overridden("training_step", model),
        "layers": summary.ModelSummary(model).layer_names,
        "accelerator": type(trainer.accelerator).__name__,
        "metrics": sorted(trainer.callback_metrics),
        "weight": model.layer.weight.detach().clone(),
    }

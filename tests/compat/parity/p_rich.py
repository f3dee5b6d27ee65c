"""A RichProgressBar subclass with a theme reading its task in a hook; RichModelSummary."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.compat.parity._probe import Record, framework

L, _ = framework()
record = Record()
RichProgressBarTheme = L.callbacks.progress.rich_progress.RichProgressBarTheme


class Bar(L.callbacks.RichProgressBar):  # type: ignore[misc]
    def __init__(self) -> None:
        theme = RichProgressBarTheme(description="green_yellow", progress_bar="green1")
        super().__init__(theme=theme, leave=True)
        self.tasks: list[Any] = []

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        super().on_train_epoch_end(trainer, module)
        task = self.train_progress_bar
        self.tasks.append((task.total, task.completed))

    def get_metrics(self, trainer: Any, module: Any) -> dict[str, Any]:
        items = super().get_metrics(trainer, module)
        items.pop("v_num", None)
        return items  # type: ignore[no-any-return]


class Model(L.LightningModule):  # type: ignore[name-defined,misc]
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0]).sum()  # type: ignore[no-any-return]

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


bar = Bar()
summary = L.callbacks.RichModelSummary(max_depth=2)
trainer = L.Trainer(
    max_epochs=2, callbacks=[bar, summary], logger=False, enable_checkpointing=False
)
trainer.fit(Model(), DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4))
record["tasks"] = bar.tasks
record["callbacks"] = sorted(type(c).__name__ for c in trainer.callbacks)
record["progress_bar_callback"] = type(trainer.progress_bar_callback).__name__
record.emit()

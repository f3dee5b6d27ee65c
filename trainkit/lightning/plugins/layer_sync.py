"""Lightning's layer synchronisation plugins: ``TorchSyncBatchNorm()`` is
``Trainer(sync_batchnorm=True)``; ``apply``/``revert`` work on their own too."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from trainkit.lightning.plugins._base import Plugin

__all__ = ["LayerSync", "TorchSyncBatchNorm"]


class LayerSync(Plugin):
    """Lightning's base of the layer synchronisation plugins."""

    def apply(self, model: nn.Module) -> nn.Module:
        """The model with its layers replaced by synchronised ones."""
        raise NotImplementedError

    def revert(self, model: nn.Module) -> nn.Module:
        """The model with the synchronised layers put back."""
        raise NotImplementedError


class TorchSyncBatchNorm(LayerSync):
    """Batch norm statistics over all processes: ``Trainer(sync_batchnorm=True)``."""

    def trainkit_plugin_settings(self) -> dict[str, Any]:
        return {"sync_batchnorm": True}

    def _option(self) -> str:
        return "Trainer(sync_batchnorm=True)"

    def apply(self, model: nn.Module) -> nn.Module:
        converted: nn.Module = nn.SyncBatchNorm.convert_sync_batchnorm(model)  # type: ignore[no-untyped-call]
        return converted

    def revert(self, model: nn.Module) -> nn.Module:
        if isinstance(model, nn.SyncBatchNorm):
            reverted: nn.Module = _BatchNormXd(
                model.num_features, model.eps, model.momentum, model.affine,
                model.track_running_stats,
            )  # fmt: skip
            held = [*model.parameters(), *model.buffers()]
            if model.affine:  # the weights' device and dtype (the statistics stay float32)
                reverted.to(device=model.weight.device, dtype=model.weight.dtype)
            elif held:
                reverted.to(device=held[0].device)
            reverted.load_state_dict(model.state_dict())
            reverted.train(model.training)
            model = reverted
        for name, child in model.named_children():
            model.add_module(name, self.revert(child))
        return model


class _BatchNormXd(nn.modules.batchnorm._BatchNorm):
    """A batch norm of any input rank (what a reverted SyncBatchNorm becomes)."""

    def _check_input_dim(self, input: torch.Tensor) -> None:
        return

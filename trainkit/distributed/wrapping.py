"""Running the user's step methods through a wrapper (DDP, DataParallel), unwrapping it, and
SyncBatchNorm.

Wrappers such as ``DistributedDataParallel`` do their work (preparing gradient
synchronisation, scattering a batch) in ``forward``. :class:`StepModule` lets a
step method be that forward: ``wrapper("training_step", batch, batch_idx)``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class StepModule(nn.Module):
    """Lets a wrapper's forward run a step method: ``wrapper("training_step", batch, idx)``.

    DDP prepares gradient synchronisation in its ``forward``; routing the step
    through it is what makes the backward of ``training_step``'s loss all-reduce.

    Args:
        module: the user's module.
    """

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, method: str, *args: Any) -> Any:
        return getattr(self.module, method)(*args)

    def __getattr__(self, name: str) -> Any:
        # Lightning code reaches the Module through its wrapper (``trainer.model.module.x``,
        # where Lightning's DDP wraps the Module itself): its attributes answer here too.
        try:
            return super().__getattr__(name)
        except AttributeError:
            try:
                inner = object.__getattribute__(self, "_modules")["module"]
            except (AttributeError, KeyError):  # not built yet (unpickling)
                raise AttributeError(name) from None
            return getattr(inner, name)


def unwrap(module: nn.Module) -> nn.Module:
    """The user's module inside a DDP or DataParallel wrapper (the module itself otherwise).

    Args:
        module: a module a strategy set up.
    """
    if isinstance(module, (DistributedDataParallel, nn.DataParallel)):
        module = module.module
    return module.module if isinstance(module, StepModule) else module


def convert_sync_batchnorm(model: nn.Module, device: torch.device) -> None:
    """Replace each BatchNorm of ``model`` by SyncBatchNorm (``Trainer(sync_batchnorm=True)``).

    Args:
        model: the user's module, changed in place.
        device: where the run computes (torch runs SyncBatchNorm on accelerators only).
    """
    if not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        return
    if device.type == "cpu":
        raise ValueError(
            "sync_batchnorm=True: torch's SyncBatchNorm runs on CUDA devices only, and this "
            "run is on CPU. Drop sync_batchnorm, or run on GPUs."
        )
    for name, child in list(model.named_children()):
        setattr(model, name, torch.nn.SyncBatchNorm.convert_sync_batchnorm(child))  # type: ignore[no-untyped-call]

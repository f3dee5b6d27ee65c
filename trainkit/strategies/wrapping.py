"""Running the user's step methods through a wrapper (DDP, DataParallel), and unwrapping it.

Wrappers such as ``DistributedDataParallel`` do their work (preparing gradient
synchronisation, scattering a batch) in ``forward``. :class:`StepModule` lets a
step method be that forward: ``wrapper("training_step", batch, batch_idx)``.
"""

from __future__ import annotations

from typing import Any

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


def unwrap(module: nn.Module) -> nn.Module:
    """The user's module inside a DDP or DataParallel wrapper (the module itself otherwise).

    Args:
        module: a module a strategy set up.
    """
    if isinstance(module, (DistributedDataParallel, nn.DataParallel)):
        module = module.module
    return module.module if isinstance(module, StepModule) else module

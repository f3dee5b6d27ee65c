"""Lightning's ``lightning.pytorch.core.optimizer.LightningOptimizer``: trainkit's ManagedOptimizer.

``self.optimizers()`` returns these in manual optimization; like Lightning's, each
is also an instance of the optimizer class it wraps (``isinstance(opt,
torch.optim.SGD)``), and ``opt.optimizer`` is the wrapped torch optimizer.
"""

from __future__ import annotations

from typing import Any

from trainkit.core.optim import ManagedOptimizer as LightningOptimizer
from trainkit.core.optim import NoOptimizer as _MockOptimizer
from trainkit.core.optim import do_nothing as do_nothing_closure
from trainkit.lightning._missing import missing

__all__ = ["LightningOptimizer", "do_nothing_closure"]
# Private in Lightning, but projects test for it: the optimizer of a fit whose
# configure_optimizers returned None (self.optimizers() is an instance of it).
__all__ += ["_MockOptimizer"]


def __getattr__(name: str) -> Any:
    raise missing(__name__, name, __all__)

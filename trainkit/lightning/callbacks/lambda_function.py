"""Lightning's ``lightning.pytorch.callbacks.lambda_function`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import LambdaCallback

__all__ = ["LambdaCallback"]

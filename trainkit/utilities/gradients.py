"""Gradient norms to log, e.g. from ``on_before_optimizer_step``."""

from __future__ import annotations

import math

import torch
from torch import nn


def grad_norm(
    module: nn.Module, norm_type: float | int | str, group_separator: str = "/"
) -> dict[str, torch.Tensor]:
    """The p-norm of each parameter's gradient, and of all of them together.

    Parameters without a gradient are left out. The total is the norm of every
    gradient seen as one vector. The names are Lightning's, so a dashboard built
    on them keeps working: ``grad_{p}_norm{sep}{parameter}`` and
    ``grad_{p}_norm_total``, with ``p`` as a float (``2.0``) or ``inf``.

    Args:
        module: the module whose parameters' gradients are measured.
        norm_type: p, a positive number, or ``"inf"`` for the largest absolute value.
        group_separator: what joins the norm's name and the parameter's ("/"
            groups them in one section of TensorBoard).

    Returns:
        Name to norm (0-dimensional tensors on the gradients' device); empty when
        no parameter has a gradient.

    Raises:
        ValueError: ``norm_type`` is not a positive number or "inf".

    Example:
        >>> layer = nn.Linear(2, 1, bias=False)
        >>> layer.weight.grad = torch.tensor([[3.0, 4.0]])
        >>> grad_norm(layer, 2)
        {'grad_2.0_norm/weight': tensor(5.), 'grad_2.0_norm_total': tensor(5.)}
    """
    try:
        p = float(norm_type)
    except (TypeError, ValueError):
        p = math.nan
    if not p > 0:  # also NaN: a string that is not a number
        raise ValueError(  # Lightning's words first
            "`norm_type` must be a positive number or 'inf' (infinity norm). Got "
            f"{norm_type!r}: pass e.g. grad_norm(module, 2)."
        )
    prefix = f"grad_{p}_norm"
    norms = {
        f"{prefix}{group_separator}{name}": torch.linalg.vector_norm(parameter.grad.detach(), ord=p)
        for name, parameter in module.named_parameters()
        if parameter.grad is not None
    }
    if norms:
        # A p-norm of the parameters' p-norms is the p-norm of all values together.
        device = next(iter(norms.values())).device  # the parameters may span devices
        together = torch.stack([norm.float().to(device) for norm in norms.values()])
        norms[f"{prefix}_total"] = torch.linalg.vector_norm(together, ord=p)
    return norms

"""Meta-device layers get memory and initial values (trainkit/distributed/sharding.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainkit.distributed.sharding import materialize, meta_modules


def test_torchs_transformer_layers_are_initialized_after_a_meta_build() -> None:
    # nn.MultiheadAttention names its initializer _reset_parameters(): every
    # nn.Transformer (Lightning's demo Transformer too) holds some.
    with torch.device("meta"):
        model = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    modules = meta_modules(model)
    assert model.self_attn in modules
    materialize(modules, torch.device("cpu"))
    parameters = dict(model.named_parameters())
    assert not any(p.is_meta for p in parameters.values())
    assert all(torch.isfinite(p).all() for p in parameters.values())
    assert torch.equal(parameters["self_attn.in_proj_bias"], torch.zeros(24))
    assert parameters["self_attn.in_proj_weight"].abs().sum() > 0
    assert torch.equal(parameters["norm1.weight"], torch.ones(8))


def test_a_layer_without_an_initializer_is_named() -> None:
    class Scale(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(3))

        def _reset_parameters(self) -> None:  # a user's private method is not guessed at
            nn.init.ones_(self.weight)

    with torch.device("meta"):
        layer = Scale()
    with pytest.raises(ValueError, match="Scale was built on the meta device"):
        materialize(meta_modules(layer), torch.device("cpu"))

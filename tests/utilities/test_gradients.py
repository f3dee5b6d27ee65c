"""grad_norm: the gradient norms a Module logs, under Lightning's names."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import trainkit
from tests.helpers import QUIET, BlobData, Classifier, MemoryLogger
from trainkit.utilities.gradients import grad_norm


def _net_with_gradients() -> nn.Sequential:
    net = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    net[0].weight.grad = torch.tensor([[3.0, 0.0, -4.0], [0.0, 0.0, 0.0]])
    net[0].bias.grad = torch.tensor([1.0, -2.0])
    net[1].weight.grad = torch.tensor([[2.0, 2.0]])
    # net[1].bias has no gradient: left out.
    return net


def test_each_parameter_and_the_total_under_lightnings_names() -> None:
    norms = grad_norm(_net_with_gradients(), 2)
    assert list(norms) == [
        "grad_2.0_norm/0.weight",
        "grad_2.0_norm/0.bias",
        "grad_2.0_norm/1.weight",
        "grad_2.0_norm_total",
    ]
    assert norms["grad_2.0_norm/0.weight"].item() == pytest.approx(5.0)
    assert norms["grad_2.0_norm/0.bias"].item() == pytest.approx(5**0.5)
    # The norm of all gradient values as one vector: 9 + 16 + 1 + 4 + 4 + 4.
    assert norms["grad_2.0_norm_total"].item() == pytest.approx(38**0.5)


def test_the_infinity_and_one_norms_and_another_separator() -> None:
    assert grad_norm(_net_with_gradients(), "inf")["grad_inf_norm_total"].item() == 4.0
    ones = grad_norm(_net_with_gradients(), 1, group_separator=".")
    assert ones["grad_1.0_norm.0.weight"].item() == 7.0
    assert ones["grad_1.0_norm_total"].item() == 14.0


def test_no_gradient_gives_nothing_and_a_bad_norm_type_says_what_to_pass() -> None:
    assert grad_norm(nn.Linear(2, 2), 2) == {}
    for bad in (0, -1, "two", float("nan")):
        with pytest.raises(
            ValueError, match=r"^`norm_type` must be a positive number or 'inf' \(infinity norm\)"
        ):
            grad_norm(_net_with_gradients(), bad)


def test_logged_from_on_before_optimizer_step() -> None:
    class Tracked(Classifier):
        def on_before_optimizer_step(self, optimizer: Any) -> None:
            self.log_dict(grad_norm(self, norm_type=2))

    logger = MemoryLogger()
    trainer = trainkit.Trainer(max_steps=3, log_every_n_steps=1, **{**QUIET, "logger": logger})
    trainer.fit(Tracked(), datamodule=BlobData())
    totals = logger.values("grad_2.0_norm_total")
    assert len(totals) == 3 and all(total > 0 for total in totals)

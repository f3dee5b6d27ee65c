"""ModelPruning: sparsity after each epoch, lottery ticket, permanence, checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn.utils import prune

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks.pruning import ModelPruning

DATA = blobs(64, seed=3)


def _fit(pruning: ModelPruning, epochs: int = 2, **kwargs: Any) -> Classifier:
    torch.manual_seed(0)
    model = Classifier()
    trainer = trainkit.Trainer(max_epochs=epochs, callbacks=[pruning], **{**QUIET, **kwargs})
    trainer.fit(model, loader(DATA, 16))
    return model


def _weights(model: Classifier) -> list[torch.Tensor]:
    return [model.net[0].weight, model.net[2].weight]


def _sparsity(tensors: list[torch.Tensor]) -> float:
    zeros = sum(int((t == 0).sum()) for t in tensors)
    return zeros / sum(t.numel() for t in tensors)


def test_global_l1_pruning_compounds_each_epoch_and_is_made_permanent() -> None:
    model = _fit(ModelPruning("l1_unstructured", parameter_names=["weight"], amount=0.5))
    # Two epochs of 50% of what remains: 75% of the weights are zero.
    assert _sparsity(_weights(model)) == pytest.approx(0.75, abs=1 / 352)
    # Permanent: plain parameters again, no masks or hooks.
    names = dict(model.named_parameters())
    assert "net.0.weight" in names and "net.0.weight_orig" not in names
    assert not any(
        isinstance(h, prune.BasePruningMethod) for h in model.net[0]._forward_pre_hooks.values()
    )


def test_amount_as_a_function_and_apply_pruning_as_a_function() -> None:
    amounts: list[int] = []

    def amount(epoch: int) -> float:
        amounts.append(epoch)
        return 0.2

    model = _fit(
        ModelPruning(
            "l1_unstructured",
            parameter_names=["weight"],
            amount=amount,
            apply_pruning=lambda epoch: epoch == 1,
        ),
        epochs=3,
    )
    assert amounts == [0, 1, 2]
    assert _sparsity(_weights(model)) == pytest.approx(0.2, abs=1 / 352)


def test_lottery_ticket_resets_the_surviving_weights_to_their_initial_values() -> None:
    torch.manual_seed(0)
    initial = [w.detach().clone() for w in _weights(Classifier())]
    model = _fit(ModelPruning("l1_unstructured", parameter_names=["weight"], amount=0.3), epochs=1)
    for start, now in zip(initial, _weights(model), strict=True):
        kept = now != 0
        assert torch.equal(now[kept], start[kept])
    without = _fit(
        ModelPruning(
            "l1_unstructured",
            parameter_names=["weight"],
            amount=0.3,
            use_lottery_ticket_hypothesis=False,
        ),
        epochs=1,
    )
    assert not torch.equal(
        _weights(without)[0][_weights(without)[0] != 0], initial[0][initial[0] != 0]
    )


def test_local_structured_pruning_removes_rows() -> None:
    model = _fit(
        ModelPruning(
            "ln_structured",
            parameters_to_prune=None,
            parameter_names=["weight"],
            use_global_unstructured=False,
            amount=0.25,
            pruning_dim=0,
            pruning_norm=2,
        ),
        epochs=1,
    )
    rows_zero = int((model.net[0].weight.abs().sum(dim=1) == 0).sum())
    assert rows_zero == 8  # 25% of 32 output rows


def test_checkpoint_holds_plain_pruned_weights_while_training_keeps_masks(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    class Save(trainkit.Callback):
        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            if trainer.current_epoch == 1:
                trainer.save_checkpoint(tmp_path / "mid.ckpt")
                seen["names"] = [n for n, _ in module.named_parameters()]

    torch.manual_seed(0)
    model = Classifier()
    pruning = ModelPruning("l1_unstructured", parameter_names=["weight"], amount=0.5)
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[pruning, Save()], **QUIET)
    trainer.fit(model, loader(DATA, 16))
    assert "net.0.weight_orig" in seen["names"]  # still pruning while training
    state = trainkit.checkpoint.files.load(tmp_path / "mid.ckpt")["state_dict"]
    assert "net.0.weight" in state and not any(k.endswith(("_orig", "_mask")) for k in state)
    loaded = Classifier()
    loaded.load_state_dict(state)
    assert _sparsity(_weights(loaded)) == pytest.approx(0.75, abs=1 / 352)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="built-in pruning functions"):
        ModelPruning("l3_unstructured")
    with pytest.raises(ValueError, match="pruning_dim"):
        ModelPruning("random_structured", use_global_unstructured=False)
    with pytest.raises(ValueError, match="pruning_norm"):
        ModelPruning("ln_structured", use_global_unstructured=False, pruning_dim=0)
    with pytest.raises(ValueError, match="unstructured pruning"):
        ModelPruning("ln_structured", pruning_dim=0, pruning_norm=1)
    with pytest.raises(ValueError, match="not one of"):
        ModelPruning("l1_unstructured", parameter_names=["gamma"])
    with pytest.raises(ValueError, match="amount"):
        ModelPruning("l1_unstructured", amount="half")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="class, not an instance"):
        ModelPruning(prune.L1Unstructured(0.5))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not in the model"):
        _fit(
            ModelPruning("l1_unstructured", parameters_to_prune=[(torch.nn.Linear(2, 2), "weight")])
        )

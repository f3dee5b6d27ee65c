"""BaseFinetuning / BackboneFinetuning as Lightning documents them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import trainkit
from tests.helpers import QUIET, blobs, loader
from trainkit.callbacks import BackboneFinetuning, BaseFinetuning, Callback, LearningRateMonitor
from trainkit.loggers import CSVLogger

# BackboneFinetuning leaves BatchNorm trainable when it freezes (train_bn), so the
# optimizer already holds it when the backbone is added; that warning is expected.
pytestmark = pytest.mark.filterwarnings("ignore:The provided params to be frozen")


class BackboneModel(trainkit.Module):
    """A backbone (with BatchNorm) and a head; the optimizer starts with the head only."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.backbone = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU())
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))  # type: ignore[no-any-return]

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self) -> Any:
        params = filter(lambda p: p.requires_grad, self.parameters())
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)


class Recorder(Callback):
    """What each epoch trains with, seen at its first batch (after the finetuning hook)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_train_batch_start(self, trainer: Any, module: Any, batch: Any, batch_idx: int) -> None:
        if batch_idx == 0:
            groups = trainer.optimizers[0].param_groups
            self.seen.append(
                {
                    "groups": len(groups),
                    "lrs": [round(g["lr"], 6) for g in groups],
                    "backbone_trains": module.backbone[0].weight.requires_grad,
                }
            )


def _trainer(callbacks: list[Callback], epochs: int, **options: Any) -> trainkit.Trainer:
    return trainkit.Trainer(max_epochs=epochs, callbacks=callbacks, **{**QUIET, **options})


def test_backbone_is_frozen_then_unfrozen_with_a_new_group_at_the_documented_lr() -> None:
    recorder = Recorder()
    finetuning = BackboneFinetuning(unfreeze_backbone_at_epoch=1)
    model = BackboneModel()
    _trainer([finetuning, recorder], epochs=4).fit(model, loader(blobs(64), 32))
    assert recorder.seen == [
        {"groups": 1, "lrs": [0.1], "backbone_trains": False},
        # 0.1 * backbone_initial_ratio_lr (0.1)
        {"groups": 2, "lrs": [0.1, 0.01], "backbone_trains": True},
        # times lambda_func(epoch + 1) = 2.0 each epoch ...
        {"groups": 2, "lrs": [0.1, 0.02], "backbone_trains": True},
        {"groups": 2, "lrs": [0.1, 0.04], "backbone_trains": True},
    ]
    assert finetuning.previous_backbone_lr == pytest.approx(0.04)


def test_should_align_caps_the_backbone_lr_at_the_first_groups() -> None:
    recorder = Recorder()
    finetuning = BackboneFinetuning(
        unfreeze_backbone_at_epoch=0, backbone_initial_lr=0.08, lambda_func=lambda epoch: 10.0
    )
    _trainer([finetuning, recorder], epochs=2).fit(BackboneModel(), loader(blobs(32), 32))
    assert [seen["lrs"] for seen in recorder.seen] == [[0.1, 0.08], [0.1, 0.1]]


def test_freeze_with_train_bn_false_freezes_batchnorm_too() -> None:
    backbone = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    BaseFinetuning.freeze(backbone, train_bn=False)
    assert not any(p.requires_grad for p in backbone.parameters())
    assert backbone[1].track_running_stats is False

    BaseFinetuning.freeze(backbone, train_bn=True)
    assert not backbone[0].weight.requires_grad
    assert backbone[1].weight.requires_grad
    assert backbone[1].track_running_stats is True


def test_unfreeze_and_add_param_group_defaults_to_first_lr_over_denominator() -> None:
    head, backbone = nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    optimizer = torch.optim.SGD(head.parameters(), lr=0.5)
    BaseFinetuning.freeze(backbone, train_bn=False)
    BaseFinetuning.unfreeze_and_add_param_group(backbone, optimizer, train_bn=False)
    assert len(optimizer.param_groups) == 2
    assert optimizer.param_groups[1]["lr"] == pytest.approx(0.05)
    # BatchNorm is unfrozen but, with train_bn=False, not added to the group.
    assert len(optimizer.param_groups[1]["params"]) == 2
    assert backbone[1].weight.requires_grad


def test_params_already_in_the_optimizer_are_skipped_with_a_warning() -> None:
    layer = nn.Linear(4, 4)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    # Lightning's words, which its tests match, and the fix.
    expected = "already exist within another group.*Did you init your optimizer in"
    with pytest.warns(UserWarning, match=expected):
        kept = BaseFinetuning.filter_on_optimizer(optimizer, layer.parameters())
    assert kept == []


def test_flatten_modules_returns_leaves_and_modules_with_own_parameters() -> None:
    inner = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    modules = BaseFinetuning.flatten_modules(nn.ModuleDict({"a": inner, "b": nn.Linear(2, 2)}))
    assert [type(m).__name__ for m in modules] == ["Linear", "ReLU", "Linear"]
    assert len(BaseFinetuning.flatten_modules([inner, [nn.Linear(2, 2)]])) == 3


def test_a_module_without_backbone_is_an_error() -> None:
    class NoBackbone(BackboneModel):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = self.backbone
            del self.backbone

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.encoder(x))  # type: ignore[no-any-return]

    trainer = _trainer([BackboneFinetuning()], epochs=1)
    with pytest.raises(ValueError, match=r"should have a nn\.Module `backbone` attribute"):
        trainer.fit(NoBackbone(), loader(blobs(32), 32))


def test_a_custom_finetuning_callback_runs_at_each_epoch_start() -> None:
    calls: list[tuple[str, int]] = []

    class Custom(BaseFinetuning):
        def freeze_before_training(self, pl_module: Any) -> None:
            calls.append(("freeze", -1))
            self.freeze(pl_module.backbone)

        def finetune_function(self, pl_module: Any, epoch: int, optimizer: Any) -> None:
            calls.append(("finetune", epoch))
            if epoch == 1:
                self.unfreeze_and_add_param_group(pl_module.backbone[0], optimizer, lr=0.3)

    callback = Custom()
    _trainer([callback], epochs=2).fit(BackboneModel(), loader(blobs(32), 32))
    assert calls == [("freeze", -1), ("finetune", 0), ("finetune", 1)]
    metadata = callback.state_dict()["internal_optimizer_metadata"]
    assert [group["params"] for group in metadata[0]] == [
        ["backbone.1.weight", "backbone.1.bias", "head.weight", "head.bias"],
        ["backbone.0.weight", "backbone.0.bias"],
    ]
    assert metadata[0][1]["lr"] == 0.3


def test_resume_after_unfreezing_keeps_the_groups_and_matches_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    data = loader(blobs(64), 32)
    whole = BackboneModel()
    _trainer([BackboneFinetuning(unfreeze_backbone_at_epoch=1)], epochs=4).fit(whole, data)

    first = _trainer([BackboneFinetuning(unfreeze_backbone_at_epoch=1)], epochs=2)
    first.fit(BackboneModel(), data)
    first.save_checkpoint(tmp_path / "two.ckpt")

    recorder = Recorder()
    resumed_callback = BackboneFinetuning(unfreeze_backbone_at_epoch=1)
    resumed = BackboneModel()
    second = _trainer([resumed_callback, recorder], epochs=4)
    second.fit(resumed, data, ckpt_path=tmp_path / "two.ckpt")

    assert recorder.seen == [
        {"groups": 2, "lrs": [0.1, 0.02], "backbone_trains": True},
        {"groups": 2, "lrs": [0.1, 0.04], "backbone_trains": True},
    ]
    for (name, expected), actual in zip(
        whole.state_dict().items(), resumed.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(actual, expected, msg=name)


def test_lr_monitor_names_follow_an_added_group(tmp_path: Path) -> None:
    """The first group's history moves from lr-SGD to lr-SGD/pg1 when a group is added."""
    monitor = LearningRateMonitor(logging_interval="epoch")
    finetuning = BackboneFinetuning(unfreeze_backbone_at_epoch=1)
    trainer = _trainer([finetuning, monitor], epochs=4, logger=CSVLogger(tmp_path))
    trainer.fit(BackboneModel(), loader(blobs(32), 32))
    assert monitor.lrs == {
        "lr-SGD/pg1": [0.1, 0.1, 0.1, 0.1],
        "lr-SGD/pg2": pytest.approx([0.01, 0.02, 0.04]),
    }

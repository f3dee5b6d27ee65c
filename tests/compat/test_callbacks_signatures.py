"""The callbacks take Lightning's arguments in Lightning's order, so that positional
calls mean the same (``ModelCheckpoint(dirpath, filename, monitor, ...)``)."""

from __future__ import annotations

import importlib.util
import inspect

import pytest

import trainkit.lightning.callbacks as ported

#: Lightning 2.6's positional parameters, in order.
LIGHTNING_ORDER = {
    "ModelCheckpoint": [
        "dirpath",
        "filename",
        "monitor",
        "verbose",
        "save_last",
        "save_top_k",
        "save_on_exception",
        "save_weights_only",
        "mode",
        "auto_insert_metric_name",
        "every_n_train_steps",
        "train_time_interval",
        "every_n_epochs",
        "save_on_train_epoch_end",
        "enable_version_counter",
    ],
    "TQDMProgressBar": ["refresh_rate", "process_position", "leave"],
    "EarlyStopping": [
        "monitor",
        "min_delta",
        "patience",
        "verbose",
        "mode",
        "strict",
        "check_finite",
        "stopping_threshold",
        "divergence_threshold",
        "check_on_train_epoch_end",
        "log_rank_zero_only",
    ],
    "LearningRateMonitor": ["logging_interval", "log_momentum", "log_weight_decay"],
}


def _positional(cls: type) -> list[str]:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in inspect.signature(cls).parameters.values() if p.kind in kinds]


@pytest.mark.parametrize("name", sorted(LIGHTNING_ORDER))
def test_lightnings_parameters_come_first_in_its_order(name: str) -> None:
    expected = LIGHTNING_ORDER[name]
    assert _positional(getattr(ported, name))[: len(expected)] == expected


def test_a_positional_call_means_what_it_means_in_lightning() -> None:
    checkpoint = ported.ModelCheckpoint(None, None, "val_loss", False, None, 1, False, True, "max")
    assert checkpoint.save_weights_only is True and checkpoint.mode == "max"
    assert ported.TQDMProgressBar(1, 2, True).process_position == 2


@pytest.mark.skipif(importlib.util.find_spec("lightning") is None, reason="needs Lightning")
def test_every_callback_both_have_takes_lightnings_order() -> None:
    import lightning.pytorch.callbacks as lightning

    differ = []
    for name in sorted(set(dir(lightning)) & set(dir(ported))):
        theirs, ours = getattr(lightning, name), getattr(ported, name)
        if not (inspect.isclass(theirs) and inspect.isclass(ours)) or name == "LambdaCallback":
            continue  # LambdaCallback takes its hooks by keyword only here (37 of them)
        expected = _positional(theirs)
        if _positional(ours)[: len(expected)] != expected:
            differ.append(name)
    assert differ == []

"""``self.log`` as Lightning 2.x documents it: names, defaults, values, returns.

The data are the numbers 0..7 in batches of 4, so a batch's mean is 1.5 or 5.5
and the epoch's mean is 3.5: every expected value below can be checked by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from trainkit.callbacks import EarlyStopping, ModelCheckpoint

from .. import helpers

QUIET: dict[str, Any] = {**helpers.QUIET, "num_sanity_val_steps": 0}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Some tests keep the default logger (logs/ under the working directory): not the repo's.
    monkeypatch.chdir(tmp_path)


def numbers(n: int = 8, batch_size: int = 4) -> DataLoader[Any]:
    """The numbers 0..n-1 as one-feature rows, in order."""
    return DataLoader(TensorDataset(torch.arange(n).float().unsqueeze(1)), batch_size=batch_size)


class Logs(trainkit.Module):
    """A one-weight model whose steps run the logging code they are given."""

    def __init__(
        self,
        train: Callable[[trainkit.Module, torch.Tensor, int], None] | None = None,
        val: Callable[[trainkit.Module, torch.Tensor, int, int], None] | None = None,
    ) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.train_logs = train
        self.val_logs = val

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x = batch[0]
        if self.train_logs is not None:
            self.train_logs(self, x, batch_idx)
        return self.layer(x).sum()

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        if self.val_logs is not None:
            self.val_logs(self, batch[0], batch_idx, dataloader_idx)

    def test_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        self.validation_step(batch, batch_idx, dataloader_idx)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.0)


def floats(metrics: dict[str, Any]) -> dict[str, float]:
    return {name: round(float(value), 4) for name, value in metrics.items()}


# ------------------------------------------------------------ callback metrics
def test_a_callbacks_on_validation_epoch_end_sees_this_epochs_value() -> None:
    seen: list[float] = []

    class Probe(trainkit.Callback):
        def on_validation_epoch_end(self, trainer: Any, module: Any) -> None:
            seen.append(float(trainer.callback_metrics["val_loss"]))

    def val(module: trainkit.Module, x: torch.Tensor, batch_idx: int, idx: int) -> None:
        module.log("val_loss", x.mean() + 10 * module.current_epoch)

    trainer = trainkit.Trainer(max_epochs=3, callbacks=[Probe()], **QUIET)
    trainer.fit(Logs(val=val), numbers(), numbers())
    assert seen == [3.5, 13.5, 23.5]


def test_step_and_epoch_in_validation_expose_the_plain_name_to_callbacks(tmp_path: Any) -> None:
    def val(module: trainkit.Module, x: torch.Tensor, batch_idx: int, idx: int) -> None:
        module.log("val_loss", x.mean(), on_step=True, on_epoch=True)

    checkpoint = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss", mode="min")
    stopping = EarlyStopping(monitor="val_loss", patience=1)
    trainer = trainkit.Trainer(
        max_epochs=3, callbacks=[checkpoint, stopping], **{**QUIET, "enable_checkpointing": True}
    )
    trainer.fit(Logs(val=val), numbers(), numbers())
    metrics = floats(trainer.callback_metrics)
    assert metrics["val_loss"] == metrics["val_loss_epoch"] == 3.5
    assert "val_loss_step" not in metrics  # evaluation step values are not for callbacks
    assert trainer.current_epoch == 2  # stopped: no improvement after the first epoch
    assert float(checkpoint.best_model_score) == 3.5  # type: ignore[arg-type]


def test_step_and_epoch_in_training_plain_name_is_the_step_value_then_the_epoch_value() -> None:
    during: list[dict[str, float]] = []

    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("t", x.mean(), on_step=True, on_epoch=True, prog_bar=True)
        during.append(floats(module.trainer.callback_metrics))

    trainer = trainkit.Trainer(max_epochs=1, **{**QUIET, "logger": True}, log_every_n_steps=1)
    trainer.fit(Logs(train=train), numbers())
    assert during == [{"t": 1.5, "t_step": 1.5}, {"t": 5.5, "t_step": 5.5}]
    assert floats(trainer.callback_metrics) == {"t": 3.5, "t_step": 5.5, "t_epoch": 3.5}
    logged = floats(trainer.logged_metrics)
    assert logged["t_step"] == 5.5 and logged["t_epoch"] == 3.5 and "t" not in logged


def test_logged_metrics_hold_this_epochs_values_during_the_epoch_end_hooks() -> None:
    # As Lightning's: the epoch's reduced values are in logged_metrics (not only in
    # callback_metrics) when the callbacks' epoch-end hooks run, each epoch anew.
    seen: list[tuple[str, dict[str, float]]] = []

    class Probe(trainkit.Callback):
        def on_validation_epoch_end(self, trainer: Any, module: Any) -> None:
            seen.append(("val", floats(trainer.logged_metrics)))

        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            seen.append(("train", floats(trainer.logged_metrics)))

    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("t", x.mean() + 10 * module.current_epoch, on_step=True, on_epoch=True)

    def val(module: trainkit.Module, x: torch.Tensor, batch_idx: int, idx: int) -> None:
        module.log("v", x.mean() + 100 * module.current_epoch)

    trainer = trainkit.Trainer(max_epochs=2, callbacks=[Probe()], **QUIET)
    trainer.fit(Logs(train=train, val=val), numbers(), numbers())
    assert [(hook, values.get("t_epoch"), values.get("v")) for hook, values in seen] == [
        ("val", None, 3.5),  # validation ends before the training epoch does
        ("train", 3.5, 3.5),
        ("val", 3.5, 103.5),
        ("train", 13.5, 103.5),
    ]


def test_logged_metrics_hold_the_latest_training_step_during_validation() -> None:
    # Between the loggers' writes (every 50 steps here, so none), as Lightning's.
    seen: list[float | None] = []

    class Probe(trainkit.Callback):
        def on_validation_epoch_end(self, trainer: Any, module: Any) -> None:
            value = trainer.logged_metrics.get("t")
            seen.append(None if value is None else float(value))

    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("t", x.mean() + 10 * module.current_epoch)

    trainer = trainkit.Trainer(max_epochs=2, callbacks=[Probe()], **QUIET)
    trainer.fit(Logs(train=train, val=lambda *args: None), numbers(), numbers())
    assert seen == [5.5, 15.5]  # each epoch's last batch: the numbers 4..7


def test_a_validation_progress_bar_value_stays_until_logged_again() -> None:
    # As Lightning's: the next validation's callbacks still see the last one's value.
    seen: list[float | None] = []

    class Probe(trainkit.Callback):
        def on_validation_epoch_end(self, trainer: Any, module: Any) -> None:
            seen.append(trainer.progress_bar_metrics.get("ve"))

    class EpochEndBar(Logs):
        def on_validation_epoch_end(self) -> None:
            self.log("ve", self.current_epoch + 0.5, prog_bar=True)

    trainer = trainkit.Trainer(max_epochs=3, callbacks=[Probe()], **QUIET)
    trainer.fit(EpochEndBar(val=lambda *args: None), numbers(), numbers())
    assert seen == [None, 0.5, 1.5]  # callbacks run before the Module's hook


# ----------------------------------------------------------- several loaders
def _two_loader_val(module: trainkit.Module, x: torch.Tensor, batch_idx: int, idx: int) -> None:
    module.log("v", x.mean() + 100 * idx, on_step=True, on_epoch=True, prog_bar=True)
    module.log("w", x.mean())


class EpochEndLogs(Logs):
    def on_validation_epoch_end(self) -> None:
        self.log("vend", 5.0)

    def on_test_epoch_end(self) -> None:
        self.log("vend", 5.0)


def test_several_dataloaders_put_the_step_or_epoch_suffix_before_the_dataloader_suffix() -> None:
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(EpochEndLogs(val=_two_loader_val), numbers(), [numbers(), numbers()])
    assert floats(trainer.callback_metrics) == {
        "v/dataloader_idx_0": 3.5,
        "v_epoch/dataloader_idx_0": 3.5,
        "v/dataloader_idx_1": 103.5,
        "v_epoch/dataloader_idx_1": 103.5,
        "w/dataloader_idx_0": 3.5,
        "w/dataloader_idx_1": 3.5,
        "vend": 5.0,
    }


def test_validate_returns_one_dict_per_dataloader_with_the_hooks_values_in_each() -> None:
    trainer = trainkit.Trainer(**QUIET)
    results = trainer.validate(EpochEndLogs(val=_two_loader_val), [numbers(), numbers()])
    assert results == [
        {"v_epoch/dataloader_idx_0": 3.5, "w/dataloader_idx_0": 3.5, "vend": 5.0},
        {"v_epoch/dataloader_idx_1": 103.5, "w/dataloader_idx_1": 3.5, "vend": 5.0},
    ]


def test_test_with_one_dataloader_returns_its_epoch_values_without_suffix() -> None:
    trainer = trainkit.Trainer(**QUIET)
    results = trainer.test(EpochEndLogs(val=_two_loader_val), numbers())
    assert results == [{"v_epoch": 3.5, "w": 3.5, "vend": 5.0}]


def test_validate_returns_only_values_sent_to_loggers() -> None:
    def val(module: trainkit.Module, x: torch.Tensor, batch_idx: int, idx: int) -> None:
        module.log("shown", x.mean(), logger=False, prog_bar=True)
        module.log("kept", x.mean())

    trainer = trainkit.Trainer(**QUIET)
    assert trainer.validate(Logs(val=val), numbers()) == [{"kept": 3.5}]
    assert floats(trainer.callback_metrics) == {"shown": 3.5, "kept": 3.5}


def test_add_dataloader_idx_false_keeps_each_dataloaders_own_name() -> None:
    def val(module: trainkit.Module, x: torch.Tensor, batch_idx: int, idx: int) -> None:
        module.log(f"v{idx}", x.mean() + idx, add_dataloader_idx=False)

    trainer = trainkit.Trainer(**QUIET)
    assert trainer.validate(Logs(val=val), [numbers(), numbers()]) == [{"v0": 3.5}, {"v1": 4.5}]


def test_add_dataloader_idx_false_with_one_name_for_two_dataloaders_is_an_error() -> None:
    def val(module: trainkit.Module, x: torch.Tensor, batch_idx: int, idx: int) -> None:
        module.log("v", x.mean(), add_dataloader_idx=False)

    with pytest.raises(ValueError, match=r"dataloader 1 after dataloader 0 logged the same name"):
        trainkit.Trainer(**QUIET).validate(Logs(val=val), [numbers(), numbers()])


# ------------------------------------------------------------ hooks, defaults
class HookLogs(Logs):
    def on_train_epoch_end(self) -> None:
        self.log("train_end", float(self.current_epoch))

    def on_validation_epoch_end(self) -> None:
        self.log("val_end", 2.0)

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.log("batch_end", float(batch_idx))


def test_defaults_per_hook_step_in_training_epoch_in_evaluation_and_epoch_hooks() -> None:
    logged: list[dict[str, float]] = []

    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("step_default", x.mean())

    def val(module: trainkit.Module, x: torch.Tensor, batch_idx: int, idx: int) -> None:
        module.log("val_default", x.mean())

    class Probe(trainkit.Callback):
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            logged.append(floats(trainer.callback_metrics))

    trainer = trainkit.Trainer(max_epochs=2, callbacks=[Probe()], **QUIET)
    trainer.fit(HookLogs(train=train, val=val), numbers(), numbers())
    # training_step and on_train_batch_end: per step, under the plain name.
    assert [m["step_default"] for m in logged] == [1.5, 5.5] * 2
    # validation_step and the epoch hooks: per epoch (no _step/_epoch names).
    assert floats(trainer.callback_metrics) == {
        "step_default": 5.5,
        "batch_end": 1.0,
        "val_default": 3.5,
        "val_end": 2.0,
        "train_end": 1.0,
    }


def test_on_step_true_in_an_epoch_hook_is_an_error() -> None:
    class StepInEpochEnd(Logs):
        def on_train_epoch_end(self) -> None:
            self.log("x", 1.0, on_step=True)

    with pytest.raises(ValueError, match="epoch hook, where values are logged once per epoch"):
        trainkit.Trainer(max_epochs=1, **QUIET).fit(StepInEpochEnd(), numbers())


def test_logging_in_on_validation_end_is_an_error() -> None:
    class LogsAtEnd(Logs):
        def on_validation_end(self) -> None:
            self.log("x", 1.0)

    with pytest.raises(RuntimeError, match="on_validation_end cannot log"):
        trainkit.Trainer(**QUIET).validate(LogsAtEnd(), numbers())


def test_a_refused_log_names_the_hook_it_was_called_in() -> None:
    class LogsAtFitStart(Logs):
        def on_fit_start(self) -> None:
            self.log("x", 1.0)

    class CallbackLogs(trainkit.Callback):
        def setup(self, trainer: trainkit.Trainer, module: Any, stage: str) -> None:
            module.log("y", 1.0)

    with pytest.raises(RuntimeError, match=r"self.log\('x'\) was refused in on_fit_start: "):
        trainkit.Trainer(max_epochs=1, **QUIET).fit(LogsAtFitStart(), numbers())
    with pytest.raises(RuntimeError, match=r"self.log\('y'\) was refused in setup: "):
        trainkit.Trainer(max_epochs=1, callbacks=[CallbackLogs()], **QUIET).fit(Logs(), numbers())


def test_logging_in_on_validation_start_and_epoch_start_is_per_epoch() -> None:
    class LogsAtStart(Logs):
        def on_validation_start(self) -> None:
            self.log("start", 1.0)

        def on_validation_epoch_start(self) -> None:
            self.log("epoch_start", 2.0)

    assert trainkit.Trainer(**QUIET).validate(LogsAtStart(), numbers()) == [
        {"start": 1.0, "epoch_start": 2.0}
    ]


# ------------------------------------------------------------------- Metric
def test_a_metric_logs_its_forward_value_per_step_and_compute_per_epoch_then_resets() -> None:
    torchmetrics = pytest.importorskip("torchmetrics")
    steps: list[float] = []

    class MetricLogs(Logs):
        def __init__(self) -> None:
            super().__init__()
            self.total = torchmetrics.SumMetric()

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            self.total(batch[0].sum())
            self.log("total", self.total, on_step=True, on_epoch=True)
            steps.append(float(self.trainer.callback_metrics["total_step"]))
            return super().training_step(batch, batch_idx)

    epochs: list[float] = []

    class Probe(trainkit.Callback):
        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            epochs.append(float(trainer.callback_metrics["total_epoch"]))

    trainer = trainkit.Trainer(max_epochs=2, callbacks=[Probe()], **QUIET)
    module = MetricLogs()
    trainer.fit(module, numbers())
    assert steps == [6.0, 22.0, 6.0, 22.0]  # each batch's own sum
    assert epochs == [28.0, 28.0]  # compute() over the epoch, reset before the next
    assert float(module.total.sum_value) == 0.0  # reset after the last epoch too


def test_sync_dist_is_not_applied_to_a_metric() -> None:
    torchmetrics = pytest.importorskip("torchmetrics")
    from trainkit.loops.metric_store import MetricStore

    calls: list[str] = []

    def all_reduce(tensor: torch.Tensor, op: str) -> torch.Tensor:
        calls.append(op)
        return tensor

    store = MetricStore(
        lambda values, point, always=False: [all_reduce(v, op) for _, v, op in values], "training"
    )
    metric = torchmetrics.MeanMetric()
    metric(torch.tensor([1.0, 3.0]))
    store.log("m", metric, (True, True, False, True, True, "mean"), 2)
    assert floats(store.step_values(sync=True)) == {"m_step": 2.0}
    assert floats(store.epoch_values()) == {"m_epoch": 2.0}
    assert calls == []  # the Metric synchronises itself in compute()


def test_log_dict_with_a_metric_collection_logs_each_metric_by_name() -> None:
    torchmetrics = pytest.importorskip("torchmetrics")

    class CollectionLogs(Logs):
        def __init__(self) -> None:
            super().__init__()
            self.metrics = torchmetrics.MetricCollection(
                {"sum": torchmetrics.SumMetric(), "max": torchmetrics.MaxMetric()}, prefix="val_"
            )

        def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
            self.metrics.update(batch[0].flatten())
            self.log_dict(self.metrics)

    trainer = trainkit.Trainer(**QUIET)
    assert trainer.validate(CollectionLogs(), numbers()) == [{"val_sum": 28.0, "val_max": 7.0}]


# ---------------------------------------------------------------- reduce_fx
@pytest.mark.parametrize(
    ("reduce_fx", "expected"),
    [
        ("mean", 3.5),
        ("MEAN", 3.5),
        ("avg", 3.5),
        (torch.mean, 3.5),
        ("sum", 7.0),
        (torch.sum, 7.0),
        ("Max", 5.5),
        (torch.max, 5.5),
        ("min", 1.5),
        (torch.min, 1.5),
    ],
)
def test_reduce_fx_accepts_names_in_any_case_and_torch_functions(
    reduce_fx: Any, expected: float
) -> None:
    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("x", x.mean(), on_step=False, on_epoch=True, reduce_fx=reduce_fx)

    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(Logs(train=train), numbers())
    assert floats(trainer.callback_metrics) == {"x": expected}


def test_an_unsupported_reduce_fx_is_a_clear_error() -> None:
    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("x", x.mean(), on_epoch=True, reduce_fx=torch.median)

    with pytest.raises(ValueError, match=r"reduce_fx=median\) is not supported; use one of"):
        trainkit.Trainer(max_epochs=1, **QUIET).fit(Logs(train=train), numbers())


# ----------------------------------------------------------- keywords, values
def test_batch_size_weights_the_epoch_mean() -> None:
    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("x", x.mean(), on_step=False, on_epoch=True, batch_size=1 + 2 * batch_idx)

    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(Logs(train=train), numbers())
    assert floats(trainer.callback_metrics)["x"] == (1.5 * 1 + 5.5 * 3) / 4


def test_logger_and_prog_bar_choose_where_a_value_goes() -> None:
    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        # prog_bar as the third positional argument, as in Lightning's signature.
        module.log("bar_only", x.mean(), True, logger=False)
        module.log("log_only", x.mean(), rank_zero_only=True, metric_attribute=None)

    trainer = trainkit.Trainer(max_epochs=1, **{**QUIET, "logger": True}, log_every_n_steps=1)
    trainer.fit(Logs(train=train), numbers())
    assert "bar_only" not in trainer.logged_metrics and trainer.logged_metrics["log_only"] == 5.5
    assert set(floats(trainer.callback_metrics)) == {"bar_only", "log_only"}


def test_log_dict_takes_the_same_keywords() -> None:
    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log_dict(
            {"a": x.mean(), "b": x.max()},
            prog_bar=True,
            on_step=False,
            on_epoch=True,
            reduce_fx="sum",
            batch_size=4,
            add_dataloader_idx=False,
        )

    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(Logs(train=train), numbers())
    assert floats(trainer.callback_metrics) == {"a": 7.0, "b": 10.0}


@pytest.mark.parametrize(
    "value", [3, 2.5, True, torch.tensor(2.5), torch.tensor([[2.5]])], ids=repr
)
def test_numbers_and_one_element_tensors_are_accepted(value: Any) -> None:
    np = pytest.importorskip("numpy")

    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("x", value)
        module.log("np", np.float32(1.5))

    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(Logs(train=train), numbers())
    metrics = trainer.callback_metrics
    assert float(metrics["x"]) == float(value) and metrics["x"].dim() == 0
    assert float(metrics["np"]) == 1.5


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": 1.0}, r"got a dict; .* Use self.log_dict"),
        (torch.nn.ModuleDict(), r"got a ModuleDict; .* Use self.log_dict"),
        ("abc", r"got a str; log a one-element tensor, a number or a torchmetrics Metric"),
        (torch.ones(3), r"tensor of shape \(3,\); only scalars can be logged"),
    ],
    ids=["dict", "ModuleDict", "str", "vector"],
)
def test_values_that_cannot_be_logged_are_errors(value: Any, message: str) -> None:
    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("x", value)

    with pytest.raises(ValueError, match=message):
        trainkit.Trainer(max_epochs=1, **QUIET).fit(Logs(train=train), numbers())


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"enable_graph": True}, "always logs detached values"),
        ({"sync_dist_group": object()}, "reduces sync_dist values over all processes"),
    ],
    ids=["enable_graph", "sync_dist_group"],
)
def test_log_options_trainkit_handles_differently_warn_and_still_log(
    keywords: dict[str, Any], message: str
) -> None:
    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("x", x.mean(), **keywords)

    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    with pytest.warns(UserWarning, match=message):
        trainer.fit(Logs(train=train), numbers())
    assert float(trainer.callback_metrics["x"]) == 5.5
    assert not trainer.callback_metrics["x"].requires_grad


# ---------------------------------------------------------- after the run
def test_metrics_keep_their_last_values_after_fit_validate_and_test_not_predict() -> None:
    def val(module: trainkit.Module, x: torch.Tensor, batch_idx: int, idx: int) -> None:
        module.log("v", x.mean(), prog_bar=True)

    trainer = trainkit.Trainer(max_epochs=1, **{**QUIET, "logger": True})
    trainer.fit(Logs(val=val), numbers(), numbers())
    assert floats(trainer.callback_metrics)["v"] == 3.5
    assert trainer.logged_metrics["v"] == 3.5
    assert trainer.progress_bar_metrics == {"v": 3.5}
    for run in (trainer.validate, trainer.test):
        run(Logs(val=val), numbers(4, 2))  # the numbers 0..3: mean 1.5
        assert floats(trainer.callback_metrics)["v"] == 1.5
        assert trainer.logged_metrics["v"] == 1.5
        assert trainer.progress_bar_metrics == {"v": 1.5}

    # A predict() call starts with no metrics too, and logs none.
    class Predicts(Logs):
        def predict_step(self, batch: Any, batch_idx: int) -> Any:
            return batch

    trainer.predict(Predicts(val=val), numbers(4, 2))
    assert trainer.callback_metrics == {} and trainer.logged_metrics == {}
    assert trainer.progress_bar_metrics == {}


def test_evaluation_step_values_reach_loggers_at_each_dataloaders_batch_count(
    tmp_path: Any,
) -> None:
    import csv

    from trainkit.loggers import CSVLogger

    logger = CSVLogger(tmp_path)
    trainer = trainkit.Trainer(max_epochs=2, **{**QUIET, "logger": logger})
    trainer.fit(Logs(val=_two_loader_val), numbers(), [numbers(), numbers()])
    assert trainer.logged_metrics["v_step/dataloader_idx_1"] == 105.5
    trainer.validate(Logs(val=_two_loader_val), [numbers(), numbers()])
    (path,) = tmp_path.rglob("metrics.csv")
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for idx, offset in ((0, 0.0), (1, 100.0)):
        key = f"v_step/dataloader_idx_{idx}"
        written = [(int(r["step"]), float(r[key])) for r in rows if r.get(key)]
        # fit: counts 0..3 over its two validation runs; validate starts again at 0.
        low, high = 1.5 + offset, 5.5 + offset
        assert written == [(0, low), (1, high), (2, low), (3, high), (0, low), (1, high)]
        assert all(not r.get("epoch") for r in rows if r.get(key))


def test_values_logged_in_on_train_start_reach_callbacks_and_loggers() -> None:
    class StartLogs(Logs):
        def on_train_start(self) -> None:
            self.log("at_start", 3.0)

    trainer = trainkit.Trainer(max_epochs=1, **{**QUIET, "logger": True})
    trainer.fit(StartLogs(), numbers())
    assert float(trainer.callback_metrics["at_start"]) == 3.0
    assert trainer.logged_metrics["at_start"] == 3.0


def test_the_progress_bar_shows_evaluation_step_and_epoch_values() -> None:
    trainer = trainkit.Trainer(**QUIET)
    trainer.validate(Logs(val=_two_loader_val), [numbers(), numbers()])
    assert trainer.progress_bar_metrics == {
        "v_step/dataloader_idx_0": 5.5,
        "v_epoch/dataloader_idx_0": 3.5,
        "v_step/dataloader_idx_1": 105.5,
        "v_epoch/dataloader_idx_1": 103.5,
    }


def test_logged_metrics_hold_the_logged_names_only() -> None:
    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("t", x.mean(), on_step=True, on_epoch=True)

    trainer = trainkit.Trainer(max_epochs=1, **{**QUIET, "logger": True}, log_every_n_steps=1)
    trainer.fit(Logs(train=train), numbers())
    assert trainer.logged_metrics == {"t_step": 5.5, "t_epoch": 3.5}  # no "epoch" entry


def test_the_modules_epoch_end_hooks_read_this_epochs_values() -> None:
    seen: list[tuple[str, float]] = []

    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log(
            "t", x.mean() + 10 * module.current_epoch, on_step=True, on_epoch=True, prog_bar=True
        )

    def val(module: trainkit.Module, x: torch.Tensor, batch_idx: int, idx: int) -> None:
        module.log("v", x.mean() + 10 * module.current_epoch)

    class Reads(Logs):
        def on_train_epoch_end(self) -> None:
            seen.append(("train", float(self.trainer.callback_metrics["t"])))
            seen.append(("bar", self.trainer.progress_bar_metrics["t_epoch"]))

        def on_validation_epoch_end(self) -> None:
            seen.append(("val", float(self.trainer.callback_metrics["v"])))

    trainkit.Trainer(max_epochs=2, **QUIET).fit(Reads(train=train, val=val), numbers(), numbers())
    assert seen == [
        ("val", 3.5),
        ("train", 3.5),
        ("bar", 3.5),
        ("val", 13.5),
        ("train", 13.5),
        ("bar", 13.5),
    ]


def test_validate_and_test_start_with_no_earlier_metrics() -> None:
    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("t", x.mean())

    def val(module: trainkit.Module, x: torch.Tensor, batch_idx: int, idx: int) -> None:
        module.log("v", x.mean())

    trainer = trainkit.Trainer(max_epochs=1, **{**QUIET, "logger": True}, log_every_n_steps=1)
    trainer.fit(Logs(train=train, val=val), numbers(), numbers())
    assert set(trainer.callback_metrics) == {"t", "v"}
    trainer.test(Logs(val=val), numbers())
    assert set(trainer.callback_metrics) == {"v"} and set(trainer.logged_metrics) == {"v"}


def test_logged_metrics_are_tensors_and_progress_bar_metrics_floats() -> None:
    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("t", x.mean(), prog_bar=True)

    trainer = trainkit.Trainer(max_epochs=1, **{**QUIET, "logger": True}, log_every_n_steps=1)
    trainer.fit(Logs(train=train), numbers())
    assert all(isinstance(v, torch.Tensor) for v in trainer.logged_metrics.values())
    assert all(isinstance(v, torch.Tensor) for v in trainer.callback_metrics.values())
    assert all(isinstance(v, float) for v in trainer.progress_bar_metrics.values())


def test_a_name_with_a_dataloader_suffix_of_its_own_is_an_error() -> None:
    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("x/dataloader_idx_0", x.mean())

    with pytest.raises(ValueError, match="must not contain '/dataloader_idx_'"):
        trainkit.Trainer(max_epochs=1, **QUIET).fit(Logs(train=train), numbers())


def test_on_step_false_and_on_epoch_false_is_an_error() -> None:
    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("x", x.mean(), on_step=False, on_epoch=False)

    with pytest.raises(ValueError, match="is not useful"):
        trainkit.Trainer(max_epochs=1, **QUIET).fit(Logs(train=train), numbers())


class Recorder(trainkit.loggers.CSVLogger):
    """A logger that keeps every ``log_metrics`` call as ``(metrics, step)``."""

    def __init__(self, root: Any) -> None:
        super().__init__(root)
        self.calls: list[tuple[dict[str, float], int]] = []

    def log_metrics(self, metrics: Any, step: int) -> None:  # type: ignore[override]
        self.calls.append((dict(metrics), step))


class StartLogs(Logs):
    def on_train_start(self) -> None:
        self.log("foo", 123)


def test_values_logged_in_on_train_start_are_written_once(tmp_path: Any) -> None:
    recorder = Recorder(tmp_path)
    trainer = trainkit.Trainer(max_epochs=2, **{**QUIET, "logger": recorder})
    trainer.fit(StartLogs(), numbers(4))
    assert recorder.calls == [({"foo": 123.0, "epoch": 0.0}, 0)]


def test_on_train_start_values_are_written_with_the_first_epochs_values(tmp_path: Any) -> None:
    # As Lightning writes them: an epoch value, in the first training epoch's row.
    def train(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("t", x.mean(), on_step=False, on_epoch=True)

    recorder = Recorder(tmp_path)
    trainer = trainkit.Trainer(max_epochs=2, **{**QUIET, "logger": recorder})
    trainer.fit(StartLogs(train=train), numbers())
    assert recorder.calls == [
        ({"foo": 123.0, "t": 3.5, "epoch": 0}, 1),
        ({"t": 3.5, "epoch": 1}, 3),
    ]


def test_values_logged_in_on_train_batch_end_go_with_that_steps_write(tmp_path: Any) -> None:
    class BatchEndLogs(Logs):
        def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
            self.log("b", float(batch_idx))

    recorder = Recorder(tmp_path)
    options = {**QUIET, "logger": recorder, "log_every_n_steps": 1}
    trainkit.Trainer(max_epochs=1, **options).fit(BatchEndLogs(), numbers())
    written = [(metrics["b"], step) for metrics, step in recorder.calls if "b" in metrics]
    assert written == [(0.0, 0), (1.0, 1)]


def test_the_results_table_has_a_row_per_metric_and_a_column_per_dataloader() -> None:
    from trainkit.loops.evaluate import format_results

    table = format_results([{"b": 2.0, "a": 0.25}, {"c": 3.0}], "validate").splitlines()
    assert table[0].split("    ") == ["Validate metric", "DataLoader 0", "DataLoader 1"]
    assert set(table[1]) == {"-"}
    assert [line.split() for line in table[2:]] == [["a", "0.25"], ["b", "2"], ["c", "3"]]
    assert format_results([{}], "test") == ""


def test_logged_metrics_are_filled_without_a_logger() -> None:
    # Lightning's trainer.logged_metrics holds what was meant for the loggers,
    # whether or not a logger is configured.
    def log(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("seen", x.sum(), on_step=True, on_epoch=True)
        module.log("bar_only", 1.0, logger=False, prog_bar=True)

    trainer = trainkit.Trainer(max_epochs=1, log_every_n_steps=1, **{**QUIET, "logger": False})
    trainer.fit(Logs(train=log), numbers(8, 4))
    assert floats(trainer.logged_metrics) == {"seen_step": 22.0, "seen_epoch": 14.0}


@pytest.mark.parametrize("logger", [False, True])
def test_logged_metrics_hold_the_latest_step_between_logging_intervals(
    logger: bool, tmp_path: Any
) -> None:
    # Lightning's trainer.logged_metrics show the current step's values whenever
    # read, not only at the log_every_n_steps writes (50 here: no step is written).
    def log(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("step", float(module.global_step))
        module.log("seen", x.sum(), on_step=True, on_epoch=True)

    seen: list[dict[str, float]] = []

    class Reads(trainkit.Callback):
        def on_train_batch_end(self, trainer: trainkit.Trainer, *args: Any) -> None:
            seen.append(floats(trainer.logged_metrics))

    trainer = trainkit.Trainer(
        max_epochs=2,
        callbacks=[Reads()],
        default_root_dir=tmp_path,
        **{**QUIET, "logger": logger},
    )
    trainer.fit(Logs(train=log), numbers(8, 4))
    assert [(values["step"], values["seen_step"]) for values in seen] == [
        (0.0, 6.0),
        (1.0, 22.0),
        (2.0, 6.0),
        (3.0, 22.0),
    ]
    assert floats(trainer.logged_metrics) == {"step": 3.0, "seen_step": 22.0, "seen_epoch": 14.0}


def test_loggers_get_metrics_and_step_as_keywords_and_the_epoch_as_an_int(tmp_path: Any) -> None:
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    class Recording(trainkit.loggers.CSVLogger):
        def log_metrics(self, *args: Any, **kwargs: Any) -> None:
            calls.append((args, kwargs))

    def log(module: trainkit.Module, x: torch.Tensor, batch_idx: int) -> None:
        module.log("foo", 0.0, on_step=True, on_epoch=True)

    options = {**QUIET, "logger": Recording(tmp_path)}
    trainer = trainkit.Trainer(max_epochs=1, limit_train_batches=2, log_every_n_steps=1, **options)
    trainer.fit(Logs(train=log), numbers(8, 4))
    assert next((args, kwargs) for args, kwargs in calls if "foo_step" in kwargs["metrics"]) == (
        (),
        {"metrics": {"foo_step": 0.0, "epoch": 0}, "step": 0},
    )
    assert type(calls[-1][1]["metrics"]["epoch"]) is int


def test_tensorboard_shows_a_placeholder_hp_metric_unless_turned_off(tmp_path: Any) -> None:
    seen: list[dict[str, Any]] = []

    class Recorded(Logs):
        def __init__(self) -> None:
            super().__init__()
            self.save_hyperparameters()

    class Recording(trainkit.loggers.TensorBoardLogger):
        def log_metrics(self, metrics: Any, step: int) -> None:
            seen.append(dict(metrics))

    trainer = trainkit.Trainer(
        max_epochs=1, limit_train_batches=1, **{**QUIET, "logger": Recording(tmp_path)}
    )
    trainer.fit(Recorded(), numbers(8, 4))  # save_hyperparameters() without any: still listed
    assert seen[0] == {"hp_metric": -1}
    seen.clear()
    quiet = Recording(tmp_path, default_hp_metric=False)
    trainer = trainkit.Trainer(max_epochs=1, limit_train_batches=1, **{**QUIET, "logger": quiet})
    trainer.fit(Recorded(), numbers(8, 4))
    assert {"hp_metric": -1} not in seen
    seen.clear()
    plain = Recording(tmp_path)  # a Module that never called save_hyperparameters: nothing
    trainkit.Trainer(max_epochs=1, limit_train_batches=1, **{**QUIET, "logger": plain}).fit(
        Logs(), numbers(8, 4)
    )
    assert {"hp_metric": -1} not in seen


def test_values_written_into_callback_metrics_are_kept_and_monitored(tmp_path: Any) -> None:
    # Callbacks put scores there for ModelCheckpoint / EarlyStopping to read, as in Lightning.
    scores = {0: 0.3, 1: 0.9, 2: 0.5}

    class Scorer(trainkit.Callback):
        def on_validation_epoch_end(self, trainer: Any, module: Any) -> None:
            if not trainer.sanity_checking:
                score = scores.get(trainer.current_epoch, 0.0)  # 0.0: the validate() below
                trainer.callback_metrics["score"] = torch.tensor(score)
                trainer.callback_metrics.update({"extra": torch.tensor(1.0)})

    best = ModelCheckpoint(dirpath=tmp_path, monitor="score", mode="max", filename="{epoch}")
    trainer = trainkit.Trainer(
        max_epochs=3,
        callbacks=[Scorer(), best],
        **{**QUIET, "enable_checkpointing": True},
    )
    train, val = helpers.loader(helpers.blobs(64)), helpers.loader(helpers.blobs(32))
    trainer.fit(helpers.Classifier(), train, val)
    assert best.best_model_path.endswith("epoch=1.ckpt")
    assert float(best.best_model_score) == pytest.approx(0.9)
    metrics = trainer.callback_metrics  # kept after the run, beside the logged values
    assert float(metrics["score"]) == 0.5 and "extra" in metrics and "val/loss" in metrics
    assert metrics.setdefault("new", torch.tensor(2.0)) == 2.0
    del metrics["extra"]
    assert "extra" not in trainer.callback_metrics and "new" in trainer.callback_metrics
    assert trainer.callback_metrics.pop("new") == 2.0 and "new" not in trainer.callback_metrics
    # A value logged under a name written before replaces it.
    trainer.callback_metrics["val/loss"] = torch.tensor(-1.0)
    trainer.validate(dataloaders=helpers.loader(helpers.blobs(32)), ckpt_path=None, verbose=False)
    assert float(trainer.callback_metrics["val/loss"]) > 0


def test_callback_metrics_writes_are_numbers_kept_as_tensors_and_saved(tmp_path: Any) -> None:
    import numpy

    class Scorer(trainkit.Callback):
        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            trainer.callback_metrics["score"] = numpy.float64(0.25)  # a NumPy number

    trainer = trainkit.Trainer(max_epochs=1, callbacks=[Scorer()], **QUIET)
    trainer.fit(helpers.Classifier(), helpers.loader(helpers.blobs(32)))
    assert torch.is_tensor(trainer.callback_metrics["score"])
    # The checkpoint, which keeps them, still loads with weights_only=True.
    path = tmp_path / "saved.ckpt"
    trainer.save_checkpoint(path)
    saved = torch.load(path, weights_only=True)["callback_metrics"]
    assert float(saved["score"]) == 0.25
    with pytest.raises(TypeError, match=r"callback_metrics\['note'\] = 'text'"):
        trainer.callback_metrics["note"] = "text"  # type: ignore[assignment]
    assert "note" not in trainer.callback_metrics


def test_callback_metrics_copy_and_pickle_as_a_plain_dict_of_their_values() -> None:
    import copy
    import pickle

    seen: list[Any] = []

    class Copies(trainkit.Callback):
        def on_validation_end(self, trainer: Any, module: Any) -> None:
            seen.append(copy.deepcopy(trainer.callback_metrics))  # as projects keep history

    trainer = trainkit.Trainer(max_epochs=2, callbacks=[Copies()], **QUIET)
    trainer.fit(
        helpers.Classifier(), helpers.loader(helpers.blobs(32)), helpers.loader(helpers.blobs(32))
    )
    assert len(seen) >= 2 and all(type(copied) is dict for copied in seen)
    assert set(seen[-1]) == set(trainer.callback_metrics)
    assert all(torch.equal(seen[-1][k], v) for k, v in trainer.callback_metrics.items())
    seen[-1]["val/loss"] = torch.tensor(-1.0)  # the copy is the user's own
    assert float(trainer.callback_metrics["val/loss"]) > 0
    assert pickle.loads(pickle.dumps(trainer.callback_metrics)) == dict(trainer.callback_metrics)
    assert type(copy.copy(trainer.callback_metrics)) is dict


def test_a_logged_step_is_the_step_the_loggers_record_at() -> None:
    # Lightning's documented x-axis override: log "step", and the loggers record the
    # values at it (without "step" or "epoch" among them).
    recorded: list[tuple[int, dict[str, float]]] = []

    class Steps(helpers.MemoryLogger):
        def log_metrics(self, metrics: Any, step: int) -> None:
            recorded.append((step, dict(metrics)))

    class LogsStep(helpers.Classifier):
        def on_validation_epoch_end(self) -> None:
            self.log("step", 100.0 + self.current_epoch)

    trainer = trainkit.Trainer(
        max_epochs=2, num_sanity_val_steps=0, **{**helpers.QUIET, "logger": Steps()}
    )
    trainer.fit(
        LogsStep(), helpers.loader(helpers.blobs(32), 16), helpers.loader(helpers.blobs(32), 16)
    )
    validation = [(step, row) for step, row in recorded if "val/acc" in row]
    assert [step for step, _ in validation] == [100, 101]
    assert all("step" not in row and "epoch" not in row for _, row in validation)
    assert float(trainer.logged_metrics["step"]) == 101.0  # kept in logged_metrics


def test_a_mock_logger_with_a_loggers_spec_trains_and_checkpoints(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Projects test their logging with MagicMock(spec=...): its state_dict() is a Mock,
    # which no checkpoint can hold; the checkpoint keeps no state for it.
    from unittest.mock import MagicMock

    from trainkit.lightning.loggers import TensorBoardLogger

    monkeypatch.chdir(tmp_path)  # the checkpoint folder is named after the Mock's save_dir
    logger = MagicMock(spec=TensorBoardLogger)
    trainer = trainkit.Trainer(
        max_epochs=1,
        logger=logger,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(helpers.Classifier(), helpers.loader(helpers.blobs(32), 16))
    saved = torch.load(trainer.checkpoint_callback.best_model_path, weights_only=True)
    assert saved["loggers"] == [{}] and saved["global_step"] == 2
    logger.finalize.assert_called_once_with("success")


def test_an_object_with_a_loggers_methods_is_a_logger_as_in_lightning() -> None:
    # Projects pass a bare Mock() as the logger in their tests; Lightning takes it.
    from unittest.mock import Mock

    logger = Mock()
    options = {**helpers.QUIET, "logger": logger, "log_every_n_steps": 1}
    trainer = trainkit.Trainer(max_epochs=1, **options)
    assert trainer.loggers == [logger]
    trainer.fit(helpers.Classifier(), helpers.loader(helpers.blobs(32), 16))
    assert logger.log_metrics.call_count == 2  # train/loss at each of the two steps
    logger.finalize.assert_called_once_with("success")

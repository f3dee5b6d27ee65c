"""TQDMProgressBar: plain lines, rank 0 only, and no metrics read per step."""

from __future__ import annotations

import ast
import math
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from trainkit.callbacks import progress
from trainkit.callbacks.progress import TQDMProgressBar, format_metrics

# The user's module: the progress bar never touches it.
MODULE: Any = None


class FakeTrainer:
    """The Trainer attributes the progress bar reads; counts metric reads."""

    def __init__(self, is_global_zero: bool = True, num_training_batches: float = 100) -> None:
        self.is_global_zero = is_global_zero
        self.current_epoch = 0
        self.global_step = 0
        self.num_training_batches = num_training_batches
        self.num_val_batches: list[float] = [4]
        self.num_test_batches: list[float] = [3]
        self.num_predict_batches: list[float] = [2]
        self.sanity_checking = False
        self.check_val_every_n_epoch: int | None = 1
        self.state = types.SimpleNamespace(fn="fit")
        self.metrics: dict[str, float] = {"loss": 0.123456, "acc": 0.9}
        self.metric_reads = 0

    @property
    def progress_bar_metrics(self) -> dict[str, float]:
        # The real property syncs device tensors; every read here would cost a sync.
        self.metric_reads += 1
        return dict(self.metrics)


def run_epoch(bar: TQDMProgressBar, trainer: Any, steps: int) -> None:
    """Drive the hooks the way the loop does for one training epoch."""
    bar.on_train_epoch_start(trainer, MODULE)
    for batch_idx in range(steps):
        trainer.global_step += 1
        bar.on_train_batch_end(trainer, MODULE, None, None, batch_idx)
    bar.on_train_epoch_end(trainer, MODULE)


def run_validation(bar: TQDMProgressBar, trainer: Any, batches: int) -> None:
    bar.on_validation_start(trainer, MODULE)
    for batch_idx in range(batches):
        bar.on_validation_batch_end(trainer, MODULE, None, None, batch_idx)
    bar.on_validation_end(trainer, MODULE)


def fit(bar: TQDMProgressBar, trainer: Any, steps: int) -> None:
    bar.setup(trainer, MODULE, "fit")
    bar.on_train_start(trainer, MODULE)
    run_epoch(bar, trainer, steps)
    bar.on_train_end(trainer, MODULE)
    bar.teardown(trainer, MODULE, "fit")


def test_plain_mode_prints_one_line_every_n_steps(capsys: pytest.CaptureFixture[str]) -> None:
    bar = TQDMProgressBar(print_every_n_steps=5, plain=True)
    trainer = FakeTrainer(num_training_batches=23)
    fit(bar, trainer, steps=23)
    lines = capsys.readouterr().out.splitlines()
    step_lines = [line for line in lines if "| step " in line]
    assert len(step_lines) == 23 // 5
    assert len(lines) == 23 // 5 + 1  # plus the end-of-epoch line
    assert step_lines[0] == "epoch 0 | step 5/23 | loss 0.1235 | acc 0.9"
    assert lines[-1].startswith("epoch 0 | end")
    assert "loss 0.1235" in lines[-1]


def test_plain_mode_unknown_length_prints_step_without_total(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bar = TQDMProgressBar(print_every_n_steps=2, plain=True)
    fit(bar, FakeTrainer(num_training_batches=math.inf), steps=2)
    assert capsys.readouterr().out.splitlines()[0].startswith("epoch 0 | step 2 | loss")


def test_plain_mode_reads_metrics_only_when_printing(capsys: pytest.CaptureFixture[str]) -> None:
    bar = TQDMProgressBar(print_every_n_steps=50, plain=True)
    trainer = FakeTrainer(num_training_batches=1000)
    fit(bar, trainer, steps=1000)
    assert trainer.metric_reads == 1000 // 50 + 1


def test_bar_does_not_read_metrics_every_step(capsys: pytest.CaptureFixture[str]) -> None:
    bar = TQDMProgressBar(plain=False)
    trainer = FakeTrainer(num_training_batches=1000)
    bar.setup(trainer, MODULE, "fit")
    bar.on_train_start(trainer, MODULE)
    run_epoch(bar, trainer, steps=1000)
    # 1000 fast steps take far less than a second: a handful of redraws at most.
    assert trainer.metric_reads < 20
    # The epoch end still shows the full count and the final metrics.
    assert bar._train_bar.n == 1000
    assert bar._train_bar.postfix == "loss=0.1235, acc=0.9"
    bar.on_train_end(trainer, MODULE)
    assert "1000/1000" in capsys.readouterr().out


def test_bar_honours_refresh_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(10**6))
    # Each reading of the clock is a second later: only refresh_rate limits redraws.
    monkeypatch.setattr(progress.time, "monotonic", lambda: float(next(clock)))
    bar = TQDMProgressBar(refresh_rate=10, plain=False)
    trainer = FakeTrainer()
    bar.setup(trainer, MODULE, "fit")
    run_epoch(bar, trainer, steps=100)
    assert trainer.metric_reads == 100 // 10 + 1  # plus the epoch end
    bar.teardown(trainer, MODULE, "fit")


def test_tqdm_miniters_raises_the_refresh_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    # As in Lightning: the larger of refresh_rate and the TQDM_MINITERS variable.
    monkeypatch.setenv("TQDM_MINITERS", "5")
    assert TQDMProgressBar(refresh_rate=2).refresh_rate == 5
    assert TQDMProgressBar(refresh_rate=8).refresh_rate == 8


@pytest.mark.parametrize("plain", [True, False])
def test_other_ranks_print_nothing(plain: bool, capsys: pytest.CaptureFixture[str]) -> None:
    bar = TQDMProgressBar(print_every_n_steps=1, plain=plain)
    trainer = FakeTrainer(is_global_zero=False)
    fit(bar, trainer, steps=10)
    run_validation(bar, trainer, batches=4)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ""
    assert trainer.metric_reads == 0


def test_plain_validation_line_shows_metrics_not_training_loss(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bar = TQDMProgressBar(plain=True)
    trainer = FakeTrainer()
    bar.setup(trainer, MODULE, "fit")
    trainer.sanity_checking = True
    run_validation(bar, trainer, batches=2)
    assert capsys.readouterr().out == ""  # sanity-check results are not shown
    trainer.sanity_checking = False
    trainer.metrics["val/acc"] = 0.8765
    run_validation(bar, trainer, batches=4)
    assert capsys.readouterr().out == "validation | epoch 0 | acc 0.9 | val/acc 0.8765\n"


def test_bars_for_every_stage_close_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    bar = TQDMProgressBar(plain=False)
    trainer = FakeTrainer(num_training_batches=8)
    bar.setup(trainer, MODULE, "fit")
    trainer.sanity_checking = True
    run_validation(bar, trainer, batches=2)
    trainer.sanity_checking = False
    bar.on_train_start(trainer, MODULE)
    for epoch in range(2):
        trainer.current_epoch = epoch
        bar.on_train_epoch_start(trainer, MODULE)
        for batch_idx in range(8):
            bar.on_train_batch_end(trainer, MODULE, None, None, batch_idx)
        run_validation(bar, trainer, batches=4)
        assert bar._eval_bar is None
        bar.on_train_epoch_end(trainer, MODULE)
        assert bar._train_bar.n == 8
    bar.on_train_end(trainer, MODULE)
    assert bar._train_bar is None

    bar.on_test_start(trainer, MODULE)
    for batch_idx in range(3):
        bar.on_test_batch_end(trainer, MODULE, None, None, batch_idx)
    bar.on_test_end(trainer, MODULE)
    bar.on_predict_start(trainer, MODULE)
    bar.on_predict_batch_end(trainer, MODULE, None, None, 0)
    bar.on_predict_end(trainer, MODULE)
    assert bar._eval_bar is None
    out = capsys.readouterr().out
    for text in ("Sanity Checking", "Epoch 1", "Validation", "Testing", "Predicting"):
        assert text in out


def test_leave_keeps_one_bar_per_epoch(capsys: pytest.CaptureFixture[str]) -> None:
    bar = TQDMProgressBar(plain=False, leave=True)
    trainer = FakeTrainer(num_training_batches=3)
    bar.setup(trainer, MODULE, "fit")
    run_epoch(bar, trainer, steps=3)
    assert bar._train_bar is None  # closed, left on screen


def test_the_training_bar_exists_from_on_train_start(capsys: pytest.CaptureFixture[str]) -> None:
    # A subclass's on_train_epoch_start that reads it without calling ours (a per-epoch bar).
    class EpochBar(TQDMProgressBar):
        def on_train_epoch_start(self, trainer: Any, *_: Any) -> None:
            self.train_progress_bar.reset(total=3)
            self.train_progress_bar.set_description(f"Epoch {trainer.current_epoch + 1}")

        def on_train_batch_end(self, *_: Any) -> None:
            pass

    for rank_zero in (True, False):
        bar = EpochBar(plain=False)
        trainer = FakeTrainer(is_global_zero=rank_zero)
        bar.setup(trainer, MODULE, "fit")
        bar.on_train_start(trainer, MODULE)
        assert (bar._train_bar is not None) is rank_zero  # the other ranks show none
        if rank_zero:
            bar.on_train_epoch_start(trainer, MODULE)
            assert bar.train_progress_bar.total == 3
        bar.on_train_end(trainer, MODULE)
    assert "Epoch 1" in capsys.readouterr().out


def test_format_metrics_puts_loss_first_with_four_digits() -> None:
    assert format_metrics({"acc": 0.912345, "loss": 12.3456}) == {"loss": "12.35", "acc": "0.9123"}


def test_invalid_arguments_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="refresh_rate=0"):
        TQDMProgressBar(refresh_rate=0)
    with pytest.raises(ValueError, match="print_every_n_steps=0"):
        TQDMProgressBar(print_every_n_steps=0)


def test_tqdm_is_imported_only_inside_hooks() -> None:
    # `import trainkit` must stay cheap (DESIGN.md); torch itself may load tqdm, so
    # look at the module's top-level statements rather than at sys.modules.
    tree = ast.parse(Path(progress.__file__).read_text())
    top_level = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    names = [alias.name for node in top_level for alias in node.names]
    modules = [node.module for node in top_level if isinstance(node, ast.ImportFrom)]
    assert not any("tqdm" in (name or "") for name in names + modules)


class StyledBar(TQDMProgressBar):
    """A subclass as ported projects write them: Lightning's hook signatures, the
    bar factories overridden, the bar read and restyled at each epoch's start."""

    def __init__(self) -> None:
        super().__init__(print_every_n_steps=2, plain=True)
        self.seen: list[Any] = []

    def init_train_tqdm(self) -> Any:
        bar = super().init_train_tqdm()
        self.seen.append("init_train_tqdm")
        return bar

    def init_validation_tqdm(self) -> Any:
        bar = super().init_validation_tqdm()
        self.seen.append("init_validation_tqdm")
        return bar

    def on_train_epoch_start(self, trainer: Any, *_: Any) -> None:
        super().on_train_epoch_start(trainer)  # Lightning declares (trainer, *_)
        self.train_progress_bar.set_description(f"custom {trainer.current_epoch}")
        self.seen.append(("total", self.train_progress_bar.total))

    def on_train_end(self, *_: Any) -> None:
        super().on_train_end()


def test_plain_mode_still_builds_bars_that_subclasses_read_but_never_draws(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Under pytest or a batch job stdout is not a terminal: the bars exist for the
    # subclass's code, as under Lightning, while only the plain lines are printed.
    bar, trainer = StyledBar(), FakeTrainer(num_training_batches=4)
    bar.setup(trainer, MODULE, "fit")
    bar.on_train_start(trainer, MODULE)
    run_epoch(bar, trainer, steps=4)
    assert bar.train_progress_bar.n == 4 and bar.train_progress_bar.disable
    run_validation(bar, trainer, batches=2)
    bar.on_train_end(trainer, MODULE)
    assert bar.seen == ["init_train_tqdm", ("total", 4), "init_validation_tqdm"]
    out = capsys.readouterr()
    assert out.err == ""
    assert out.out.splitlines() == [
        "epoch 0 | step 2/4 | loss 0.1235 | acc 0.9",
        "epoch 0 | step 4/4 | loss 0.1235 | acc 0.9",
        "epoch 0 | end (4 batches) | loss 0.1235 | acc 0.9",
        "validation | epoch 0 | acc 0.9",
    ]


def test_a_subclass_that_builds_its_own_bars_draws_them_without_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # As ported projects do (darts): their own Tqdm bars, the validation one disabled.
    # Without a terminal they draw as under Lightning; no plain line for a hidden stage.
    import trainkit
    from tests.helpers import QUIET, Classifier, blobs, loader
    from trainkit.lightning.callbacks.progress.tqdm_progress import Tqdm

    class TrainOnly(TQDMProgressBar):
        def init_train_tqdm(self) -> Any:
            return Tqdm(desc="Training", leave=True, file=sys.stdout)

        def init_validation_tqdm(self) -> Any:
            return Tqdm(desc="Validating", disable=True, file=sys.stdout)

    assert TrainOnly().is_plain is False and TQDMProgressBar().is_plain is True  # no tty
    options = {**QUIET, "enable_progress_bar": True, "num_sanity_val_steps": 0}
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[TrainOnly()], **options)
    trainer.fit(Classifier(), loader(blobs(64), 32), loader(blobs(32), 32))
    out = capsys.readouterr().out
    assert "validation |" not in out and "epoch 0 |" not in out  # no plain lines
    assert "Epoch 0: 100%" in out and "train/loss=" in out  # the subclass's bar drew


@pytest.mark.parametrize("bar_class", ["TQDMProgressBar", "RichProgressBar"])
def test_the_bars_and_the_run_can_be_copied_and_pickled(bar_class: str) -> None:
    # Lightning code deep-copies the callbacks (or the Trainer) in a hook, and pickles a
    # bar after a run: neither fails on what the run holds (threads, locks, consoles).
    import copy
    import pickle

    import trainkit
    from tests.helpers import QUIET, Classifier, blobs, loader
    from trainkit import callbacks

    if bar_class == "RichProgressBar":
        pytest.importorskip("rich")
    bar = getattr(callbacks, bar_class)()
    copies: list[Any] = []

    class Copying(trainkit.Callback):
        def on_train_epoch_start(self, trainer: Any, *args: Any) -> None:
            copies.append(copy.deepcopy(trainer.callbacks))
            copies.append(copy.deepcopy(trainer))

    options = {**QUIET, "enable_progress_bar": True}
    trainer = trainkit.Trainer(max_steps=2, callbacks=[bar, Copying()], **options)
    trainer.fit(Classifier(), loader(blobs(64), 16))
    assert [type(c).__name__ for c in copies[0]][:1] == [bar_class]
    assert copies[1].current_epoch == 0 and copies[1] is not trainer
    restored = pickle.loads(pickle.dumps(bar))
    assert type(restored) is type(bar) and restored.refresh_rate == bar.refresh_rate

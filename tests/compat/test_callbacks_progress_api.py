"""The progress bar API Lightning documents for bars of one's own: the current dataloader's
totals and its tracker, TQDMProgressBar's refresh_rate and BAR_FORMAT, and RichProgressBar's
refresh() and val_sanity_check_bar."""

from __future__ import annotations

import io
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader, needs_rich
from trainkit.callbacks import ProgressBar, RichProgressBar, TQDMProgressBar

BARS = {**QUIET, "enable_progress_bar": True}


class SeveralLoaders(Classifier):
    """Classifier whose evaluation steps take ``dataloader_idx``."""

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        self._evaluate(batch, "test")

    def predict_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> torch.Tensor:
        return super().predict_step(batch, batch_idx)


class PerLoader:
    """Records, as a per-dataloader bar would reset itself, each dataloader's start and total."""

    starts: list[tuple[str, int, float]]

    def _note(self, stage: str, dataloader_idx: int, kind: str) -> None:
        bar: Any = self  # a ProgressBar, once mixed in
        if bar.has_dataloader_changed(dataloader_idx):
            total = getattr(bar, f"total_{kind}_batches_current_dataloader")
            self.starts.append((stage, dataloader_idx, total))

    def on_validation_batch_start(
        self, trainer: Any, module: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self._note("sanity" if trainer.sanity_checking else "val", dataloader_idx, "val")

    def on_test_batch_start(
        self, trainer: Any, module: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self._note("test", dataloader_idx, "test")

    def on_predict_batch_start(
        self, trainer: Any, module: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self._note("predict", dataloader_idx, "predict")


class TQDMPerLoader(PerLoader, TQDMProgressBar):
    def __init__(self) -> None:
        super().__init__(plain=True)
        self.starts = []


class RichPerLoader(PerLoader, RichProgressBar):
    def __init__(self) -> None:
        super().__init__(console_kwargs={"file": io.StringIO()})
        self.starts = []


@pytest.mark.parametrize("kind", [TQDMPerLoader, pytest.param(RichPerLoader, marks=needs_rich)])
def test_each_dataloader_starts_with_its_own_total(kind: type[ProgressBar]) -> None:
    bar = kind()
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[bar], num_sanity_val_steps=2, **BARS)
    # 3 and 1 batches of 8.
    evaluation = [loader(blobs(24), 8), loader(blobs(8), 8)]
    trainer.fit(SeveralLoaders(), loader(blobs(16), 8), evaluation)
    trainer.test(dataloaders=evaluation)
    trainer.predict(dataloaders=evaluation)
    assert bar.starts == [  # type: ignore[attr-defined]
        ("sanity", 0, 2),  # the sanity check runs 2 batches of the first, 1 of the second
        ("sanity", 1, 1),
        ("val", 0, 3),
        ("val", 1, 1),
        ("test", 0, 3),
        ("test", 1, 1),
        ("predict", 0, 3),
        ("predict", 1, 1),
    ]


@pytest.mark.parametrize("kind", [TQDMPerLoader, pytest.param(RichPerLoader, marks=needs_rich)])
def test_every_evaluation_run_starts_afresh(kind: type[ProgressBar]) -> None:
    # The same dataloader in the next run is a new start: the bars forget it between runs.
    bar = kind()
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[bar], num_sanity_val_steps=0, **BARS)
    trainer.fit(Classifier(), loader(blobs(16), 8), loader(blobs(16), 8))
    assert bar.starts == [("val", 0, 2), ("val", 0, 2)]  # type: ignore[attr-defined]


def test_the_tracker_says_whether_the_dataloader_changed() -> None:
    bar = ProgressBar()
    assert [bar.has_dataloader_changed(i) for i in (0, 0, 1, 1, 0)] == [
        True,
        False,
        True,
        False,
        True,
    ]
    bar.reset_dataloader_idx_tracker()
    assert bar.has_dataloader_changed(0) is True


class _Evaluating:
    """A Trainer running an evaluation, as much as the bar reads of it."""

    sanity_checking = False
    num_val_batches = [3.0, 1.0]
    num_test_batches = [5.0]
    num_predict_batches = [float("inf"), 2.0]


def test_totals_of_the_current_dataloader() -> None:
    bar = ProgressBar()
    trainer: Any = _Evaluating()
    bar.setup(trainer, trainer, "test")
    assert bar.total_test_batches_current_dataloader == 5  # one dataloader: it is the one
    with pytest.raises(RuntimeError, match="has_dataloader_changed"):
        _ = bar.total_val_batches_current_dataloader  # two, and none known to run
    bar.has_dataloader_changed(1)
    assert bar.total_val_batches_current_dataloader == 1
    assert bar.total_predict_batches_current_dataloader == 2
    bar.has_dataloader_changed(0)
    assert bar.total_predict_batches_current_dataloader == float("inf")


def test_refresh_rate_is_the_constructors() -> None:
    assert TQDMProgressBar(refresh_rate=7).refresh_rate == 7
    assert TQDMProgressBar().refresh_rate == 1


def test_bars_draw_with_bar_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert "{rate_noinv_fmt}" in TQDMProgressBar.BAR_FORMAT  # Lightning's layout

    class Counted(TQDMProgressBar):
        BAR_FORMAT = "[{n_fmt} of {total_fmt} batches]"

    trainer = trainkit.Trainer(max_epochs=1, callbacks=[Counted(plain=False)], **BARS)
    trainer.fit(Classifier(), loader(blobs(32), 8))
    assert "[4 of 4 batches]" in capsys.readouterr().out


def test_a_bar_built_with_lightnings_tqdm_class_is_the_one_drawn(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # As Lightning's docs show: override init_train_tqdm and build the bar with Tqdm.
    from trainkit.lightning.callbacks.progress.tqdm_progress import Tqdm, convert_inf

    built: list[Any] = []

    class Own(TQDMProgressBar):
        def init_train_tqdm(self) -> Tqdm:
            bar = Tqdm(desc="own bar", position=0, leave=True, file=__import__("sys").stdout)
            built.append(bar)
            return bar

    trainer = trainkit.Trainer(max_epochs=1, callbacks=[Own(plain=False)], **BARS)
    trainer.fit(Classifier(), loader(blobs(32), 8))
    out = capsys.readouterr().out
    assert len(built) == 1 and isinstance(built[0], Tqdm)
    # Drawn from its creation until the epoch's end (described "Epoch 0" then, as Lightning).
    assert "own bar" in out and "Epoch 0: 100%" in out and "4/4" in out
    built[0].set_postfix(half=0.5)  # a number given to the bar: padded to one width
    assert built[0].postfix == "half=0.500"
    assert convert_inf(float("inf")) is None and convert_inf(None) is None
    assert convert_inf(4) == 4


def test_get_standard_metrics_is_what_bars_show_before_the_logged_values(
    tmp_path: Any,
) -> None:
    from trainkit.lightning.callbacks.progress.progress_bar import get_standard_metrics

    assert get_standard_metrics(trainkit.Trainer(**QUIET)) == {}
    logged = trainkit.Trainer(logger=trainkit.loggers.CSVLogger(tmp_path, version=7))
    assert get_standard_metrics(logged) == {"v_num": 7}
    dated = trainkit.Trainer(logger=trainkit.loggers.CSVLogger(tmp_path, version="2026_11_27"))
    assert get_standard_metrics(dated) == {"v_num": "1_27"}
    # The bar's own metrics start with them.
    assert TQDMProgressBar().get_metrics(logged, Classifier()) == {"v_num": 7}


def test_total_val_batches_is_0_in_an_epoch_that_does_not_validate() -> None:
    # As Lightning's: a bar sized train + val per epoch gets each epoch's total.
    seen: list[tuple[int, int | float]] = []

    class Sizes(trainkit.Callback):
        def on_train_epoch_start(self, trainer: Any, module: Any) -> None:
            seen.append((trainer.current_epoch, trainer.progress_bar_callback.total_val_batches))

        def on_validation_start(self, trainer: Any, module: Any) -> None:
            seen.append((-1, trainer.progress_bar_callback.total_val_batches))

    trainer = trainkit.Trainer(
        max_epochs=4,
        check_val_every_n_epoch=2,
        limit_val_batches=2,
        callbacks=[Sizes(), TQDMProgressBar(plain=True)],
        **{**QUIET, "enable_progress_bar": True},
    )
    trainer.fit(Classifier(), loader(blobs(48), 16), loader(blobs(64), 16))
    # The sanity check (-1) counts its batches; epochs 0 and 2 validate nothing.
    assert seen == [(-1, 2), (0, 0), (1, 2), (-1, 2), (2, 0), (3, 2), (-1, 2)]
    assert trainkit.Trainer(**QUIET).validate(Classifier(), loader(blobs(32), 16), verbose=False)


class RichProbe(RichProgressBar):
    """A terminal bar that reads its sanity-check task and redraws a renamed training bar."""

    def __init__(self) -> None:
        self.screen = io.StringIO()
        super().__init__(console_kwargs={"file": self.screen, "force_terminal": True, "width": 120})
        self.sanity: list[tuple[str, float | None]] = []
        self.drawn = ""

    def on_validation_batch_end(self, trainer: Any, module: Any, *args: Any, **kwargs: Any) -> None:
        super().on_validation_batch_end(trainer, module, *args, **kwargs)
        if trainer.sanity_checking:
            task = self.val_sanity_check_bar
            self.sanity.append((task.description, task.total))

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        super().on_train_epoch_end(trainer, module)
        assert self.progress is not None
        self.progress.update(self.train_progress_bar_id, description="renamed epoch")
        before = len(self.screen.getvalue())
        self.refresh()
        self.drawn = self.screen.getvalue()[before:]


@needs_rich
def test_rich_sanity_check_bar_and_refresh() -> None:
    bar = RichProbe()
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[bar], num_sanity_val_steps=2, **BARS)
    trainer.fit(Classifier(), loader(blobs(16), 8), loader(blobs(32), 8))
    assert bar.sanity == [("Sanity Checking", 2), ("Sanity Checking", 2)]
    assert "renamed epoch" in bar.drawn  # refresh() drew the change at once
    with pytest.raises(TypeError, match="sanity check bar has not been created"):
        _ = bar.val_sanity_check_bar  # only while the check runs

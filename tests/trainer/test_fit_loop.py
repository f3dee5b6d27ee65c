"""trainer.fit_loop: Lightning's loop limits and progress; a later fit continues the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, MemoryLogger, blobs, loader
from trainkit.callbacks import ModelCheckpoint


def _counts(trainer: trainkit.Trainer) -> tuple[Any, ...]:
    loop = trainer.fit_loop
    epochs, batches = loop.epoch_progress, loop.epoch_loop.batch_progress
    return (
        loop.total_batch_idx,
        loop.batch_idx,
        (epochs.current.ready, epochs.current.processed, epochs.current.completed),
        (batches.current.ready, batches.current.completed),
        (batches.total.ready, batches.total.completed),
        loop.done,
    )


class Record(trainkit.Callback):
    def __init__(self) -> None:
        self.seen: list[tuple[str, tuple[Any, ...]]] = []

    def on_train_batch_end(
        self, trainer: Any, module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        if i in (0, 4):
            self.seen.append((f"batch {trainer.current_epoch}.{i}", _counts(trainer)))

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        self.seen.append((f"end {trainer.current_epoch}", _counts(trainer)))


def test_progress_counts_as_lightnings_loops_do_across_epochs_and_a_second_fit() -> None:
    # The values Lightning 2.6.6's loops give in the same run (two fits of five
    # batches an epoch, the second after max_epochs was raised from 2 to 3).
    record = Record()
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[record], **QUIET)
    assert _counts(trainer) == (-1, -1, (0, 0, 0), (0, 0), (0, 0), False)
    model = Classifier()
    trainer.fit(model, loader(blobs(160), 32))
    assert _counts(trainer) == (9, 4, (2, 2, 2), (5, 5), (10, 10), True)
    trainer.fit_loop.max_epochs = 3
    trainer.fit(model, loader(blobs(160), 32))
    assert record.seen == [
        ("batch 0.0", (0, 0, (1, 0, 0), (1, 0), (1, 0), False)),
        ("batch 0.4", (4, 4, (1, 0, 0), (5, 4), (5, 4), False)),
        ("end 0", (4, 4, (1, 1, 0), (5, 5), (5, 5), False)),
        ("batch 1.0", (5, 0, (2, 1, 1), (1, 0), (6, 5), False)),
        ("batch 1.4", (9, 4, (2, 1, 1), (5, 4), (10, 9), False)),
        ("end 1", (9, 4, (2, 2, 1), (5, 5), (10, 10), True)),
        ("batch 2.0", (10, 0, (3, 2, 2), (1, 0), (11, 10), False)),
        ("batch 2.4", (14, 4, (3, 2, 2), (5, 4), (15, 14), False)),
        ("end 2", (14, 4, (3, 3, 2), (5, 5), (15, 15), True)),
    ]
    assert (trainer.current_epoch, trainer.global_step) == (3, 15)
    assert trainer.fit_loop.epoch_loop.global_step == 15


def _weights(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def test_a_second_fit_trains_on_from_where_the_first_ended() -> None:
    # Plain SGD keeps no state and the loader does not shuffle: two epochs, then two
    # more in a second fit, are exactly four epochs in one fit.
    torch.manual_seed(0)
    straight = Classifier()
    continued = Classifier()
    continued.load_state_dict(straight.state_dict())
    trainkit.Trainer(max_epochs=4, **QUIET).fit(straight, loader(blobs(96)))
    trainer = trainkit.Trainer(max_epochs=2, **QUIET)
    trainer.fit(continued, loader(blobs(96)))
    trainer.fit_loop.max_epochs += 2
    trainer.fit(continued, loader(blobs(96)))
    assert (trainer.current_epoch, trainer.global_step, trainer.max_epochs) == (4, 12, 4)
    for got, want in zip(_weights(continued), _weights(straight), strict=True):
        assert torch.equal(got, want)


def test_a_second_fit_past_its_limits_trains_nothing_and_says_so() -> None:
    trainer = trainkit.Trainer(max_steps=3, **QUIET)
    model = Classifier()
    trainer.fit(model, loader(blobs(256)))
    before = _weights(model)
    with pytest.warns(UserWarning, match=r"fit trains nothing: the run is at epoch 1, step 3"):
        trainer.fit(model, loader(blobs(256)))
    assert trainer.global_step == 3
    assert all(map(torch.equal, _weights(model), before))
    trainer.fit_loop.epoch_loop.max_steps = 5  # Lightning's place for it
    trainer.fit(model, loader(blobs(256)))
    assert (trainer.global_step, trainer.max_steps, trainer.fit_loop.max_steps) == (5, 5, 5)


def test_a_new_trainer_a_failed_fit_or_a_checkpoint_start_from_their_own_progress(
    tmp_path: Path,
) -> None:
    trainer = trainkit.Trainer(max_epochs=2, default_root_dir=tmp_path, **QUIET)
    model = Classifier()

    class Fails(trainkit.Callback):
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            if trainer.global_step == 2:
                raise RuntimeError("boom")

    trainer.fit(model, loader(blobs(96)))
    trainer.save_checkpoint(tmp_path / "after-two.ckpt")
    failing = trainkit.Trainer(max_epochs=3, callbacks=[Fails()], **QUIET)
    with pytest.raises(RuntimeError, match="boom"):
        failing.fit(model, loader(blobs(96)))
    failing.callbacks.clear()
    failing.fit(model, loader(blobs(96)))  # not from step 2 of the failed fit: from zero
    assert (failing.current_epoch, failing.global_step) == (3, 9)
    # A checkpoint's progress replaces the Trainer's own.
    failing.fit_loop.max_epochs = 4
    failing.fit(model, loader(blobs(96)), ckpt_path=tmp_path / "after-two.ckpt")
    assert (failing.current_epoch, failing.global_step) == (4, 12)


def test_limits_set_while_fit_runs_hold_at_the_next_batch_or_epoch() -> None:
    class Shorten(trainkit.Callback):
        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            if trainer.current_epoch == 0:
                trainer.fit_loop.max_epochs = 2

    trainer = trainkit.Trainer(max_epochs=5, callbacks=[Shorten()], **QUIET)
    trainer.fit(Classifier(), loader(blobs(96)))
    assert (trainer.current_epoch, trainer.global_step, trainer.max_epochs) == (2, 6, 2)

    class CapSteps(trainkit.Callback):
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            if trainer.global_step == 4:
                trainer.fit_loop.epoch_loop.max_steps = 5

    trainer = trainkit.Trainer(max_epochs=5, callbacks=[CapSteps()], **QUIET)
    trainer.fit(Classifier(), loader(blobs(96)))
    assert (trainer.global_step, trainer.current_epoch) == (5, 2)  # mid-epoch: at once

    class HoldOn(trainkit.Callback):
        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            trainer.fit_loop.min_epochs = 3
            trainer.should_stop = True

    trainer = trainkit.Trainer(max_epochs=5, callbacks=[HoldOn()], **QUIET)
    with pytest.warns(UserWarning, match=r"a stop was requested, but min_epochs=3"):
        trainer.fit(Classifier(), loader(blobs(96)))
    assert trainer.current_epoch == 3 and trainer.fit_loop.min_epochs == 3


class CountValidation(trainkit.Callback):
    def __init__(self) -> None:
        self.runs: list[int] = []  # the global step of each validation inside fit

    def on_validation_start(self, trainer: Any, module: Any) -> None:
        if not trainer.sanity_checking:
            self.runs.append(trainer.global_step)


def test_loop_options_assigned_on_the_trainer_hold_for_the_next_run() -> None:
    # Lightning keeps them as plain attributes; ported code sets them before fit.
    counter = CountValidation()
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[counter], **QUIET)
    trainer.limit_train_batches = 2
    trainer.limit_val_batches = 1
    trainer.num_sanity_val_steps = 0
    trainer.check_val_every_n_epoch = 2
    trainer.fit(Classifier(), loader(blobs(96)), loader(blobs(64)))
    assert (trainer.global_step, counter.runs, trainer.num_val_batches) == (4, [4], [1])
    trainer.limit_test_batches = 1
    assert trainer.test(Classifier(), loader(blobs(64)), verbose=False)
    assert trainer.num_test_batches == [1]
    trainer.limit_val_batches = 0  # no validation at all: nothing to validate on
    assert trainer.validate(Classifier(), loader(blobs(64)), verbose=False) == []
    assert trainer.enable_validation is False
    with pytest.raises(ValueError, match=r"limit_val_batches"):
        trainer.limit_val_batches = -1  # checked as Trainer(...) checks it
    with pytest.raises(ValueError, match=r"log_every_n_steps"):
        trainer.log_every_n_steps = 0
    assert (trainer.limit_val_batches, trainer.log_every_n_steps) == (0, 50)


def test_limit_val_batches_0_while_fit_runs_ends_its_validation_even_at_a_stop() -> None:
    # A stop validates first (the run ends with metrics of its final weights); a
    # project stopping from outside sets limit_val_batches = 0 to skip that, as in Lightning.
    class StopWithoutValidating(trainkit.Callback):
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            if trainer.global_step == 4:  # epoch 1, its second batch of three
                trainer.should_stop = True
                trainer.limit_val_batches = 0

    counter = CountValidation()
    callbacks = [counter, StopWithoutValidating()]
    trainer = trainkit.Trainer(max_epochs=5, callbacks=callbacks, **QUIET)
    trainer.fit(Classifier(), loader(blobs(96)), loader(blobs(64)))
    assert (trainer.global_step, counter.runs) == (4, [3])  # epoch 0's only

    class Pause(trainkit.Callback):  # validation off for epoch 1, on again after it
        def on_train_epoch_start(self, trainer: Any, module: Any) -> None:
            trainer.limit_val_batches = 0 if trainer.current_epoch == 1 else 1.0

    counter = CountValidation()
    trainer = trainkit.Trainer(max_epochs=3, callbacks=[counter, Pause()], **QUIET)
    trainer.fit(Classifier(), loader(blobs(96)), loader(blobs(64)))
    assert counter.runs == [3, 9]


def test_log_every_n_steps_assigned_while_fit_runs_holds_from_the_next_step() -> None:
    class Often(trainkit.Callback):
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            if trainer.global_step == 3:
                trainer.log_every_n_steps = 2

    logger = MemoryLogger()
    trainer = trainkit.Trainer(max_steps=8, callbacks=[Often()], **{**QUIET, "logger": logger})
    with pytest.warns(UserWarning, match=r"fewer than the logging interval"):
        trainer.fit(Classifier(), loader(blobs(96)))  # the warning reads the option at the start
    assert len(logger.values("train/loss")) == 3  # steps 4, 6 and 8; none of 1-3 at 50


def test_wrong_values_and_writes_to_progress_are_errors_that_say_what_to_do() -> None:
    trainer = trainkit.Trainer(max_epochs=2, **QUIET)
    with pytest.raises(ValueError, match=r"max_epochs=-5 is invalid: it must be >= -1"):
        trainer.fit_loop.max_epochs = -5
    with pytest.raises(ValueError, match=r"min_steps"):
        trainer.fit_loop.epoch_loop.min_steps = -1
    assert trainer.max_epochs == 2  # nothing changed
    with pytest.raises(AttributeError, match=r"read-only in trainkit .*raise trainer.fit_loop"):
        trainer.fit_loop.epoch_progress.current.completed = 3  # type: ignore[misc]
    with pytest.raises(RuntimeError, match=r"works while fit runs"):
        trainer.fit_loop.setup_data()


def test_setup_data_in_configure_optimizers_finds_the_loader_set_up() -> None:
    seen: list[float] = []

    class Sized(Classifier):
        def configure_optimizers(self) -> Any:
            self.trainer.fit_loop.setup_data()
            seen.append(self.trainer.num_training_batches)
            return super().configure_optimizers()

    trainkit.Trainer(max_epochs=1, **QUIET).fit(Sized(), loader(blobs(96)))
    assert seen == [3]


class ReadsPrivateLoopState(Classifier):
    """Reads the two private loop attributes projects use (dataset.set_epoch, logging steps)."""

    def __init__(self) -> None:
        super().__init__()
        self.loaders: list[list[Any]] = []
        self.stepped: list[int] = []

    def on_train_epoch_start(self) -> None:
        self.loaders.append(self.trainer.fit_loop._combined_loader.flattened)

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.stepped.append(self.trainer.fit_loop.epoch_loop._batches_that_stepped)


def test_the_combined_loader_and_the_stepped_batches_lightnings_loops_keep() -> None:
    trainer = trainkit.Trainer(max_epochs=2, accumulate_grad_batches=2, **QUIET)
    assert trainer.fit_loop._combined_loader is None  # before any fit
    model = ReadsPrivateLoopState()
    data = blobs(128)
    trainer.fit(model, loader(data, 32))
    assert [[type(d).__name__ for d in flat] for flat in model.loaders] == [["DataLoader"]] * 2
    assert all(flat[0].dataset is data for flat in model.loaders)  # the data given
    assert model.stepped == [0, 1, 1, 2, 2, 3, 3, 4]  # steps taken, two batches a step


class TrainsOnA(ReadsPrivateLoopState):
    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return super().training_step(batch["a"], batch_idx)


def test_the_combined_loader_of_several_training_loaders_holds_each() -> None:
    both = {"a": loader(blobs(128), 32), "b": loader(blobs(64), 32)}
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(TrainsOnA(), both)
    combined = trainer.fit_loop._combined_loader
    assert combined.iterables.keys() == {"a", "b"} and len(combined.flattened) == 2


class RecordsRestarting(trainkit.Callback):
    def __init__(self) -> None:
        self.seen: list[tuple[str, int, bool]] = []

    def _see(self, trainer: Any, when: str) -> None:
        loop = trainer.fit_loop
        assert loop.epoch_loop.restarting == loop.restarting
        self.seen.append((when, trainer.current_epoch, loop.restarting))

    def on_train_start(self, trainer: Any, module: Any) -> None:
        self._see(trainer, "start")

    def on_train_epoch_start(self, trainer: Any, module: Any) -> None:
        self._see(trainer, "epoch start")

    def on_train_batch_start(self, trainer: Any, module: Any, batch: Any, i: int) -> None:
        if i == 4:
            self._see(trainer, "batch 4")

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        self._see(trainer, "epoch end")


@pytest.mark.parametrize(("saved_at", "restarts"), [("step=2", True), ("step=5", False)])
def test_restarting_holds_while_the_epoch_a_fit_resumed_inside_runs(
    tmp_path: Path, saved_at: str, restarts: bool
) -> None:
    # Five batches an epoch: step 2 is inside epoch 0, step 5 its end (the next fit
    # starts epoch 1 from its beginning, so nothing restarts).
    every = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=1, save_top_k=-1)
    options = {**QUIET, "enable_checkpointing": True}
    trainkit.Trainer(max_epochs=1, callbacks=[every], **options).fit(
        Classifier(), loader(blobs(160), 32)
    )
    (saved,) = tmp_path.glob(f"*{saved_at}.ckpt")
    record = RecordsRestarting()
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[record], **QUIET)
    assert not trainer.fit_loop.restarting  # before the fit
    trainer.fit(Classifier(), loader(blobs(160), 32), ckpt_path=saved)
    resumed = [("start", 0, True), ("epoch start", 0, True), ("batch 4", 0, True)]
    resumed.append(("epoch end", 0, True))
    next_epoch = [("epoch start", 1, False), ("batch 4", 1, False), ("epoch end", 1, False)]
    assert record.seen == (resumed + next_epoch if restarts else [("start", 1, False), *next_epoch])
    assert not trainer.fit_loop.restarting  # after it

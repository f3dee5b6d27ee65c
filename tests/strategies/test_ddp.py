"""DDP over real gloo processes: same answer as one process, rank-0-only writing."""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.distributed import workers
from tests.distributed.spawn import run_processes

TWO_GPUS = pytest.param(
    "cuda",
    marks=[
        pytest.mark.gpu,
        pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices"),
    ],
)


@pytest.mark.parametrize("device", ["cpu", TWO_GPUS])
def test_two_processes_at_half_batch_match_one_process_at_full_batch(
    tmp_path: Path, device: str
) -> None:
    # On CUDA each process trains on its own GPU (cuda:0, cuda:1) over NCCL.
    ranks = run_processes(workers.train, 2, "ddp", 16, 12, str(tmp_path), device)
    (single,) = [workers.train("single_device", 32, 12, None, device)]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert [r["device"] for r in ranks] == (
        ["cuda:0", "cuda:1"] if device == "cuda" else ["cpu"] * 2
    )
    assert ranks[0]["batches"] == 8  # each rank sees half of the 16 global batches of an epoch
    for name, expected in single["state"].items():
        for rank in ranks:
            torch.testing.assert_close(
                rank["state"][name],
                expected,
                rtol=1e-5,
                atol=1e-6,
                msg=f"{name} on rank {rank['rank']}",
            )
    # Only rank 0 wrote logs and checkpoints.
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["version_0"]
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()


def test_layers_built_in_configure_model_are_replicated_and_trained() -> None:
    # Each rank builds different first weights: DDP starts every rank from rank 0's.
    ranks = run_processes(workers.train_late_built, 2, 3)
    assert [rank["steps"] for rank in ranks] == [3, 3]
    for name, value in ranks[0]["state"].items():
        assert torch.equal(ranks[1]["state"][name], value), name


def test_a_size_not_divisible_by_the_processes_matches_one_process_with_drop_last() -> None:
    # 203 samples on 2 ranks: drop_last=True leaves one out instead of repeating one,
    # and then two processes at batch 16 equal one process at batch 32 (two epochs).
    ranks = run_processes(workers.train_uneven, 2, "ddp", 16, 12)
    single = workers.train_uneven("single_device", 32, 12)
    for name, expected in single["state"].items():
        for rank in ranks:
            torch.testing.assert_close(rank["state"][name], expected, rtol=1e-5, atol=1e-6)


def test_repeated_samples_are_announced_with_the_way_to_avoid_them() -> None:
    from torch.utils.data import DataLoader

    from tests.helpers import blobs
    from trainkit.distributed.sampling import training_sampler

    with pytest.warns(UserWarning, match=r"203 samples.*repeats 1 of them.*drop_last=True"):
        training_sampler(DataLoader(blobs(203), batch_size=16), 2, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        training_sampler(DataLoader(blobs(203), batch_size=16, drop_last=True), 2, 0)
        training_sampler(DataLoader(blobs(203), batch_size=16), 2, 1)  # rank 0 says it once


def test_a_signal_on_one_rank_stops_every_rank_at_the_same_step(tmp_path: Path) -> None:
    ranks = run_processes(workers.preempt_one_rank, 2, str(tmp_path))
    # Both ranks saved together and stopped: a rank left waiting in a collective the
    # other had left would fail at the process-group timeout (30 s), not exit 0.
    # (No wall-clock bound: on a loaded machine the job itself can take over 30 s.)
    assert [r["exit"] for r in ranks] == [0, 0]
    assert [r["preempted"] for r in ranks] == [True, True]
    assert ranks[0]["step"] == ranks[1]["step"] < 50 * 8
    checkpoint = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["loop"]["global_step"] == ranks[0]["step"]


def test_max_time_stops_every_rank_at_the_same_step_whatever_its_clock() -> None:
    # Rank 1 reads the clock later in each batch than rank 0. Were each rank to stop
    # by its own clock, rank 1 would leave the epoch a batch early and rank 0 wait in
    # the next step's gradient reduction until the process-group timeout (30 s).
    ranks = run_processes(workers.stop_at_max_time, 2)
    assert ranks[0] == ranks[1]
    # Stopped inside the first epoch, after validating the weights it ends with.
    assert 0 < ranks[0]["step"] < 512
    assert ranks[0]["validations"] == 1


def test_sync_dist_step_values_are_reduced_for_decisions_and_at_the_epochs_end(
    tmp_path: Path,
) -> None:
    # A ModelCheckpoint ranking a per-step value logged with sync_dist=True ranks
    # the mean over the processes (rank + batch index: 1.5 at step 2, 3.5 at step 4),
    # without the warning meant for values logged without it.
    ranks = run_processes(workers.rank_sync_dist_step_values, 2, str(tmp_path))
    for rank in ranks:
        assert (rank["best"], rank["score"]) == ("epoch=0-step=4.ckpt", 3.5)
        assert not [w for w in rank["warnings"] if "different values" in w]
        # After the epoch, every process holds the reduced values.
        assert rank["after"] == {"rank/mean": 3.5, "rank/max_epoch": 1.0}
    # Between the loggers' writes, a callback reads each process's own step value
    # (reducing it after every step would cost a collective per step).
    for rank, seen in enumerate(r["seen"] for r in ranks):
        assert [s["rank/own"] for s in seen] == [float(rank)] * 4
        assert [s["rank/mean"] for s in seen] == [rank + i for i in range(4)]


def test_early_stopping_on_one_rank_is_every_ranks_with_its_stopped_epoch() -> None:
    # val/score is logged without sync_dist: rank 1's stalls and stops it after the
    # second check (epoch 1); rank 0, whose own value rises, records the same stop.
    first, second = run_processes(workers.early_stop_on_one_rank, 2)
    assert first["stopped_epoch"] == second["stopped_epoch"] == 1
    assert first["epoch"] == second["epoch"] == 2
    assert first["reason"] is None and "did not improve" in second["reason"]


def test_a_prediction_writer_knows_which_samples_each_process_predicted() -> None:
    # 21 samples over 2 processes: rank 0 predicts 0, 2, ..., 20 and rank 1 the odd
    # ones, each sample once; the indices say which prediction is which sample's.
    ranks = run_processes(workers.predict_with_a_writer, 2)
    seen: list[int] = []
    for rank, written in enumerate(ranks):
        (batches,) = written["batch_indices"]
        assert [i for batch in batches for i in batch] == list(range(rank, 21, 2))
        for indices, prediction in zip(batches, written["predictions"], strict=True):
            assert torch.equal(written["expected"][indices], prediction)
        seen += [i for batch in batches for i in batch]
    assert sorted(seen) == list(range(21))


def test_a_nan_loss_on_one_rank_skips_that_step_on_every_rank() -> None:
    # The gradient reduction carries rank 1's NaN into rank 0's gradients: a step
    # taken by rank 0 alone would make its weights NaN (and rank 1's at the next).
    first, second = run_processes(workers.skip_a_nan_step, 2)
    assert first["skipped"] == second["skipped"] == [2]
    for name, value in first["state"].items():
        assert torch.isfinite(value).all() and torch.equal(value, second["state"][name]), name


def test_a_resume_under_another_number_of_processes_continues_the_epoch(tmp_path: Path) -> None:
    # 6 steps of global batch 32 from one process at batch 32 (ddp, devices=1):
    (reference,) = run_processes(workers.train_resumable, 1, 32, 6, str(tmp_path / "one"))
    # 2 processes at 16 save after step 3 (96 samples into the epoch); 1 process at 32
    # resumes there: the same samples follow, in the same order.
    run_processes(workers.train_resumable, 2, 16, 6, str(tmp_path / "two"))
    saved = tmp_path / "two" / "ckpts" / "stepstep=3.ckpt"
    (resumed,) = run_processes(
        workers.train_resumable, 1, 32, 6, str(tmp_path / "resumed"), str(saved)
    )
    for key, value in reference["state"].items():
        torch.testing.assert_close(resumed["state"][key], value, rtol=1e-5, atol=1e-6)
    # And back: 1 process's step-3 checkpoint resumed on 2 processes.
    saved_by_one = tmp_path / "one" / "ckpts" / "stepstep=3.ckpt"
    ranks = run_processes(
        workers.train_resumable, 2, 16, 6, str(tmp_path / "back"), str(saved_by_one)
    )
    for key, value in reference["state"].items():
        torch.testing.assert_close(ranks[0]["state"][key], value, rtol=1e-5, atol=1e-6)
    # 96 samples are not a whole number of 64-sample steps: refused, not guessed.
    with pytest.raises(AssertionError, match="not a whole number"):
        run_processes(workers.train_resumable, 1, 64, 6, str(tmp_path / "bad"), str(saved))


def test_validation_over_an_uneven_split_equals_one_process() -> None:
    ranks = run_processes(workers.validate, 2, "ddp")
    single = workers.validate("single_device")
    assert ranks[0] == ranks[1]
    assert ranks[0] == pytest.approx(single, abs=1e-6)


def test_an_interactive_session_cannot_be_re_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import trainkit

    monkeypatch.setattr(sys, "argv", ["-c"])
    with pytest.raises(RuntimeError, match=r"cannot be re-run.*torchrun --nproc-per-node 2"):
        trainkit.Trainer(accelerator="cpu", devices=2, strategy="ddp")


def test_the_process_group_timeout_is_a_trainer_option(monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import timedelta

    import trainkit

    # As under torchrun with one process: nothing is launched.
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(key, value)
    trainer = trainkit.Trainer(accelerator="cpu", strategy="ddp", process_group_timeout=7)
    assert trainer.strategy.timeout == timedelta(seconds=7)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="process_group_timeout=0 must be a positive"):
        trainkit.Trainer(accelerator="cpu", strategy="ddp", process_group_timeout=0)


def test_values_each_process_logged_for_itself_give_every_process_rank_zeros_decisions(
    tmp_path: Path,
) -> None:
    # Each rank logs its own val/score (no sync_dist): rank 0's rises, rank 1's falls.
    # Every rank must still save the same checkpoints (a rank that saves alone waits
    # for the others at the write) and step the plateau scheduler alike (else their
    # learning rates, and so their parameters, drift apart).
    ranks = run_processes(workers.decide_on_own_scores, 2, str(tmp_path), timeout=240)
    first, second = ranks
    best = str(tmp_path / "epoch=2-step=6.ckpt")
    assert first["best_model_path"] == second["best_model_path"] == best
    assert first["best_k_models"] == second["best_k_models"] == {best: 2.0}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch=2-step=6.ckpt", "last.ckpt"]
    # Rank 0's score never stalls, so no process lowered its learning rate.
    assert first["lr"] == second["lr"] == 0.1
    for name, value in first["state"].items():
        assert torch.equal(value, second["state"][name]), name
    # Rank 0 says once, for each decision, that the processes' values differ.
    said = [w for w in first["warnings"] if "logged without sync_dist=True" in w]
    assert len(said) == 2, said
    assert any(w.startswith("ModelCheckpoint(monitor='val/score')") for w in said)
    assert any(w.startswith("The LR scheduler monitors 'val/score'") for w in said)


def test_a_barrier_one_process_alone_reaches_is_named_on_every_process() -> None:
    # Rank 1 waits at a barrier that rank 0 never reaches: both end at once with the
    # two places named (the group's timeout is 120 s), neither pairs it with another wait.
    started = time.monotonic()
    messages = run_processes(workers.barrier_on_one_rank, 2)
    for message in messages:
        assert "the processes reached different synchronisation points" in message
        assert "process 0 at the end of an epoch of training" in message
        assert 'process 1 at the barrier "rank one\'s own"' in message
        assert "Every process must reach a barrier" in message and "rank_zero_only" not in message
    assert time.monotonic() - started < 100


class CountingStream(torch.utils.data.IterableDataset[int]):
    """An iterable dataset: it gives its own order (and would split it by rank itself)."""

    def __iter__(self) -> Any:
        return iter(range(8))


def test_a_loader_over_an_iterable_dataset_gets_no_sampler() -> None:
    # torch refuses a sampler with an iterable dataset; each process iterates it as given.
    from torch.utils.data import DataLoader

    from trainkit.strategies.ddp import DDPStrategy

    strategy = DDPStrategy()
    stream = DataLoader(CountingStream(), batch_size=2)
    for training in (True, False):
        assert strategy.prepare_dataloader(stream, training=training) is stream
    mapped = strategy.prepare_dataloader(DataLoader(list(range(8)), batch_size=2), training=False)
    assert type(mapped.sampler).__name__ == "EvenSplitSampler"  # a map-style one is split


def test_a_sampler_of_the_users_own_is_kept_each_process_taking_its_share() -> None:
    # A WeightedRandomSampler that draws only two samples: replacing it with a plain
    # distributed split would train on every sample, silently.
    ranks = run_processes(workers.train_weighted, 2, 2)
    for rank in ranks:
        assert set(rank["seen"]) <= set(rank["allowed"])
        assert len(rank["seen"]) == 16  # 2 epochs of 8 of the 16 draws each
    # Evaluation over a subset: the processes together evaluate each picked sample once.
    losses = run_processes(workers.validate_subset, 2, "ddp")
    single = workers.validate_subset("single_device")
    # Each process's mean is over its share (4 and 3 samples: none padded in).
    assert (4 * losses[0] + 3 * losses[1]) / 7 == pytest.approx(single, abs=1e-6)

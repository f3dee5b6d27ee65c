"""Functions the distributed tests run in each process (spawn imports them by name)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, DistributedSampler

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader


class SyncedClassifier(Classifier):
    """Logs validation accuracy reduced across processes."""

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        accuracy = (self(x).argmax(dim=1) == y).float().mean()
        self.log("val/acc", accuracy, sync_dist=True)


def train(
    strategy: str, batch_size: int, steps: int, root: str | None, accelerator: str = "cpu"
) -> dict[str, Any]:
    """Train the blob classifier; DDP shuffles with a DistributedSampler seeded by ``seed``."""
    torch.manual_seed(0)
    model = Classifier(lr=0.2)
    data = blobs(256, seed=0)
    if strategy == "ddp":
        loader: Any = DataLoader(data, batch_size=batch_size, shuffle=True)  # automatic sampler
    else:
        # The same permutation a DistributedSampler draws, as one process's order.
        sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=7)
        loader = DataLoader(data, batch_size=batch_size, sampler=sampler)
    options = {**QUIET, "accelerator": accelerator, "enable_checkpointing": root is not None}
    if root is not None:
        options["logger"] = trainkit.loggers.CSVLogger(root)
    trainer = trainkit.Trainer(
        max_steps=steps,
        strategy=strategy,
        seed=7,
        log_every_n_steps=1,
        default_root_dir=root,
        **options,
    )
    trainer.fit(model, loader)
    return {
        "rank": trainer.strategy.global_rank,
        "device": str(next(model.parameters()).device),
        "state": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        "batches": trainer.num_training_batches,
    }


def train_uneven(strategy: str, batch_size: int, steps: int) -> dict[str, Any]:
    """Like :func:`train` on 203 samples (not a multiple of 2) with ``drop_last=True``."""
    torch.manual_seed(0)
    model = Classifier(lr=0.2)
    data = blobs(203, seed=0)
    if strategy == "ddp":
        loader: Any = DataLoader(data, batch_size=batch_size, shuffle=True, drop_last=True)
    else:
        sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=7)
        loader = DataLoader(data, batch_size=batch_size, sampler=sampler, drop_last=True)
    trainer = trainkit.Trainer(max_steps=steps, strategy=strategy, seed=7, **QUIET)
    trainer.fit(model, loader)
    return {"state": {k: v.clone() for k, v in model.state_dict().items()}}


class LateBuilt(Classifier):
    """Classifier whose network ``configure_model`` builds."""

    def __init__(self) -> None:
        super().__init__(lr=0.2)
        del self.net
        self.net: torch.nn.Module | None = None

    def configure_model(self) -> None:
        if self.net is None:
            self.net = torch.nn.Sequential(
                torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3)
            )


def train_late_built(steps: int) -> dict[str, Any]:
    """Train :class:`LateBuilt` under DDP (each rank builds its own first weights)."""
    torch.manual_seed(int(os.environ["RANK"]))
    model = LateBuilt()
    trainer = trainkit.Trainer(max_steps=steps, strategy="ddp", **QUIET)
    trainer.fit(model, DataLoader(blobs(256, seed=0), batch_size=16, shuffle=True))
    return {
        "steps": trainer.global_step,
        "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
    }


class SignalledOnOneRank(Classifier):
    """Rank 1 alone receives SIGTERM during step 3 (as when a node is being drained)."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.trainer.strategy.global_rank == 1 and self.global_step == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return super().training_step(batch, batch_idx)


def preempt_one_rank(root: str) -> dict[str, Any]:
    trainer = trainkit.Trainer(
        max_epochs=50,
        strategy="ddp",
        process_group_timeout=30,
        default_root_dir=root,
        **{**QUIET, "enable_checkpointing": True},
    )
    exit_code = None
    try:
        trainer.fit(SignalledOnOneRank(), DataLoader(blobs(256), batch_size=16, shuffle=True))
    except SystemExit as stop:
        exit_code = stop.code
    return {"exit": exit_code, "preempted": trainer.preempted, "step": trainer.global_step}


class LateOnOneRank(Classifier):
    """Rank 1 reads the clock 50 ms after rank 0 at every batch (each step syncs them).

    So rank 1 sees max_time pass first, almost always a batch before rank 0 does.
    """

    def __init__(self) -> None:
        super().__init__()
        self.validations = 0

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.trainer.strategy.global_rank == 1:
            time.sleep(0.05)

    def on_validation_end(self) -> None:
        self.validations += 1


def stop_at_max_time() -> dict[str, Any]:
    trainer = trainkit.Trainer(
        max_epochs=100_000,
        max_time={"seconds": 1},
        strategy="ddp",
        process_group_timeout=30,
        num_sanity_val_steps=0,
        limit_val_batches=1,
        **QUIET,
    )
    model = LateOnOneRank()
    # One epoch is 512 batches (over 25 s): the time runs out inside it, which then
    # validates first.
    data = DataLoader(blobs(2 * 512), batch_size=1)
    trainer.fit(model, data, DataLoader(blobs(16), batch_size=8))
    return {
        "step": trainer.global_step,
        "epoch": trainer.current_epoch,
        "validations": model.validations,
    }


def train_resumable(
    batch_size: int, steps: int, root: str, ckpt_path: str | None = None
) -> dict[str, Any]:
    """DDP over however many processes run this, saving a checkpoint every 3 steps."""
    torch.manual_seed(0)
    model = Classifier(lr=0.2)
    saver = trainkit.callbacks.ModelCheckpoint(
        dirpath=Path(root, "ckpts"), filename="step{step}", every_n_train_steps=3, save_top_k=-1
    )
    trainer = trainkit.Trainer(
        max_steps=steps,
        strategy="ddp",
        seed=7,
        callbacks=[saver],
        default_root_dir=root,
        **{**QUIET, "enable_checkpointing": True},
    )
    data = DataLoader(blobs(256, seed=0), batch_size=batch_size, shuffle=True)
    trainer.fit(model, data, ckpt_path=ckpt_path)
    return {"state": {k: v.clone() for k, v in model.state_dict().items()}}


class OwnScores(Classifier):
    """Logs a score each process computes for itself, without sync_dist.

    Rank 0's rises every epoch and rank 1's falls: ranked on its own values,
    rank 0 would save a new best checkpoint and lower no learning rate while
    rank 1 did the opposite.
    """

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        direction = 1.0 if self.trainer.global_rank == 0 else -1.0
        self.log("val/score", direction * self.current_epoch)

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="max", factor=0.5, patience=0
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": plateau, "monitor": "val/score"},
        }


def decide_on_own_scores(root: str) -> dict[str, Any]:
    """Fit :class:`OwnScores` for 3 epochs with a ModelCheckpoint ranking ``val/score``."""
    import warnings

    torch.manual_seed(0)
    model = OwnScores()
    saver = trainkit.callbacks.ModelCheckpoint(
        dirpath=root, monitor="val/score", mode="max", save_top_k=1, save_last=True
    )
    trainer = trainkit.Trainer(
        max_epochs=3,
        strategy="ddp",
        seed=7,
        callbacks=[saver],
        process_group_timeout=60,
        **{**QUIET, "enable_checkpointing": True},
    )
    data = DataLoader(blobs(64, seed=0), batch_size=16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(model, data, data)
    return {
        "best_k_models": {path: float(score) for path, score in saver.best_k_models.items()},
        "best_model_path": saver.best_model_path,
        "lr": trainer.optimizers[0].param_groups[0]["lr"],
        "state": {k: v.clone() for k, v in model.state_dict().items()},
        "warnings": [str(w.message) for w in caught],
    }


class RankLogged(Classifier):
    """Logs its rank per step, with sync_dist=True, and as each process's own."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        rank = torch.tensor(float(self.global_rank))
        self.log("rank/mean", rank + batch_idx, sync_dist=True)
        self.log("rank/max", rank, sync_dist=True, reduce_fx="max", on_epoch=True)
        self.log("rank/own", rank)
        return super().training_step(batch, batch_idx)


class ReadAfterEachBatch(trainkit.Callback):
    """Records ``callback_metrics`` after every training batch."""

    def __init__(self) -> None:
        self.seen: list[dict[str, float]] = []

    def on_train_batch_end(
        self, trainer: Any, module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        metrics = trainer.callback_metrics
        self.seen.append({name: float(metrics[name]) for name in ("rank/mean", "rank/own")})


def rank_sync_dist_step_values(root: str) -> dict[str, Any]:
    import warnings

    reader = ReadAfterEachBatch()
    saver = trainkit.callbacks.ModelCheckpoint(
        dirpath=root, monitor="rank/mean", mode="max", every_n_train_steps=2, save_top_k=1
    )
    trainer = trainkit.Trainer(
        max_epochs=1,
        strategy="ddp",
        callbacks=[reader, saver],
        log_every_n_steps=50,
        **{**QUIET, "enable_checkpointing": True},
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(RankLogged(), DataLoader(blobs(64), batch_size=8))
    metrics = trainer.callback_metrics
    return {
        "seen": reader.seen,
        "best": Path(saver.best_model_path).name,
        "score": float(saver.best_model_score),
        "after": {name: float(metrics[name]) for name in ("rank/mean", "rank/max_epoch")},
        "warnings": [str(w.message) for w in caught],
    }


class RankOneStalls(Classifier):
    """Logs val/score without sync_dist: rank 0's keeps rising, rank 1's never moves."""

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        rank, epoch = self.trainer.strategy.global_rank, self.current_epoch
        self.log("val/score", torch.tensor(float(epoch if rank == 0 else 0.0)))


def early_stop_on_one_rank() -> dict[str, Any]:
    stopper = trainkit.callbacks.EarlyStopping(monitor="val/score", mode="max", patience=1)
    trainer = trainkit.Trainer(
        max_epochs=6, strategy="ddp", callbacks=[stopper], limit_val_batches=1, **QUIET
    )
    trainer.fit(RankOneStalls(), DataLoader(blobs(32), batch_size=8), loader(blobs(16), 8))
    return {
        "stopped_epoch": stopper.stopped_epoch,
        "epoch": trainer.current_epoch,
        "reason": stopper.stopping_reason,
    }


class IndexWriter(trainkit.callbacks.BasePredictionWriter):
    """Keeps what a prediction writer is given at the end: predictions and their indices."""

    def __init__(self) -> None:
        super().__init__("epoch")
        self.written: dict[str, Any] = {}

    def write_on_epoch_end(
        self, trainer: Any, pl_module: Any, predictions: Any, batch_indices: Any
    ) -> None:
        self.written = {"predictions": predictions, "batch_indices": batch_indices}


def predict_with_a_writer() -> dict[str, Any]:
    writer = IndexWriter()
    trainer = trainkit.Trainer(strategy="ddp", callbacks=[writer], **QUIET)
    torch.manual_seed(0)
    model = Classifier()
    trainer.predict(model, DataLoader(blobs(21), batch_size=4), return_predictions=False)
    with torch.no_grad():
        expected = model(blobs(21).tensors[0]).argmax(dim=1)
    return {**writer.written, "expected": expected}


class NaNOnRankOne(Classifier):
    """Rank 1's loss is NaN at step 2 (its data alone, as a bad sample would do)."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        if self.trainer.strategy.global_rank == 1 and self.global_step == 2:
            loss = loss * float("nan")
        return loss


def skip_a_nan_step() -> dict[str, Any]:
    skipper = trainkit.callbacks.NonFiniteLoss("skip")
    trainer = trainkit.Trainer(max_epochs=1, strategy="ddp", callbacks=[skipper], **QUIET)
    torch.manual_seed(0)
    model = NaNOnRankOne()
    trainer.fit(model, DataLoader(blobs(64), batch_size=8))
    return {
        "skipped": skipper.skipped_steps,
        "state": {k: v.clone() for k, v in model.state_dict().items()},
    }


class BarrierOnRankOne(trainkit.Callback):
    """Rank 1 alone waits at a barrier after the first epoch (rank 0 goes on)."""

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        if trainer.global_rank == 1:
            trainer.strategy.barrier("rank one's own")


def barrier_on_one_rank() -> str:
    """Fit with :class:`BarrierOnRankOne`; the error each rank ends with."""
    from trainkit.distributed.control import CollectiveMismatchError

    trainer = trainkit.Trainer(
        max_epochs=2,
        strategy="ddp",
        callbacks=[BarrierOnRankOne()],
        process_group_timeout=120,
        **QUIET,
    )
    try:
        trainer.fit(Classifier(), DataLoader(blobs(64), batch_size=16))
    except CollectiveMismatchError as error:
        return str(error)
    return "no error"


def validate(strategy: str) -> float:
    model = SyncedClassifier()
    torch.manual_seed(3)
    for parameter in model.parameters():
        torch.nn.init.normal_(parameter)
    trainer = trainkit.Trainer(strategy=strategy, **QUIET)
    data = DataLoader(blobs(103, seed=5), batch_size=10)  # 103: not divisible by 2
    return trainer.validate(model, data)[0]["val/acc"]


def train_with_lightnings_ddp_strategy(hooked: bool) -> dict[str, Any]:
    """Three steps under ``trainkit.lightning.strategies.DDPStrategy`` with Lightning's
    arguments; with ``hooked``, a communication hook that counts its calls."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    from trainkit.lightning.strategies import DDPStrategy

    calls = {"count": 0}

    # No annotations: DDP checks them against dist.GradBucket and Future[Tensor], and
    # this module's annotations are strings.
    def counting_allreduce(state, bucket):  # type: ignore[no-untyped-def]
        state["count"] += 1
        return default_hooks.allreduce_hook(None, bucket)  # type: ignore[arg-type]

    options: dict[str, Any] = {"process_group_backend": "gloo", "gradient_as_bucket_view": True}
    if hooked:
        options.update(ddp_comm_hook=counting_allreduce, ddp_comm_state=calls)
    torch.manual_seed(0)
    model = Classifier(lr=0.2)
    trainer = trainkit.Trainer(max_steps=3, strategy=DDPStrategy(**options), seed=7, **QUIET)
    trainer.fit(model, DataLoader(blobs(256, seed=0), batch_size=16, shuffle=True))
    strategy = trainer.strategy
    return {
        "calls": calls["count"],
        "sampler": trainer.distributed_sampler_kwargs,
        "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
        # Lightning's ParallelStrategy attributes, as a Lightning callback reads them.
        # Lightning's private connector, as projects read it.
        "connector": (
            trainer._accelerator_connector.is_distributed,
            trainer._accelerator_connector._strategy_flag,
            trainer._accelerator_connector._devices_flag,
            trainer._accelerator_connector._parallel_devices,
            trainer._accelerator_connector.use_distributed_sampler,
        ),
        "attributes": {
            "num_nodes": strategy.num_nodes,
            "node_rank": strategy.node_rank,
            "num_processes": strategy.num_processes,
            "parallel_devices": strategy.parallel_devices,
            "optimizers": [
                a is b for a, b in zip(strategy.optimizers, trainer.optimizers, strict=True)
            ],
            "gathered": tuple(strategy.all_gather(torch.tensor([1.0])).shape),
            "device_ids": trainer.device_ids,
            "environment": (
                type(strategy.cluster_environment).__name__,
                strategy.cluster_environment.global_rank(),
                strategy.cluster_environment.world_size(),
                strategy.cluster_environment.local_rank(),
                strategy.cluster_environment.node_rank(),
                strategy.cluster_environment.main_port == int(os.environ["MASTER_PORT"]),
            ),
        },
    }


class _RankTagged(torch.utils.data.TensorDataset):
    """A dataset a strategy's process_dataloader tells which rank reads it."""

    rank: int | None = None


def hooks_of_a_lightning_ddp_subclass() -> dict[str, Any]:
    """A subclass of Lightning's DDPStrategy that overrides the hooks Lightning calls
    (setup, configure_ddp, process_dataloader), as projects write them: what each saw."""
    from torch.nn.parallel import DistributedDataParallel

    from trainkit.lightning.strategies import DDPStrategy

    calls: list[tuple[str, str, str]] = []
    reached: list[bool] = []

    class Grouped(DDPStrategy):
        def setup(self, trainer: Any) -> None:
            calls.append(("setup", trainer.state.fn, type(self.model).__name__))
            super().setup(trainer)
            wrapped = isinstance(self.model, DistributedDataParallel)
            calls.append(("setup done", trainer.state.fn, "ddp" if wrapped else "module"))
            # Projects reach the Module's attributes through the wrapper, as under Lightning.
            reached.append(getattr(trainer.model, "module", trainer.model).net is model.net)

        def configure_ddp(self) -> None:
            calls.append(("configure_ddp", "", type(self.model).__name__))
            super().configure_ddp()

        def process_dataloader(self, dataloader: Any) -> Any:
            dataloader.dataset.rank = self.global_rank
            calls.append(("process_dataloader", "", type(dataloader.sampler).__name__))
            return super().process_dataloader(dataloader)

    data = _RankTagged(*blobs(64).tensors)
    trainer = trainkit.Trainer(max_steps=2, strategy=Grouped(process_group_backend="gloo"), **QUIET)
    model = Classifier()
    trainer.fit(model, DataLoader(data, batch_size=16))
    trainer.validate(model, DataLoader(data, batch_size=16))
    strategy = type(trainer.strategy).__name__
    return {"calls": calls, "tagged": data.rank, "strategy": strategy, "reached": reached}


def own_sampler_kept() -> list[int]:
    """The samples one rank trains on in two epochs when a DataModule's ``setup`` turns
    the distributed sampler off through Lightning's connector and splits the data
    itself, and a callback turns it on again after the first epoch."""
    from torch.utils.data import Subset, TensorDataset

    class Halves(trainkit.DataModule):
        def setup(self, stage: str) -> None:
            self.trainer._accelerator_connector.use_distributed_sampler = False

        def train_dataloader(self) -> DataLoader[Any]:
            # Sample i is [i, i]; rank 0 takes samples 0-3, rank 1 samples 4-7.
            data = TensorDataset(torch.arange(8.0).repeat(2, 1).T, torch.zeros(8).long())
            rank = self.trainer.global_rank
            return DataLoader(Subset(data, range(4 * rank, 4 * rank + 4)), batch_size=2)

    seen: list[int] = []

    class Record(trainkit.Callback):
        def on_train_batch_start(self, trainer: Any, module: Any, batch: Any, i: int) -> None:
            seen.extend(int(x) for x in batch[0][:, 0])

        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            # Back on for the next epoch's loaders: the sampler shares the rank's half.
            trainer._accelerator_connector.use_distributed_sampler = True

    trainer = trainkit.Trainer(
        max_epochs=2,
        strategy="ddp",
        reload_dataloaders_every_n_epochs=1,
        callbacks=[Record()],
        **QUIET,
    )
    trainer.fit(Classifier(features=2, classes=2), datamodule=Halves())
    return seen


def unused(path: Path) -> None:  # pragma: no cover - keeps Path imported for typing
    del path


def shared_folders(common: str, own_root: str) -> dict[str, bool]:
    """is_shared_filesystem, inside a DDP fit, of a folder both ranks see and of a
    folder of each rank's own (same name under different roots, one per rank)."""
    from trainkit.lightning.utilities import is_shared_filesystem

    own = Path(own_root) / f"rank{os.environ['RANK']}"
    own.mkdir(parents=True)
    seen: dict[str, bool] = {}

    class Probe(trainkit.Callback):
        def on_train_start(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
            strategy = trainer.strategy
            seen["common"] = is_shared_filesystem(strategy, common)
            seen["own"] = is_shared_filesystem(strategy, own, timeout=0.5)
            seen["url"] = is_shared_filesystem(strategy, "s3://bucket/run")

    trainer = trainkit.Trainer(max_steps=1, strategy="ddp", callbacks=[Probe()], **QUIET)
    trainer.fit(Classifier(), DataLoader(blobs(16), batch_size=4))
    seen["left_behind"] = any(Path(common).glob(".trainkit-shared-*"))
    return seen


def loader_lengths(empty_rank: int, allow: bool) -> str:
    """has_len_all_ranks inside a DDP fit, where rank ``empty_rank``'s loader is empty:
    what it returned, or the error it raised."""
    from trainkit.lightning.utilities.data import has_len_all_ranks

    rank = int(os.environ["RANK"])
    loader = DataLoader(blobs(0 if rank == empty_rank else 8), batch_size=4)
    outcome: list[str] = []

    class Probe(trainkit.Callback):
        def on_train_start(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
            try:
                outcome.append(str(has_len_all_ranks(loader, trainer.strategy, allow)))
            except RuntimeError as error:
                outcome.append(f"RuntimeError: {error}")

    trainer = trainkit.Trainer(max_steps=1, strategy="ddp", callbacks=[Probe()], **QUIET)
    trainer.fit(Classifier(), DataLoader(blobs(16), batch_size=4))
    return outcome[0]


class RecordsSamples(Classifier):
    """Records the samples (by their first feature) each of its steps trains on."""

    def __init__(self) -> None:
        super().__init__(lr=0.2)
        self.seen: list[float] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.seen += [round(float(v), 4) for v in batch[0][:, 0]]
        return super().training_step(batch, batch_idx)


def train_weighted(epochs: int) -> dict[str, Any]:
    """A training loader with a WeightedRandomSampler that draws only samples 3 and 7."""
    from torch.utils.data import WeightedRandomSampler

    torch.manual_seed(torch.distributed.get_rank() if torch.distributed.is_initialized() else 0)
    data = blobs(16, seed=0)
    weights = torch.zeros(16)
    weights[[3, 7]] = 1.0
    sampler = WeightedRandomSampler(weights, num_samples=16, replacement=True)
    model = RecordsSamples()
    trainer = trainkit.Trainer(max_epochs=epochs, strategy="ddp", seed=7, **QUIET)
    trainer.fit(model, DataLoader(data, batch_size=4, sampler=sampler))
    allowed = {round(float(data.tensors[0][i, 0]), 4) for i in (3, 7)}
    return {"seen": model.seen, "allowed": sorted(allowed)}


def validate_subset(strategy: str) -> float:
    """val/loss over the samples a SubsetRandomSampler picks out of 40."""
    from torch.utils.data import SubsetRandomSampler

    torch.manual_seed(0)
    model = Classifier()
    sampler = SubsetRandomSampler([0, 3, 5, 8, 13, 21, 34])
    trainer = trainkit.Trainer(strategy=strategy, **QUIET)
    trainer.validate(model, DataLoader(blobs(40), batch_size=4, sampler=sampler), verbose=False)
    return float(trainer.callback_metrics["val/loss"])

"""Checkpoints in Lightning's format: reading Lightning 2.x files, writing Lightning's keys.

The Lightning files are built here in Lightning's documented layout (Lightning is
not a dependency): ``epoch``, ``global_step``, ``pytorch-lightning_version``,
``state_dict``, ``loops``, ``callbacks``, ``optimizer_states``, ``lr_schedulers``,
``hparams_name``, ``hyper_parameters``.
"""

from __future__ import annotations

import copy
import pickle
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, BlobData, Classifier, blobs, loader
from trainkit.callbacks import EarlyStopping, ModelCheckpoint
from trainkit.checkpoint import files as checkpoint_io
from trainkit.checkpoint.files import CheckpointError, load


class Momentum(Classifier):
    """Classifier with optimizer and scheduler state worth restoring."""

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)
        return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)]


class Recorder(trainkit.Callback):
    """What a resumed run starts from, and each batch's (epoch, batch_idx, global_step)."""

    def __init__(self) -> None:
        self.start: dict[str, Any] = {}
        self.batches: list[tuple[int, int, int]] = []

    def on_train_start(self, trainer: Any, module: Any) -> None:
        optimizer = trainer.optimizers[0]
        self.start = {
            "epoch": trainer.current_epoch,
            "global_step": trainer.global_step,
            "weights": {k: v.clone() for k, v in module.state_dict().items()},
            "optimizer": copy.deepcopy(optimizer.state_dict()),
            "lr": optimizer.param_groups[0]["lr"],
        }

    def on_train_batch_start(self, trainer: Any, module: Any, batch: Any, batch_idx: int) -> None:
        self.batches.append((trainer.current_epoch, batch_idx, trainer.global_step))


def _counts(ready: int, started: int, processed: int, completed: int) -> dict[str, int]:
    return {"ready": ready, "started": started, "processed": processed, "completed": completed}


def _fit_loop(
    epochs: dict[str, int], batches: dict[str, int], total: dict[str, int], last: bool
) -> dict[str, Any]:
    """Lightning 2.x's ``loops["fit_loop"]`` with the given epoch and batch progress."""
    steps = {"current": {"ready": 0, "completed": 0}, "total": {"ready": 0, "completed": 0}}
    zero = _counts(0, 0, 0, 0)
    return {
        "state_dict": {},
        "epoch_progress": {"current": epochs, "total": dict(epochs)},
        "epoch_loop.state_dict": {"_batches_that_stepped": total["processed"]},
        "epoch_loop.batch_progress": {"current": batches, "total": total, "is_last_batch": last},
        "epoch_loop.scheduler_progress": steps,
        "epoch_loop.automatic_optimization.state_dict": {},
        "epoch_loop.automatic_optimization.optim_progress": {
            "optimizer": {"step": steps, "zero_grad": {"current": zero, "total": zero}}
        },
        "epoch_loop.manual_optimization.state_dict": {},
        "epoch_loop.manual_optimization.optim_step_progress": steps,
        "epoch_loop.val_loop.state_dict": {},
        "epoch_loop.val_loop.batch_progress": {
            "current": zero,
            "total": zero,
            "is_last_batch": False,
        },
    }


def _trained_state(lr: float, steps: int) -> tuple[Momentum, dict[str, Any], dict[str, Any]]:
    """A model, optimizer state and scheduler state after ``steps`` SGD steps."""
    torch.manual_seed(3)
    model = Momentum(lr=lr)
    (optimizer,), (scheduler,) = model.configure_optimizers()
    data = blobs(64)
    for step in range(steps):
        x, y = data.tensors[0][step % 2 * 32 :][:32], data.tensors[1][step % 2 * 32 :][:32]
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 2 == 1:
            scheduler.step()
    return model, optimizer.state_dict(), scheduler.state_dict()


def _lightning_file(path: Path, mid_epoch: bool = False, **extra: Any) -> Momentum:
    """Write a Lightning 2.x checkpoint of a run over 2 batches per epoch.

    At an epoch's end: saved by ModelCheckpoint after epochs 0 and 1 (4 steps).
    Mid-epoch: saved at on_train_batch_end of batch 0 of epoch 1 (3 steps).
    """
    steps = 3 if mid_epoch else 4
    model, optimizer_state, scheduler_state = _trained_state(lr=0.2, steps=steps)
    if mid_epoch:
        fit_loop = _fit_loop(_counts(2, 2, 1, 1), _counts(1, 1, 1, 0), _counts(3, 3, 3, 2), False)
    else:
        fit_loop = _fit_loop(_counts(2, 2, 2, 1), _counts(2, 2, 2, 2), _counts(4, 4, 4, 4), True)
    checkpoint = {
        "epoch": 1,
        "global_step": steps,
        "pytorch-lightning_version": "2.4.0",
        "state_dict": model.state_dict(),
        "loops": {"fit_loop": fit_loop},
        "callbacks": {},
        "optimizer_states": [optimizer_state],
        "lr_schedulers": [scheduler_state],
        "hparams_name": "kwargs",
        "hyper_parameters": {"features": 8, "classes": 3, "lr": 0.2},
        **extra,
    }
    torch.save(checkpoint, path)
    return model


def _assert_same_weights(state: dict[str, torch.Tensor], model: torch.nn.Module) -> None:
    for name, tensor in model.state_dict().items():
        assert torch.equal(state[name], tensor), name


# ------------------------------------------------------------------ constants
def test_hyperparameter_keys_are_lightnings() -> None:
    assert checkpoint_io.CHECKPOINT_HYPER_PARAMS_KEY == "hyper_parameters"
    assert checkpoint_io.CHECKPOINT_HYPER_PARAMS_NAME == "hparams_name"
    assert checkpoint_io.CHECKPOINT_HYPER_PARAMS_TYPE == "hparams_type"
    assert trainkit.Module.CHECKPOINT_HYPER_PARAMS_KEY == "hyper_parameters"
    assert trainkit.Module.CHECKPOINT_HYPER_PARAMS_NAME == "hparams_name"
    assert trainkit.Module.CHECKPOINT_HYPER_PARAMS_TYPE == "hparams_type"


# ------------------------------------------------- reading Lightning's files
def test_load_from_checkpoint_reads_a_lightning_file(tmp_path: Path) -> None:
    path = tmp_path / "lightning.ckpt"
    saved = _lightning_file(path)
    with pytest.warns(UserWarning, match="eval mode"):
        restored = Momentum.load_from_checkpoint(path)
    assert dict(restored.hparams) == {"features": 8, "classes": 3, "lr": 0.2}
    _assert_same_weights(restored.state_dict(), saved)
    assert Momentum.load_from_checkpoint(path, lr=0.5).hparams.lr == 0.5


def test_load_from_checkpoint_map_location_and_strict(tmp_path: Path) -> None:
    path = tmp_path / "lightning.ckpt"
    saved = _lightning_file(path, state_dict={**_trained_state(0.2, 4)[0].state_dict()})
    restored = Momentum.load_from_checkpoint(path, map_location=lambda storage, _: storage)
    assert next(restored.parameters()).device.type == "cpu"
    _assert_same_weights(restored.state_dict(), saved)
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["state_dict"]["extra.weight"] = torch.ones(2)
    del checkpoint["state_dict"]["net.2.bias"]
    torch.save(checkpoint, path)
    with pytest.raises(CheckpointError, match=r"unexpected keys .*extra\.weight"):
        Momentum.load_from_checkpoint(path)
    with pytest.warns(UserWarning, match=r"strict=False: keys missing from .*net\.2\.bias"):
        loose = Momentum.load_from_checkpoint(path, strict=False)
    assert torch.equal(loose.net[0].weight, saved.net[0].weight)


def test_load_from_checkpoint_passes_hparams_saved_under_one_name(tmp_path: Path) -> None:
    class Configured(trainkit.Module):
        def __init__(self, config: dict[str, Any]) -> None:
            super().__init__()
            self.config = config
            self.layer = torch.nn.Linear(config["features"], 2)

    path = tmp_path / "lightning.ckpt"
    model = Configured({"features": 3})
    torch.save(
        {
            "pytorch-lightning_version": "2.4.0",
            "state_dict": model.state_dict(),
            "hparams_name": "config",
            "hyper_parameters": {"features": 3},
        },
        path,
    )
    assert Configured.load_from_checkpoint(path).config == {"features": 3}


def test_load_from_checkpoint_ignores_saved_names_init_does_not_take(tmp_path: Path) -> None:
    path = tmp_path / "lightning.ckpt"
    _lightning_file(path, hyper_parameters={"features": 8, "lr": 0.3, "batch_size": 64})
    assert Momentum.load_from_checkpoint(path).hparams.lr == 0.3


def test_load_from_checkpoint_reads_an_hparams_file(tmp_path: Path) -> None:
    path = tmp_path / "lightning.ckpt"
    _lightning_file(path)
    (tmp_path / "hparams.yaml").write_text("features: 8\nclasses: 3\nlr: 0.7\n")
    assert (
        Momentum.load_from_checkpoint(path, hparams_file=tmp_path / "hparams.yaml").hparams.lr
        == 0.7
    )
    with pytest.raises(ValueError, match=r"\.yaml or \.yml"):
        Momentum.load_from_checkpoint(path, hparams_file=tmp_path / "hparams.csv")
    # A file that is not there: the values meant to replace the saved ones were not read.
    with pytest.raises(FileNotFoundError, match=r"hparams_file '.*missing.yaml' does not exist"):
        Momentum.load_from_checkpoint(path, hparams_file=tmp_path / "missing.yaml")


def test_on_load_checkpoint_sees_the_lightning_dict(tmp_path: Path) -> None:
    seen: list[set[str]] = []

    class Seeing(Momentum):
        def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
            seen.append(set(checkpoint))

    path = tmp_path / "lightning.ckpt"
    _lightning_file(path, my_entry=5)
    Seeing.load_from_checkpoint(path)
    trainer = trainkit.Trainer(max_epochs=3, **QUIET)
    trainer.fit(Seeing(), loader(blobs(64), 32), ckpt_path=path)
    expected = {"epoch", "global_step", "pytorch-lightning_version", "state_dict", "loops"}
    assert len(seen) == 2 and all(expected | {"my_entry"} <= keys for keys in seen)


def test_fit_resumes_a_lightning_epoch_end_checkpoint_at_the_next_epoch(tmp_path: Path) -> None:
    path = tmp_path / "lightning.ckpt"
    saved = _lightning_file(path)
    _, optimizer_state, _ = _trained_state(lr=0.2, steps=4)
    recorder = Recorder()
    trainer = trainkit.Trainer(max_epochs=3, **QUIET, callbacks=[recorder])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an epoch-end resume is exact: no warning
        warnings.filterwarnings("ignore", "You defined a `validation_step`")  # no val data
        trainer.fit(Momentum(), loader(blobs(64), 32), ckpt_path=path)
    assert recorder.start["epoch"] == 2 and recorder.start["global_step"] == 4
    _assert_same_weights(recorder.start["weights"], saved)
    for state, expected in zip(
        recorder.start["optimizer"]["state"].values(),
        optimizer_state["state"].values(),
        strict=True,
    ):
        assert torch.equal(state["momentum_buffer"], expected["momentum_buffer"])
    assert recorder.start["lr"] == pytest.approx(0.2 * 0.5**2)  # two scheduler steps restored
    assert recorder.batches == [(2, 0, 4), (2, 1, 5)]
    assert trainer.global_step == 6 and trainer.current_epoch == 3


def test_fit_resumes_a_lightning_mid_epoch_checkpoint_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "lightning.ckpt"
    _lightning_file(path, mid_epoch=True)
    recorder = Recorder()
    trainer = trainkit.Trainer(max_epochs=2, **QUIET, callbacks=[recorder])
    with pytest.warns(UserWarning) as record:
        trainer.fit(Momentum(), loader(blobs(64), 32, shuffle=True), ckpt_path=path)
    mid_epoch = [w for w in record if "batches into epoch" in str(w.message)]
    assert len(mid_epoch) == 1
    assert "1 batches into epoch 1" in str(mid_epoch[0].message)
    assert "exact resume" in str(mid_epoch[0].message)
    assert recorder.batches == [(1, 1, 3)]
    assert trainer.global_step == 4


def test_a_lightning_file_without_loops_resumes_after_its_epoch(tmp_path: Path) -> None:
    path = tmp_path / "lightning.ckpt"
    _lightning_file(path)
    checkpoint = torch.load(path, weights_only=True)
    del checkpoint["loops"]
    torch.save(checkpoint, path)
    recorder = Recorder()
    trainer = trainkit.Trainer(max_epochs=3, **QUIET, callbacks=[recorder])
    with pytest.warns(UserWarning, match="no 'loops' entry"):
        trainer.fit(Momentum(), loader(blobs(64), 32), ckpt_path=path)
    assert recorder.batches[0] == (2, 0, 4)


def test_lightning_callback_states_map_by_state_key(tmp_path: Path) -> None:
    stopper = EarlyStopping(monitor="train/loss", patience=5)
    path = tmp_path / "lightning.ckpt"
    lightning_state = {
        "wait_count": 2,
        "stopped_epoch": 0,
        "best_score": torch.tensor(0.25),
        "patience": 5,
    }
    _lightning_file(
        path,
        callbacks={stopper.state_key: lightning_state, "Timer": {"time_elapsed": {"train": 1.0}}},
    )
    seen: dict[str, Any] = {}

    class Peek(trainkit.Callback):
        def on_train_start(self, trainer: Any, module: Any) -> None:
            seen.update(wait=stopper.wait_count, best=stopper.best_score)

    trainer = trainkit.Trainer(max_epochs=3, **QUIET, callbacks=[stopper, Peek()])
    with pytest.warns(UserWarning, match=r"callbacks this Trainer does not have: \['Timer'\]"):
        trainer.fit(Momentum(), loader(blobs(64), 32), ckpt_path=path)
    assert seen == {"wait": 2, "best": pytest.approx(0.25)}


def test_lightning_datamodule_state_is_restored(tmp_path: Path) -> None:
    class StatefulData(BlobData):
        def load_state_dict(self, state_dict: dict[str, Any]) -> None:
            self.restored = state_dict

    path = tmp_path / "lightning.ckpt"
    _lightning_file(path, **{StatefulData.__qualname__: {"position": 7}})
    data = StatefulData()
    trainkit.Trainer(max_epochs=3, **QUIET).fit(Momentum(), datamodule=data, ckpt_path=path)
    assert data.restored == {"position": 7}


def test_validate_with_a_lightning_checkpoint_loads_its_weights(tmp_path: Path) -> None:
    path = tmp_path / "lightning.ckpt"
    saved = _lightning_file(path)
    data = loader(blobs(64, seed=4), 32)
    expected = trainkit.Trainer(**QUIET).validate(saved, data)[0]
    assert trainkit.Trainer(**QUIET).validate(Momentum(), data, ckpt_path=path)[0] == (
        pytest.approx(expected)
    )


def test_a_weights_only_lightning_file_cannot_resume_fit(tmp_path: Path) -> None:
    path = tmp_path / "lightning.ckpt"
    _lightning_file(path)
    checkpoint = torch.load(path, weights_only=True)
    for key in ("optimizer_states", "lr_schedulers", "callbacks"):
        del checkpoint[key]
    torch.save(checkpoint, path)
    Momentum.load_from_checkpoint(path)  # the weights load
    with pytest.raises(CheckpointError, match="save_weights_only=True"):
        trainkit.Trainer(max_epochs=3, **QUIET).fit(
            Momentum(), loader(blobs(64), 32), ckpt_path=path
        )


class _Loss(torch.nn.Module):
    """A hyperparameter that is an object of the user's own class."""

    built = 0

    def __init__(self) -> None:
        super().__init__()
        _Loss.built += 1

    def __setstate__(self, state: dict[str, Any]) -> None:
        _Loss.built += 1
        super().__setstate__(state)


def test_a_lightning_file_with_objects_in_its_hparams_resumes_without_running_them(
    tmp_path: Path,
) -> None:
    # Lightning pickles hyperparameters as they are: a safe load reads stand-ins for
    # them (nothing of their class runs), and the run resumes from the file.
    path = tmp_path / "lightning.ckpt"
    hparams = {"features": 8, "classes": 3, "lr": 0.2, "loss": _Loss(), "root": Path("x")}
    _lightning_file(path, hyper_parameters=hparams)
    built = _Loss.built
    checkpoint = load(path)
    assert _Loss.built == built
    assert "not loaded: weights_only=True" in repr(checkpoint["hyper_parameters"]["loss"])
    assert checkpoint["hyper_parameters"]["root"] == Path("x")  # a harmless class, built
    model = Momentum(lr=0.2)
    trainer = trainkit.Trainer(max_epochs=3, **QUIET)
    trainer.fit(model, loader(blobs(64), 32), ckpt_path=path)
    assert trainer.global_step == 6
    assert _Loss.built == built
    with pytest.raises(CheckpointError, match=r"loss=.*weights_only=False; or pass them"):
        _WithLoss.load_from_checkpoint(path)
    assert _Loss.built == built
    with pytest.warns(UserWarning, match="eval mode"):
        trusted = _WithLoss.load_from_checkpoint(path, weights_only=False)
    assert isinstance(trusted.hparams.loss, _Loss)


class _WithLoss(Momentum):
    def __init__(self, lr: float = 0.1, loss: torch.nn.Module | None = None) -> None:
        super().__init__(lr=lr)
        self.save_hyperparameters()


def test_a_lightning_file_with_objects_outside_its_hparams_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lightning.ckpt"
    _lightning_file(path, callbacks={"Custom": {"state": _Loss()}})
    with pytest.raises(CheckpointError, match="Unsupported global") as refused:
        load(path)
    # Also the error torch.load raises, which ported code catches to load it trusted.
    assert isinstance(refused.value, pickle.UnpicklingError)


# ------------------------------------------------- trainkit's files, Lightning's keys
def _trainkit_run(
    tmp_path: Path, model: trainkit.Module | None = None, features: int = 8
) -> tuple[trainkit.Module, Path]:
    model = model or Momentum(lr=0.2)
    checkpoints = ModelCheckpoint(dirpath=tmp_path / "checkpoints", save_top_k=-1)
    trainer = trainkit.Trainer(
        max_epochs=2, **{**QUIET, "enable_checkpointing": True}, callbacks=[checkpoints]
    )
    trainer.fit(model, loader(blobs(64, features=features), 32))
    return model, tmp_path / "checkpoints"


def test_a_trainkit_checkpoint_has_lightnings_keys(tmp_path: Path) -> None:
    model, folder = _trainkit_run(tmp_path)
    checkpoint = load(folder / "epoch=1-step=4.ckpt")
    assert {
        "epoch",
        "global_step",
        "pytorch-lightning_version",
        "state_dict",
        "loops",
        "callbacks",
        "optimizer_states",
        "lr_schedulers",
        "hparams_name",
        "hyper_parameters",
    } <= set(checkpoint)
    # Lightning's meaning: the epoch that just ended, and optimizer steps so far.
    assert checkpoint["epoch"] == 1 and checkpoint["global_step"] == 4
    assert checkpoint["hparams_name"] == "kwargs"
    assert checkpoint["hyper_parameters"] == {"features": 8, "classes": 3, "lr": 0.2}
    progress = checkpoint["loops"]["fit_loop"]["epoch_progress"]["current"]
    assert progress == {"ready": 2, "started": 2, "processed": 2, "completed": 1}
    assert len(checkpoint["optimizer_states"]) == 1 and len(checkpoint["lr_schedulers"]) == 1
    _assert_same_weights(checkpoint["state_dict"], model)
    first = load(folder / "epoch=0-step=2.ckpt")
    assert first["epoch"] == 0 and first["global_step"] == 2


def test_on_save_checkpoint_sees_lightnings_keys(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    class Seeing(Momentum):
        def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
            seen.append({k: checkpoint[k] for k in ("epoch", "global_step", "hyper_parameters")})
            checkpoint["my_entry"] = 1

    _, folder = _trainkit_run(tmp_path, Seeing(lr=0.2))
    assert seen[0] == {
        "epoch": 0,
        "global_step": 2,
        "hyper_parameters": dict(Seeing(lr=0.2).hparams),
    }
    assert load(folder / "epoch=0-step=2.ckpt")["my_entry"] == 1


def test_lightnings_part_of_a_trainkit_checkpoint_resumes_like_the_whole(tmp_path: Path) -> None:
    """The reference shape: only Lightning's keys of a trainkit file, read as a Lightning file."""
    _, folder = _trainkit_run(tmp_path)
    checkpoint = load(folder / "epoch=0-step=2.ckpt")
    lightning_keys = (
        "epoch",
        "global_step",
        "pytorch-lightning_version",
        "state_dict",
        "loops",
        "callbacks",
        "optimizer_states",
        "lr_schedulers",
        "hparams_name",
        "hyper_parameters",
    )
    torch.save({key: checkpoint[key] for key in lightning_keys}, tmp_path / "reference.ckpt")
    starts = []
    for path in (folder / "epoch=0-step=2.ckpt", tmp_path / "reference.ckpt"):
        recorder = Recorder()
        trainer = trainkit.Trainer(max_epochs=2, **QUIET, callbacks=[recorder])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the reference lacks the ModelCheckpoint
            trainer.fit(Momentum(), loader(blobs(64), 32), ckpt_path=path)
        starts.append(recorder)
    assert starts[0].batches == starts[1].batches == [(1, 0, 2), (1, 1, 3)]
    assert starts[0].start["lr"] == starts[1].start["lr"]
    _assert_same_weights(
        starts[0].start["weights"], Momentum.load_from_checkpoint(tmp_path / "reference.ckpt")
    )


def test_lightnings_keys_do_not_store_tensors_twice(tmp_path: Path) -> None:
    class Wide(Momentum):
        def __init__(self) -> None:
            super().__init__(features=256)

    _, folder = _trainkit_run(tmp_path, Wide(), features=256)
    path = folder / "epoch=1-step=4.ckpt"
    checkpoint = load(path)
    added = ("epoch", "global_step", "pytorch-lightning_version", "loops", "hparams_name")
    without = tmp_path / "without.ckpt"
    torch.save({k: v for k, v in checkpoint.items() if k not in added}, without)
    tensors = tmp_path / "tensors.pt"
    torch.save({k: checkpoint[k] for k in ("state_dict", "optimizer_states")}, tensors)
    # Lightning's extra keys cost about a kilobyte (no tensor among them) ...
    assert path.stat().st_size - without.stat().st_size < 4096
    # ... and the weights and optimizer state (~70 KB here) are in the file once.
    assert path.stat().st_size - tensors.stat().st_size < tensors.stat().st_size


def test_a_weights_only_trainkit_checkpoint_keeps_what_lightning_keeps(tmp_path: Path) -> None:
    model = Momentum(lr=0.2)
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(model, loader(blobs(64), 32))
    checkpoint = trainer.dump_checkpoint(weights_only=True)
    assert {"epoch", "global_step", "state_dict", "loops", "hyper_parameters"} <= set(checkpoint)
    assert not {"optimizer_states", "lr_schedulers", "callbacks", "rng"} & set(checkpoint)
    path = tmp_path / "weights.ckpt"
    checkpoint_io.save_atomic(checkpoint, path)
    _assert_same_weights(Momentum.load_from_checkpoint(path).state_dict(), model)
    with pytest.raises(CheckpointError, match="save_weights_only=True"):
        trainkit.Trainer(max_epochs=2, **QUIET).fit(
            Momentum(), loader(blobs(64), 32), ckpt_path=path
        )


def test_a_lightning_file_with_namespace_hparams_loads_safely(tmp_path: Path) -> None:
    from argparse import Namespace

    path = tmp_path / "lightning.ckpt"
    _lightning_file(path, hyper_parameters=Namespace(features=8, classes=3, lr=0.4))
    assert Momentum.load_from_checkpoint(path).hparams.lr == 0.4


def test_a_lightning_file_with_an_unknown_dict_subclass_names_the_safe_way_to_load_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lightning.ckpt"
    _lightning_file(path, hyper_parameters=_Settings(features=8, classes=3, lr=0.4))
    with pytest.raises(CheckpointError, match=r"add_safe_globals"):
        Momentum.load_from_checkpoint(path)
    assert Momentum.load_from_checkpoint(path, weights_only=False).hparams.lr == 0.4


class _Settings(dict[str, Any]):
    """A dict subclass of the user's own: a safe load cannot fill a stand-in for it."""


class SizedData(BlobData):
    """BlobData that records its batch size as a hyperparameter and has a state."""

    def __init__(self, batch_size: int = 32) -> None:
        super().__init__(batch_size)
        self.save_hyperparameters()
        self.restored: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, Any]:
        return {"position": 3}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.restored = state_dict


def test_datamodule_hyperparameters_are_saved_and_rebuild_it(tmp_path: Path) -> None:
    checkpoints = ModelCheckpoint(dirpath=tmp_path, save_top_k=-1)
    trainer = trainkit.Trainer(
        max_epochs=1, **{**QUIET, "enable_checkpointing": True}, callbacks=[checkpoints]
    )
    trainer.fit(Momentum(), datamodule=SizedData(batch_size=16))
    (path,) = tmp_path.glob("epoch=0-*.ckpt")
    checkpoint = load(path)
    assert checkpoint["datamodule_hyper_parameters"] == {"batch_size": 16}
    assert checkpoint["datamodule_hparams_name"] == "kwargs"
    data = SizedData.load_from_checkpoint(path)
    assert data.batch_size == 16 and data.restored == {"position": 3}
    assert SizedData.load_from_checkpoint(path, batch_size=8).batch_size == 8


def test_datamodule_load_from_checkpoint_reads_a_lightning_file(tmp_path: Path) -> None:
    path = tmp_path / "lightning.ckpt"
    _lightning_file(
        path,
        datamodule_hparams_name="kwargs",
        datamodule_hyper_parameters={"batch_size": 4},
        **{SizedData.__qualname__: {"position": 9}},
    )
    data = SizedData.load_from_checkpoint(path)
    assert data.batch_size == 4 and data.restored == {"position": 9}


class StatefulData(BlobData):
    def __init__(self) -> None:
        super().__init__()
        self.loaded: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, Any]:
        return {"cursor": 7}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.loaded = state_dict


def test_datamodule_state_is_kept_under_its_class_name(tmp_path: Path) -> None:
    options = {**QUIET, "enable_checkpointing": True, "default_root_dir": tmp_path}
    trainkit.Trainer(max_epochs=1, limit_train_batches=2, **options).fit(
        Classifier(), datamodule=StatefulData()
    )
    path = tmp_path / "checkpoints" / "last.ckpt"
    saved = load(path)
    assert saved["StatefulData"] == {"cursor": 7} and "datamodule" not in saved
    data = StatefulData()
    trainer = trainkit.Trainer(max_epochs=2, limit_train_batches=2, **options)
    trainer.fit(Classifier(), datamodule=data, ckpt_path=path)
    assert data.loaded == {"cursor": 7}


def test_evaluating_from_a_checkpoint_restores_the_datamodule_state_too(tmp_path: Path) -> None:
    # Lightning loads a DataModule's state whenever it loads a checkpoint: a
    # DataModule that keeps, say, a fitted normalisation evaluates with it.
    options = {**QUIET, "enable_checkpointing": True, "default_root_dir": tmp_path}
    trainkit.Trainer(max_epochs=1, limit_train_batches=2, **options).fit(
        Classifier(), datamodule=StatefulData()
    )
    path = tmp_path / "checkpoints" / "last.ckpt"
    for run in ("validate", "test", "predict"):
        data = StatefulData()
        getattr(trainkit.Trainer(**QUIET), run)(Classifier(), datamodule=data, ckpt_path=path)
        assert data.loaded == {"cursor": 7}, run

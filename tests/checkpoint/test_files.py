"""Checkpoint files: what they hold, safe loading, and the errors for bad files."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.checkpoint.files import CheckpointError, load, save_atomic


def _trained(tmp_path: Path) -> tuple[trainkit.Trainer, Classifier, Path]:
    model = Classifier(lr=0.05)
    trainer = trainkit.Trainer(max_epochs=1, **QUIET, default_root_dir=tmp_path)
    trainer.fit(model, loader(blobs(64), 32), loader(blobs(32), 32))
    path = tmp_path / "manual.ckpt"
    trainer.save_checkpoint(path)
    return trainer, model, path


def test_a_checkpoint_holds_the_full_training_state(tmp_path: Path) -> None:
    _, model, path = _trained(tmp_path)
    checkpoint = load(path)
    assert {
        "state_dict",
        "optimizer_states",
        "lr_schedulers",
        "loop",
        "rng",
        "callbacks",
        "train_metrics",
        "callback_metrics",
        "loggers",
        "hyper_parameters",
        "versions",
        "lineage",
    } <= set(checkpoint)
    assert checkpoint["loop"]["global_step"] == 2 and checkpoint["loop"]["epoch"] == 1
    assert checkpoint["hyper_parameters"] == {"features": 8, "classes": 3, "lr": 0.05}
    assert checkpoint["versions"]["trainkit"] == trainkit.__version__
    assert set(checkpoint["rng"]) >= {"python", "torch", "numpy"}
    for name, tensor in model.state_dict().items():
        assert torch.equal(checkpoint["state_dict"][name], tensor)
    # Loadable without running code from the file.
    torch.load(path, weights_only=True)


def test_load_from_checkpoint_rebuilds_the_module_with_overrides(tmp_path: Path) -> None:
    _, model, path = _trained(tmp_path)
    restored = Classifier.load_from_checkpoint(path)
    assert restored.hparams.lr == 0.05 and not restored.training
    assert all(
        torch.equal(a, b) for a, b in zip(model.parameters(), restored.parameters(), strict=True)
    )
    assert Classifier.load_from_checkpoint(path, lr=0.3).hparams.lr == 0.3
    with pytest.raises(CheckpointError, match=r"mis-shaped keys .*net.0.weight"):
        Classifier.load_from_checkpoint(path, features=5)


def test_validate_test_predict_from_a_checkpoint(tmp_path: Path) -> None:
    _, model, path = _trained(tmp_path)
    data = loader(blobs(64, seed=4), 32)
    expected = trainkit.Trainer(**QUIET).validate(model, data)[0]
    fresh = Classifier()
    trainer = trainkit.Trainer(**QUIET)
    assert trainer.validate(fresh, data, ckpt_path=path)[0] == pytest.approx(expected)
    assert trainer.test(Classifier(), data, ckpt_path=path)[0]["test/acc"] == pytest.approx(
        expected["val/acc"]
    )
    predictions = trainer.predict(Classifier(), data, ckpt_path=path)
    assert torch.equal(torch.cat(predictions), model(blobs(64, seed=4).tensors[0]).argmax(1))


def test_truncated_file_names_the_file_and_the_problem(tmp_path: Path) -> None:
    _, _, path = _trained(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=rf"Checkpoint {path} \(\d+ bytes\) cannot be read"):
        load(path)
    with pytest.raises(CheckpointError, match="truncated or damaged"):
        trainkit.Trainer(**QUIET).fit(Classifier(), loader(blobs(64), 32), ckpt_path=path)


def test_foreign_and_missing_files(tmp_path: Path) -> None:
    foreign = tmp_path / "weights.pt"
    torch.save({"layer.weight": torch.ones(2)}, foreign)
    with pytest.raises(CheckpointError, match=rf"{foreign} is not a trainkit checkpoint"):
        load(foreign)
    garbage = tmp_path / "garbage.ckpt"
    garbage.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match="cannot be read"):
        load(garbage)
    with pytest.raises(CheckpointError, match="does not exist"):
        load(tmp_path / "nope.ckpt")
    # Also the FileNotFoundError that code written for Lightning catches, wherever a
    # missing file is asked for.
    with pytest.raises(FileNotFoundError, match=r"nope\.ckpt does not exist"):
        Classifier.load_from_checkpoint(tmp_path / "nope.ckpt")
    with pytest.raises(FileNotFoundError, match=r"nope\.ckpt does not exist"):
        trainkit.Trainer(**QUIET).fit(
            Classifier(), loader(blobs(64), 32), ckpt_path=str(tmp_path / "nope.ckpt")
        )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """The URL of an HTTP server on this machine serving ``tmp_path``."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=tmp_path))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_checkpoints_load_from_urls_as_in_lightning(tmp_path: Path, served: str) -> None:
    import fsspec

    _, model, path = _trained(tmp_path)
    url = f"{served}/{path.name}"
    loaded = Classifier.load_from_checkpoint(url)
    assert torch.equal(loaded.net[0].weight, model.net[0].weight)
    data = loader(blobs(64, seed=4), 32)
    expected = trainkit.Trainer(**QUIET).validate(model, data)[0]
    trainer = trainkit.Trainer(**QUIET)
    assert trainer.validate(Classifier(), data, ckpt_path=url)[0] == pytest.approx(expected)
    assert trainer.ckpt_path == url
    resumed = trainkit.Trainer(max_epochs=2, **QUIET, default_root_dir=tmp_path / "resumed")
    resumed.fit(Classifier(lr=0.05), loader(blobs(64), 32), ckpt_path=url)
    assert (resumed.current_epoch, resumed.global_step) == (2, 4)
    # Other stores through fsspec; a missing file is a FileNotFoundError there too.
    with fsspec.open("memory://models/manual.ckpt", "wb") as remote:
        remote.write(path.read_bytes())
    loaded = Classifier.load_from_checkpoint("memory://models/manual.ckpt")
    assert torch.equal(loaded.net[0].weight, model.net[0].weight)
    assert torch.equal(load(f"file://{path}")["state_dict"]["net.0.weight"], model.net[0].weight)
    for missing in (f"{served}/nope.ckpt", "memory://models/nope.ckpt"):
        with pytest.raises(
            FileNotFoundError, match=re.escape(f"Checkpoint {missing} does not exist")
        ):
            Classifier.load_from_checkpoint(missing)


def test_pickled_code_is_refused(tmp_path: Path) -> None:
    # Outside the hyperparameters, an object is refused, even of a harmless class.
    for payload in (Path("x"), torch.nn.Linear(1, 1)):
        path = tmp_path / "evil.ckpt"
        torch.save({"format": "trainkit-checkpoint", "payload": payload}, path)
        with pytest.raises(CheckpointError, match="Unsupported global"):
            load(path)


def test_a_mismatched_model_lists_missing_unexpected_and_mis_shaped_keys(tmp_path: Path) -> None:
    _, _, path = _trained(tmp_path)

    class Other(Classifier):
        def __init__(self) -> None:
            super().__init__(features=6)
            self.extra = torch.nn.Linear(2, 2)

    with pytest.raises(CheckpointError) as info:
        trainkit.Trainer(**QUIET).validate(
            Other(), loader(blobs(32, features=6), 32), ckpt_path=path
        )
    message = str(info.value)
    assert "missing keys (2): extra.bias, extra.weight" in message
    assert "mis-shaped keys (1): net.0.weight: checkpoint (32, 8), model (32, 6)" in message


def test_atomic_save_replaces_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "x.ckpt"
    save_atomic({"format": "trainkit-checkpoint", "v": 1}, path)
    save_atomic({"format": "trainkit-checkpoint", "v": 2}, path)
    assert load(path)["v"] == 2
    assert [p.name for p in path.parent.iterdir()] == ["x.ckpt"]


def test_hyperparameters_that_are_objects_load_safely_as_stand_ins(tmp_path: Path) -> None:
    class WithObject(Classifier):
        def __init__(self, layer: Any = None, lr: float = 0.1) -> None:
            super().__init__(lr=lr)
            self.save_hyperparameters()

    model = WithObject(layer=torch.nn.Linear(1, 1))
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(model, loader(blobs(32), 32))
    trainer.save_checkpoint(tmp_path / "x.ckpt")
    stand_in = load(tmp_path / "x.ckpt")["hyper_parameters"]["layer"]
    assert (
        repr(stand_in) == "<torch.nn.modules.linear.Linear object (not loaded: weights_only=True)>"
    )
    assert stand_in.state["in_features"] == 1  # the stored state, as data


# ------------------------------------------------------ integrity and resume errors
def _flip_bytes_inside(path: Path, stored: torch.Tensor, count: int = 16) -> None:
    # torch stores tensors uncompressed: find this tensor's bytes and flip some in the middle.
    data = bytearray(path.read_bytes())
    raw = stored.detach().contiguous().view(torch.uint8).numpy().tobytes()
    at = data.find(raw)
    assert at > 0 and data.find(raw, at + 1) == -1
    middle = at + len(raw) // 2
    data[middle : middle + count] = bytes(b ^ 0xFF for b in data[middle : middle + count])
    path.write_bytes(bytes(data))


def test_bit_flips_in_a_stored_weight_are_caught_by_every_load(tmp_path: Path) -> None:
    _, model, path = _trained(tmp_path)
    assert load(path)["state_dict"]["net.0.weight"].shape == (32, 8)  # intact: loads
    _flip_bytes_inside(path, model.net[0].weight)
    assert trainkit.CheckpointError is CheckpointError  # exported
    corrupt = rf"Checkpoint {path} is corrupt: its contents do not match the sha256 digest"
    with pytest.raises(CheckpointError, match=corrupt):
        load(path)
    with pytest.raises(CheckpointError, match=corrupt):
        Classifier.load_from_checkpoint(path)
    with pytest.raises(CheckpointError, match=corrupt):
        trainkit.Trainer(**QUIET).validate(Classifier(), loader(blobs(32), 32), ckpt_path=path)
    with pytest.raises(CheckpointError, match=corrupt):
        trainkit.Trainer(max_epochs=2, **QUIET).fit(
            Classifier(), loader(blobs(64), 32), ckpt_path=path
        )


def test_a_checkpoint_a_program_edited_and_saved_again_loads_with_a_warning(
    tmp_path: Path,
) -> None:
    # As Lightning users edit checkpoints (load, rename or add keys, torch.save): the
    # stale digest no longer matches, but the file is whole, so it loads as edited.
    _, model, path = _trained(tmp_path)
    edited = torch.load(path, weights_only=True)
    edited["state_dict"]["extra.weight"] = torch.ones(2)
    torch.save(edited, tmp_path / "edited.ckpt")
    with pytest.warns(UserWarning, match=r"was changed after trainkit wrote it"):
        loaded = load(tmp_path / "edited.ckpt")
    assert torch.equal(loaded["state_dict"]["extra.weight"], torch.ones(2))
    assert torch.equal(loaded["state_dict"]["net.0.weight"], model.net[0].weight)
    # Damage to that file is still an error: its bytes break their checksums.
    _flip_bytes_inside(tmp_path / "edited.ckpt", model.net[0].weight)
    with pytest.raises(CheckpointError, match="is corrupt"):
        load(tmp_path / "edited.ckpt")


def test_a_checkpoint_edited_in_memory_loads_without_a_warning(tmp_path: Path) -> None:
    # Projects edit a checkpoint in memory and hand the bytes on (chemprop's
    # load_from_checkpoint adds keys, torch.saves into a BytesIO and loads that): no
    # file changed, so nothing is said; damaged bytes are still an error.
    import io

    _, model, path = _trained(tmp_path)
    edited = torch.load(path, weights_only=True)
    edited["state_dict"]["extra.weight"] = torch.ones(2)
    buffer = io.BytesIO()
    torch.save(edited, buffer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        buffer.seek(0)
        loaded = load(buffer)
    assert torch.equal(loaded["state_dict"]["extra.weight"], torch.ones(2))
    data = bytearray(buffer.getvalue())
    offset = bytes(data).find(model.net[0].weight.detach().numpy().tobytes())
    data[offset + 2] ^= 0xFF
    with pytest.raises(CheckpointError, match="is corrupt"):
        load(io.BytesIO(bytes(data)))


def test_a_checkpoint_in_a_file_object_loads_as_from_its_path(tmp_path: Path) -> None:
    import io

    _, model, path = _trained(tmp_path)
    buffer = io.BytesIO(path.read_bytes())
    assert torch.equal(load(buffer)["state_dict"]["net.0.weight"], model.net[0].weight)
    with path.open("rb") as file:
        loaded = Classifier.load_from_checkpoint(file)
    assert torch.equal(loaded.net[0].weight, model.net[0].weight)
    with pytest.raises(CheckpointError, match=r"<file object> \(9 bytes\) cannot be read"):
        load(io.BytesIO(b"not a zip"))


def test_a_file_without_a_digest_still_loads_and_resumes(tmp_path: Path) -> None:
    # As an older trainkit (or a script re-saving the dict with torch.save) wrote it.
    _, model, path = _trained(tmp_path)
    plain = tmp_path / "plain.ckpt"
    checkpoint = load(path)
    assert "integrity" not in checkpoint  # load() checks the entry and removes it
    torch.save(checkpoint, plain)
    assert torch.equal(load(plain)["state_dict"]["net.0.weight"], model.net[0].weight)
    trainer = trainkit.Trainer(max_epochs=2, **QUIET)
    trainer.fit(Classifier(lr=0.05), loader(blobs(64), 32), ckpt_path=plain)
    assert trainer.global_step == 4


def test_a_full_disk_says_so_with_the_path_and_size_and_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import io

    trainer, _, path = _trained(tmp_path)
    before = path.read_bytes()
    real_save = torch.save

    class FullDisk(io.RawIOBase):
        # Takes 4 KB, then fails as a full disk does (torch.save wraps the OSError).
        def __init__(self, file: Any) -> None:
            self.file, self.written = file, 0

        def writable(self) -> bool:
            return True

        def write(self, data: Any) -> int:
            self.written += len(data)
            if self.written > 4096:
                raise OSError(errno.ENOSPC, "No space left on device")
            return int(self.file.write(data))

    monkeypatch.setattr(torch, "save", lambda obj, file: real_save(obj, FullDisk(file)))
    with pytest.raises(CheckpointError) as info:
        trainer.save_checkpoint(path)
    message = str(info.value)
    assert message.startswith(f"No space left on device while saving checkpoint {path}")
    assert "needs about" in message and "free there" in message and "\n" not in message
    monkeypatch.setattr(torch, "save", real_save)
    assert path.read_bytes() == before and load(path)["loop"]["global_step"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manual.ckpt"]  # no temporary file


class _WithMomentum(Classifier):
    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


class _WithAdamW(Classifier):
    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=0.01)


def test_resuming_with_another_optimizer_names_the_file_and_both_optimizers(
    tmp_path: Path,
) -> None:
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(_WithMomentum(), loader(blobs(64), 32))
    path = tmp_path / "sgd.ckpt"
    trainer.save_checkpoint(path)
    with pytest.raises(CheckpointError) as info:
        trainkit.Trainer(max_epochs=2, **QUIET).fit(
            _WithAdamW(), loader(blobs(64), 32), ckpt_path=path
        )
    message = str(info.value)
    assert message.startswith(f"The checkpoint {path} holds the state of a SGD optimizer")
    assert "configure_optimizers returns a AdamW" in message and "\n" not in message


def test_a_checkpoint_without_its_loop_entry_names_the_file_and_the_entry(tmp_path: Path) -> None:
    _, _, path = _trained(tmp_path)
    checkpoint = load(path)
    del checkpoint["loop"]
    save_atomic(checkpoint, path)
    with pytest.raises(CheckpointError) as info:
        trainkit.Trainer(max_epochs=2, **QUIET).fit(
            Classifier(), loader(blobs(64), 32), ckpt_path=path
        )
    message = str(info.value)
    assert message.startswith(f"The checkpoint {path} has no 'loop' entry (the loop's progress)")
    assert "\n" not in message


def test_evaluating_a_file_without_weights_names_the_file(tmp_path: Path) -> None:
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(Classifier(), loader(blobs(32), 16))
    trainer.save_checkpoint(tmp_path / "full.ckpt")
    edited = torch.load(tmp_path / "full.ckpt", weights_only=True)
    del edited["state_dict"], edited["integrity"]  # edited by hand, digest dropped
    path = tmp_path / "bare.pt"
    torch.save(edited, path)
    with pytest.raises(CheckpointError, match=r"bare.pt has no 'state_dict' entry"):
        trainkit.Trainer(**QUIET).validate(Classifier(), loader(blobs(32), 16), ckpt_path=path)


def test_resuming_without_a_callback_whose_state_was_saved_says_which(tmp_path: Path) -> None:
    from trainkit.callbacks import ModelCheckpoint

    def trainer(*callbacks: Any, steps: int) -> trainkit.Trainer:
        options = {**QUIET, "enable_checkpointing": True, "default_root_dir": tmp_path}
        return trainkit.Trainer(max_steps=steps, callbacks=list(callbacks), **options)

    first = trainer(ModelCheckpoint(monitor="step", mode="max"), ModelCheckpoint(), steps=2)
    first.fit(Classifier(), loader(blobs(64), 16))
    path = tmp_path / "both.ckpt"
    first.save_checkpoint(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer(ModelCheckpoint(), steps=3).fit(Classifier(), loader(blobs(64), 16), ckpt_path=path)
    (message,) = [str(w.message) for w in caught if "callbacks used to create" in str(w.message)]
    assert "ModelCheckpoint{'monitor': 'step', 'mode': 'max'" in message
    with warnings.catch_warnings(record=True) as caught:  # the same callbacks: nothing to say
        warnings.simplefilter("always")
        again = trainer(ModelCheckpoint(monitor="step", mode="max"), ModelCheckpoint(), steps=3)
        again.fit(Classifier(), loader(blobs(64), 16), ckpt_path=path)
    assert not [w for w in caught if "callbacks used to create" in str(w.message)]

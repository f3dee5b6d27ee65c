"""The one atomic writer: a file is complete or untouched, and no temporary file is left."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from trainkit.utilities.io import STALE_AFTER_SECONDS, atomic_write


def test_text_and_bytes_land_whole(tmp_path: Path) -> None:
    with atomic_write(tmp_path / "deep" / "a.txt") as text:
        text.write("name,value\r\nx,1\r\n")
    with atomic_write(tmp_path / "b.bin", "wb") as binary:
        binary.write(b"\x00\x01")
    # newline="" keeps what was written (csv writes \r\n itself).
    assert (tmp_path / "deep" / "a.txt").read_bytes() == b"name,value\r\nx,1\r\n"
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.bin", "deep"]


def test_a_failure_mid_write_keeps_the_previous_file_and_leaves_no_debris(tmp_path: Path) -> None:
    target = tmp_path / "config.yaml"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="disk on fire"), atomic_write(target) as file:
        file.write("half of the new")
        raise RuntimeError("disk on fire")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["config.yaml"]


def test_the_data_is_on_disk_before_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (order.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(
        os, "replace", lambda a, b: (order.append("replace"), real_replace(a, b))[1]
    )
    with atomic_write(tmp_path / "x") as file:
        file.write("x")
    # The file, then the rename, then the folder that holds the new name.
    assert order == ["fsync", "replace", "fsync"]


def test_a_checkpoint_and_its_last_link_are_made_durable_with_one_folder_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    import trainkit
    from tests.helpers import QUIET, Classifier, blobs, loader

    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        events.append(f"fsync {'folder' if os.path.isdir(path) else 'file'} {Path(path).name}")
        real_fsync(fd)

    def replace(source: str, target: str) -> None:
        events.append(f"replace {Path(target).name}")
        real_replace(source, target)

    options = {**QUIET, "enable_checkpointing": True}  # the default ModelCheckpoint
    trainer = trainkit.Trainer(max_epochs=1, default_root_dir=tmp_path, **options)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    trainer.fit(Classifier(), loader(blobs(64), 32))
    monkeypatch.undo()
    # Each file's data is on disk before its rename; the folder holding both new
    # names is fsynced once, after both.
    name = "epoch=0-step=2.ckpt"
    assert [e for e in events if not e.startswith("fsync file")] == [
        f"replace {name}",
        "replace last.ckpt",
        "fsync folder checkpoints",
    ]
    assert events[0].startswith(f"fsync file .{name}.tmp-")
    assert torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 2


def test_a_deferred_folder_sync_waits_for_that_folder_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainkit.utilities.io import deferred_folder_sync, fsync_folder

    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(
        os,
        "fsync",
        lambda fd: (events.append(f"fsync {os.readlink(f'/proc/self/fd/{fd}')}"), real_fsync(fd))[
            1
        ],
    )
    monkeypatch.setattr(
        os, "replace", lambda a, b: (events.append(f"replace {b}"), real_replace(a, b))[1]
    )
    staging = tmp_path / "staging"
    with deferred_folder_sync(tmp_path):
        with atomic_write(tmp_path / "a.ckpt") as file:  # renamed into the folder
            file.write("a")
        with atomic_write(staging / "shard") as file:  # renamed into a folder inside it
            file.write("s")
        os.replace(staging, tmp_path / "b.ckpt")  # a folder checkpoint's commit
        fsync_folder(tmp_path)
        assert f"fsync {tmp_path}" not in events  # not yet
    # The staging folder's entries were on disk before it was renamed; the folder
    # itself is fsynced once, at the end.
    assert events.index(f"fsync {staging}") < events.index(f"replace {tmp_path / 'b.ckpt'}")
    assert events.count(f"fsync {tmp_path}") == 1 and events[-1] == f"fsync {tmp_path}"
    events.clear()
    with deferred_folder_sync(tmp_path / "elsewhere"):
        pass
    assert events == []  # nothing renamed into it: nothing to fsync


def _dead_pid() -> int:
    # A process that has exited (and been reaped): its id names no live process.
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_temporaries_of_dead_writers_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    from trainkit.utilities.io import remove_stale_temporaries, temporary_prefix

    dead = temporary_prefix(tmp_path / "last.ckpt").replace(f"-{os.getpid()}-", f"-{_dead_pid()}-")
    (tmp_path / f"{dead}abc123").write_bytes(b"partial")
    live = tmp_path / f"{temporary_prefix(tmp_path / 'last.ckpt')}xyz"  # this process: writing
    live.write_bytes(b"partial")
    (tmp_path / ".notes.tmp-old").write_text("not trainkit's")  # not our pattern: kept
    (tmp_path / "last.ckpt").write_bytes(b"the user's")
    assert remove_stale_temporaries(tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, ".notes.tmp-old", "last.ckpt"]
    )
    # A live writer's file that has not changed for an hour is stale too (a reused id).
    old = time.time() - 2 * STALE_AFTER_SECONDS
    os.utime(live, (old, old))
    assert remove_stale_temporaries(tmp_path) == 1 and not live.exists()


def test_the_next_write_of_a_file_removes_its_dead_temporaries(tmp_path: Path) -> None:
    from trainkit.utilities.io import temporary_prefix

    dead = temporary_prefix(tmp_path / "a.txt").replace(f"-{os.getpid()}-", f"-{_dead_pid()}-")
    (tmp_path / f"{dead}q1w2e3").write_text("half")
    with atomic_write(tmp_path / "a.txt") as file:
        file.write("whole")
    assert os.listdir(tmp_path) == ["a.txt"]


def test_a_full_disk_names_the_file_and_leaves_the_previous_one(tmp_path: Path) -> None:
    target = tmp_path / "metrics.csv"
    target.write_text("old")
    full = f"No space left on device while writing {target}"
    with pytest.raises(OSError, match=full) as info, atomic_write(target) as file:
        file.write("new")
        raise OSError(errno.ENOSPC, "No space left on device")
    assert info.value.errno == errno.ENOSPC
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["metrics.csv"]

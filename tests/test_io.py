"""The one atomic writer: a file is complete or untouched, and no temporary file is left."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainkit.io import atomic_write


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

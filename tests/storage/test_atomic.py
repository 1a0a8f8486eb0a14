"""Atomic writes survive a power loss: the new file is fsynced before it is renamed into place,
and the folder after, so both the bytes and the rename are on disk."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pandas as pd
import pytest

from ragkit.storage.atomic import publish_dir, write_bytes_atomic, write_json_atomic, write_parquet_atomic

pytestmark = pytest.mark.unit


@pytest.fixture
def disk_events(monkeypatch) -> list[tuple[str, int, bool]]:
    """(event, inode, is folder) for every fsync and rename, in order."""
    events: list[tuple[str, int, bool]] = []
    real_fsync, real_replace, real_rename = os.fsync, os.replace, os.rename

    def fsync(fd: int) -> None:
        info = os.fstat(fd)
        events.append(("fsync", info.st_ino, stat.S_ISDIR(info.st_mode)))
        real_fsync(fd)

    def renamer(real, name):
        def rename(src, dst) -> None:
            info = os.stat(src)
            events.append((name, info.st_ino, stat.S_ISDIR(info.st_mode)))
            real(src, dst)
        return rename

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", renamer(real_replace, "replace"))
    monkeypatch.setattr(os, "rename", renamer(real_rename, "rename"))
    return events


WRITERS = {
    "bytes": lambda path: write_bytes_atomic(path, b"payload"),
    "json": lambda path: write_json_atomic(path, {"a": 1}),
    "parquet": lambda path: write_parquet_atomic(path, pd.DataFrame({"a": [1, 2]})),
}


def inode(path: Path) -> int:
    return os.stat(path).st_ino


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_a_write_fsyncs_the_file_then_renames_then_fsyncs_its_folder(kind, tmp_path, disk_events):
    target = tmp_path / "new" / "folder" / "file.out"
    WRITERS[kind](target)
    written, folder = inode(target), inode(target.parent)  # a rename keeps the temporary file's inode
    file_sync = disk_events.index(("fsync", written, False))
    rename = disk_events.index(("replace", written, False))
    folder_syncs = [i for i, event in enumerate(disk_events) if event == ("fsync", folder, True)]
    assert file_sync < rename < max(folder_syncs)
    # the folders the write created are durable in their parents too
    synced = {node for event, node, is_dir in disk_events if event == "fsync" and is_dir}
    assert {inode(tmp_path), inode(tmp_path / "new")} <= synced


def test_a_write_that_fails_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "file.json"
    write_json_atomic(target, {"version": 1})

    def crash(src, dst) -> None:
        raise OSError("power cut")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="power cut"):
        write_json_atomic(target, {"version": 2})
    assert target.read_text(encoding="utf-8") == '{\n  "version": 1\n}'
    assert [p.name for p in tmp_path.iterdir()] == ["file.json"]


def test_publishing_a_folder_fsyncs_every_file_in_it_before_the_rename(tmp_path, disk_events):
    built = tmp_path / "staging" / "table"
    (built / "data").mkdir(parents=True)
    (built / "data" / "part.bin").write_bytes(b"rows")
    (built / "manifest").write_bytes(b"v1")
    inner = {inode(p) for p in (built / "data" / "part.bin", built / "manifest", built / "data", built)}
    target = tmp_path / "db" / "table"
    publish_dir(built, target)

    assert (target / "data" / "part.bin").read_bytes() == b"rows" and not built.exists()
    rename = disk_events.index(("rename", inode(target), True))
    before = {inode for event, inode, _ in disk_events[:rename] if event == "fsync"}
    after = {inode for event, inode, _ in disk_events[rename:] if event == "fsync"}
    assert inner <= before
    assert inode(target.parent) in after


def test_publishing_onto_an_existing_folder_fails_and_keeps_it(tmp_path):
    (tmp_path / "built").mkdir()
    (tmp_path / "built" / "f").write_text("new")
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "f").write_text("old")
    with pytest.raises(OSError):
        publish_dir(tmp_path / "built", tmp_path / "target")
    assert (tmp_path / "target" / "f").read_text() == "old"

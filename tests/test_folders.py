"""A local results folder's listing: sorted by name, temporary files of an atomic write left out,
a tag that changes with the file, nothing for a folder that does not exist."""

from __future__ import annotations

import os

import pytest

from ragkit.folders import LocalFolder

pytestmark = pytest.mark.unit


def test_a_listing_is_sorted_skips_temporary_files_and_tags_each_version(tmp_path):
    folder = LocalFolder(tmp_path)
    (tmp_path / "_commits").mkdir()
    for name in ("r2-b.json", "r1-a.json", ".r3-c.json.x1y2.tmp", "._r1-a.json", "notes.txt"):
        (tmp_path / "_commits" / name).write_text("{}")
    listed = folder.list("_commits", ".json")
    assert [entry.stem for entry in listed] == ["r1-a", "r2-b"]
    assert listed[0].path == str(tmp_path / "_commits" / "r1-a.json")
    before = listed[0].tag
    (tmp_path / "_commits" / "r1-a.json").write_text('{"run_id": "r1"}')
    os.utime(tmp_path / "_commits" / "r1-a.json", ns=(1, 1))
    assert folder.list("_commits", ".json")[0].tag != before
    assert folder.list("scores", ".parquet") == []  # not written yet
    (tmp_path / "runs").write_text("a file where a folder is expected")
    assert folder.list("runs", ".parquet") == []

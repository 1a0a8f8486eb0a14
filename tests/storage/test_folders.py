"""A local results folder's listing: sorted by name, temporary files of an atomic write left out,
a tag that changes with the file, nothing for a folder that does not exist; the results folders
under a root, where a listed name lives, and which errors mean object storage cannot be read."""

from __future__ import annotations

import os

import pytest

from ragkit.errors import ConfigError
from ragkit.storage.folders import LocalFolder, local_results_folders, results_location, storage_errors

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


def test_local_results_folders_are_the_subfolders_with_a_runs_table_by_name(tmp_path):
    assert local_results_folders(tmp_path / "missing") == []
    for name in ("zeta", "alpha"):
        (tmp_path / name / "runs").mkdir(parents=True)
    (tmp_path / "empty").mkdir()
    (tmp_path / "file-runs").mkdir()
    (tmp_path / "file-runs" / "runs").write_text("a file, not a table")
    assert local_results_folders(tmp_path) == ["alpha", "zeta"]
    assert results_location("alpha", tmp_path) == tmp_path / "alpha"
    assert results_location("s3://bucket/results/alpha", tmp_path) == "s3://bucket/results/alpha"


def test_storage_errors_cover_what_an_unreachable_object_store_raises():
    from botocore.exceptions import EndpointConnectionError, NoCredentialsError

    errors = storage_errors()
    for error in (ConfigError("no s3 extra"), OSError("pyarrow S3"), EndpointConnectionError(endpoint_url="x"),
                  NoCredentialsError()):
        assert isinstance(error, errors)
    assert not issubclass(ValueError, errors)

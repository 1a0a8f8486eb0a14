"""The stamp of a local results folder (the dashboard's cache key for it) changes whenever a run
row or commit marker is added, replaced or removed, both while the folder is busy (writes within
one clock tick) and once it has been quiet (stamped by the folder's modification time alone)."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest

from ragkit.storage import folder_stamps
from ragkit.storage.atomic import write_bytes_atomic

pytestmark = pytest.mark.unit


def _age(folder, seconds: float) -> None:
    """As if the folder's last change were ``seconds`` ago."""
    then = time.time() - seconds
    os.utime(folder, (then, then))


@pytest.mark.parametrize("quiet", [False, True])
def test_every_added_replaced_or_removed_file_changes_the_stamp(tmp_path, quiet):
    runs = tmp_path / "runs"
    write_bytes_atomic(runs / "r1.parquet", b"one")
    stamps = []
    for change in (lambda: write_bytes_atomic(runs / "r2.parquet", b"two"),  # added
                   lambda: write_bytes_atomic(runs / "r1.parquet", b"one again"),  # replaced
                   lambda: (runs / "r2.parquet").unlink()):  # removed
        if quiet:
            _age(runs, 10 * folder_stamps.QUIET_FOLDER_S)
        before = folder_stamps.local_results_stamp(tmp_path)
        change()
        stamps.append(before)
        assert folder_stamps.local_results_stamp(tmp_path) != before
    assert len(set(stamps)) == len(stamps)


def test_a_quiet_folder_is_listed_once_then_stamped_with_one_stat(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    for i in range(5):
        write_bytes_atomic(runs / f"r{i}.parquet", b"x")
    _age(runs, 10 * folder_stamps.QUIET_FOLDER_S)
    first = folder_stamps.local_results_stamp(tmp_path)
    monkeypatch.setattr(folder_stamps, "folder_stamp", lambda folder: pytest.fail("every file was stat'ed again"))
    assert folder_stamps.local_results_stamp(tmp_path) == folder_stamps.local_results_stamp(tmp_path) == first


def test_the_stamp_of_a_folder_does_not_depend_on_when_it_is_asked(tmp_path, monkeypatch):
    """Sessions asking just before and just after the folder turns quiet get one stamp (one cache key)."""
    runs = tmp_path / "runs"
    write_bytes_atomic(runs / "r1.parquet", b"one")
    changed = runs.stat().st_mtime_ns / 1e9
    stamps = []
    for seconds_later in (0.5, 10 * folder_stamps.QUIET_FOLDER_S, 0.5):
        monkeypatch.setattr(folder_stamps, "time", SimpleNamespace(time=lambda now=changed + seconds_later: now))
        stamps.append(folder_stamps.local_results_stamp(tmp_path))
    assert stamps[0] == stamps[1] == stamps[2]


def test_a_busy_folder_changed_within_one_tick_still_changes_the_stamp(tmp_path):
    runs = tmp_path / "runs"
    write_bytes_atomic(runs / "r1.parquet", b"one")
    before = folder_stamps.local_results_stamp(tmp_path)
    folder_time = runs.stat().st_mtime_ns
    time.sleep(0.01)
    write_bytes_atomic(runs / "r1.parquet", b"one, replaced")
    os.utime(runs, ns=(folder_time, folder_time))  # the replacement fell in the same clock tick
    assert folder_stamps.local_results_stamp(tmp_path) != before

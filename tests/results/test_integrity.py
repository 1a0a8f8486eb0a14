"""Parts are checked when read: a damaged or missing one is left out and named, and set aside
its questions are uncommitted, exactly those of its shard (ragkit.results.integrity)."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from ragkit.results import ResultStore
from ragkit.results.check import check_folder, repair
from ragkit.results.integrity import find_damaged, set_aside
from ragkit.results.schema import COMMITS, DAMAGED

pytestmark = pytest.mark.unit

SHARDS = {"s1": ["a", "b"], "s2": ["c", "d"], "s3": ["e"]}


def _scores(ids: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"run_id": "r1", "question_id": ids, "metric": "mrr", "value": 1.0, "error": None})


def _three_shards(store: ResultStore) -> dict[str, str]:
    """Commit three shards of run r1; shard name -> its part."""
    parts = {}
    for shard, ids in SHARDS.items():
        before = {entry.stem for entry in store.files.list(COMMITS, ".json")}
        store.commit_shard("r1", ids, {"scores": _scores(ids)}, [f"k{q}" for q in ids])
        (parts[shard],) = {entry.stem for entry in store.files.list(COMMITS, ".json")} - before
    return parts


def _truncate(path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _random_bytes(path) -> None:
    path.write_bytes(os.urandom(100))


def _same_size_flip(path) -> None:
    """One byte changed in the middle: the size is right, only the checksum can tell."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


DAMAGE = {"truncated": _truncate, "random bytes": _random_bytes, "one byte flipped": _same_size_flip,
          "missing": lambda path: path.unlink()}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_damaged_shard_is_left_out_named_and_set_aside_uncommitting_exactly_its_questions(tmp_path, kind):
    store = ResultStore(tmp_path)
    parts = _three_shards(store)
    damaged = tmp_path / "scores" / f"{parts['s2']}.parquet"
    DAMAGE[kind](damaged)

    # A reader gets what it can read and names the rest, instead of stopping.
    read = store.read("scores")
    assert sorted(read["question_id"]) == ["a", "b", "e"]
    (warning,) = store.unreadable()
    assert warning.startswith(f"warning: scores/{parts['s2']}.parquet could not be read (")
    assert warning.endswith("its rows are left out; `ragkit run` recomputes them")
    assert ("(missing)" in warning) == (kind == "missing")

    found = find_damaged(store)
    assert [(item.part, item.question_ids, list(item.problems)) for item in found] == [
        (parts["s2"], ["c", "d"], ["scores"])]
    set_aside(store, found)
    # Exactly the damaged shard's questions are no longer committed; its files are kept aside.
    assert store.completed_keys() == {"r1": {("a", "ka"), ("b", "kb"), ("e", "ke")}}
    (aside,) = (tmp_path / DAMAGED).iterdir()
    assert json.loads((aside / "reason.json").read_text())["question_ids"] == ["c", "d"]
    assert (aside / "commit.json").exists() and (aside / "stages.parquet").exists()
    assert (aside / "scores.parquet").exists() == (kind != "missing")
    assert store.unreadable() == [] and find_damaged(store) == []
    assert not list((tmp_path / "stages").glob(f"{parts['s2']}*"))  # no orphan left beside the others


def test_a_part_committed_before_checksums_is_checked_by_being_readable(tmp_path):
    store = ResultStore(tmp_path)
    parts = _three_shards(store)
    for part in parts.values():  # markers as written before this change: no digests
        marker = tmp_path / COMMITS / f"{part}.json"
        record = json.loads(marker.read_text())
        del record["files"]
        marker.write_text(json.dumps(record))
    assert [item.part for item in find_damaged(store)] == []
    _random_bytes(tmp_path / "scores" / f"{parts['s3']}.parquet")
    (found,) = find_damaged(store)
    assert found.part == parts["s3"] and "not readable as Parquet" in found.problems["scores"]
    assert sorted(store.read("scores")["question_id"]) == ["a", "b", "c", "d"]


def test_an_unreadable_marker_makes_its_shard_damaged(tmp_path):
    store = ResultStore(tmp_path)
    parts = _three_shards(store)
    (tmp_path / COMMITS / f"{parts['s1']}.json").write_bytes(os.urandom(50))
    assert sorted(store.read("scores")["question_id"]) == ["c", "d", "e"]
    (found,) = find_damaged(store)
    assert found.part == parts["s1"] and "marker" in found.problems


def test_check_lists_damage_orphans_and_stale_copies_and_repair_leaves_none(tmp_path):
    store = ResultStore(tmp_path)
    parts = _three_shards(store)
    store.write_run("r1", {"run_id": "r1"})
    store.merge()
    _truncate(tmp_path / "scores" / f"{parts['s1']}.parquet")
    (tmp_path / "scores" / "r1-0123456789ab.parquet").write_bytes(_scores(["z"]).to_parquet(index=False))
    (tmp_path / "stages" / ".r1-0123456789ab.parquet.x1y2.tmp").write_bytes(b"half a write")
    _truncate(tmp_path / "_merged" / "stages.parquet")

    found = check_folder(store)
    assert [item.part for item in found.damaged] == [parts["s1"]]
    assert found.orphans == ["scores/r1-0123456789ab.parquet", "stages/.r1-0123456789ab.parquet.x1y2.tmp"]
    assert [item.split(":")[0] for item in found.stale_copies] == ["_merged/scores.parquet", "_merged/stages.parquet"]
    assert not found.clean

    done = repair(store, found)
    assert done[0].startswith(f"set aside: {parts['s1']} in {DAMAGED}/")
    assert "removed: scores/r1-0123456789ab.parquet" in done and "rebuilt: _merged/stages.parquet" in done
    after = check_folder(store)
    assert after.clean, after.lines()
    assert sorted(store.read("scores", columns=["question_id"])["question_id"]) == ["c", "d", "e"]


def test_a_warning_ends_once_its_part_is_committed_again_even_unread(tmp_path):
    """A long-lived page process names a damaged part; `ragkit run` in another process commits it
    again (same part name): the warning goes, although reads now come from elsewhere."""
    store = ResultStore(tmp_path)
    parts = _three_shards(store)
    _random_bytes(tmp_path / "scores" / f"{parts['s2']}.parquet")
    store.read("scores")
    assert len(store.unreadable()) == 1
    store.commit_shard("r1", SHARDS["s2"], {"scores": _scores(SHARDS["s2"])}, [f"k{q}" for q in SHARDS["s2"]])
    assert store.unreadable() == []


def test_a_merged_copy_damaged_inside_is_caught_by_its_page_checksums_and_ignored(tmp_path):
    store = ResultStore(tmp_path)
    for shard in range(3):
        ids = [f"q{shard}-{i}" for i in range(100)]
        frame = pd.concat([_scores(ids).assign(metric=f"m{m}", value=float(m)) for m in range(20)], ignore_index=True)
        store.commit_shard("r1", ids, {"scores": frame})
    store.write_run("r1", {"run_id": "r1"})
    store.merge()
    columns = ["run_id", "question_id", "metric", "value"]
    before = store.read("scores", columns=columns).sort_values(columns, ignore_index=True)
    copy = tmp_path / "_merged" / "scores.parquet"
    data = bytearray(copy.read_bytes())
    data[200] ^= 0xFF  # inside the first data page: the footer still reads
    copy.write_bytes(bytes(data))

    after = ResultStore(tmp_path).read("scores", columns=columns).sort_values(columns, ignore_index=True)
    pd.testing.assert_frame_equal(after, before)  # read from the parts instead
    (warning,) = store.unreadable()
    assert warning.startswith("warning: _merged/scores.parquet could not be read (")
    assert [item.split(":")[0] for item in check_folder(store).stale_copies] == ["_merged/scores.parquet"]

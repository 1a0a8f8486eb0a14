"""Merged read copies (ragkit.results.copies): reading through one gives exactly the rows the parts give,
whatever happened to the folder since it was written."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from ragkit.cli import main
from ragkit.results import ResultStore, staleness
from ragkit.results import parts as part_store
from ragkit.results.copies import merged_copy
from ragkit.results.parts import PartStore, read_parquet_file
from ragkit.results.schema import MERGED

pytestmark = pytest.mark.unit

METRICS = ["mrr", "recall@1", "recall@5", "ndcg@10"]
CATEGORIES = ("run_id", "question_id", "metric")
COLUMNS = ["run_id", "question_id", "metric", "value", "error"]


def _questions(ids: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"question_id": ids, "text": ids, "document": "d", "n_relevant_docs": 1,
                         "n_answer_groups": 1, "question_key": [f"k-{qid}" for qid in ids]})


def _commit(store: ResultStore, run_id: str, ids: list[str], seed: int, keys: dict[str, str] | None = None) -> None:
    rng = np.random.default_rng(seed)
    scores = pd.DataFrame({"run_id": run_id, "question_id": np.repeat(ids, len(METRICS)),
                           "metric": np.tile(METRICS, len(ids)), "value": rng.uniform(size=len(ids) * len(METRICS)),
                           "error": None})
    scores.loc[scores.index[::7], ["value", "error"]] = [np.nan, "timeout"]
    stages = pd.DataFrame({"run_id": run_id, "question_id": ids, "stage": "retrieve",
                           "seconds": rng.uniform(size=len(ids)), "cached": False})
    keys = keys or {qid: f"k-{qid}" for qid in ids}
    store.commit_shard(run_id, ids, {"scores": scores, "stages": stages}, [keys[qid] for qid in ids])


def _folder(tmp_path, runs: int = 4) -> ResultStore:
    store = ResultStore(tmp_path)
    ids = [f"q{i}" for i in range(10)]
    store.write_questions("set", _questions(ids))
    for run in range(runs):
        run_id = f"r{run}"
        store.write_run(run_id, {"run_id": run_id, "questions_key": "set"})
        _commit(store, run_id, ids[:5], seed=run)
        _commit(store, run_id, ids[5:], seed=100 + run)
        store.compact_run(run_id)
    return store


def _read(store: ResultStore, name: str = "scores", **options) -> pd.DataFrame:
    columns = COLUMNS if name == "scores" else ["run_id", "question_id", "stage", "seconds"]
    frame = store.read(name, categorical=CATEGORIES if name == "scores" else ("run_id",), columns=columns, **options)
    frame = frame.astype({column: "string" for column in columns if column in CATEGORIES or column == "stage"})
    return frame.sort_values(columns[:3], ignore_index=True)


def _read_as_arrow(store: ResultStore, **options) -> pd.DataFrame:
    """``_read`` of scores through ``read_table`` (the score matrices' read)."""
    table = store.read_table("scores", COLUMNS, categorical=CATEGORIES, **options)
    frame = table.unify_dictionaries().to_pandas().astype(dict.fromkeys(CATEGORIES, "string"))
    return frame.sort_values(COLUMNS[:3], ignore_index=True)


def _without_merged(store: ResultStore, name: str = "scores", **options) -> pd.DataFrame:
    """What the parts alone give."""
    path = store.root / MERGED / f"{name}.parquet"
    kept = path.read_bytes() if path.exists() else None
    path.unlink(missing_ok=True)
    try:
        return _read(store, name, **options)
    finally:
        if kept is not None:
            path.write_bytes(kept)


@pytest.mark.parametrize("options", [{}, {"metrics": ["recall@5", "mrr"]}, {"run_ids": ["r1", "r3"]},
                                     {"run_ids": ["r2"], "metrics": ["ndcg@10"]}])
def test_a_merged_copy_reads_exactly_what_the_parts_read(tmp_path, options):
    store = _folder(tmp_path)
    expected = _read(store, **options)
    pd.testing.assert_frame_equal(_read_as_arrow(store, **options), expected)
    assert store.merge() == {"runs": 4, "scores": 4, "stages": 4, "judgements": 4}
    assert merged_copy(store, "scores") is not None
    pd.testing.assert_frame_equal(_read(store, **options), expected)
    pd.testing.assert_frame_equal(_read_as_arrow(store, **options), expected)
    pd.testing.assert_frame_equal(_read(store, "stages", run_ids=options.get("run_ids")),
                                  _without_merged(store, "stages", run_ids=options.get("run_ids")))


def test_the_reader_takes_every_row_from_the_copy_and_opens_no_part(tmp_path, monkeypatch):
    store = _folder(tmp_path)
    store.merge()
    expected = _without_merged(store)
    import pyarrow.dataset

    def no_parts(*args, **kwargs):
        raise AssertionError("a part file was opened")

    monkeypatch.setattr(pyarrow.dataset, "dataset", no_parts)
    pd.testing.assert_frame_equal(_read(store), expected)
    pd.testing.assert_frame_equal(_read(store, metrics=["mrr"]), expected[expected["metric"] == "mrr"]
                                  .reset_index(drop=True))
    # A part rewritten since (its tag changed) is read from its own file, not from the copy.
    part = next((tmp_path / "scores").glob("*.parquet"))
    part.write_bytes(part.read_bytes())
    with pytest.raises(AssertionError, match="a part file was opened"):
        _read(store)


def test_runs_committed_after_the_merge_are_read_from_their_parts(tmp_path):
    store = _folder(tmp_path)
    store.merge()
    store.write_run("r9", {"run_id": "r9", "questions_key": "set"})
    _commit(store, "r9", ["q0", "q1"], seed=9)
    got = _read(store)
    pd.testing.assert_frame_equal(got, _without_merged(store))
    assert (got["run_id"] == "r9").sum() == 2 * len(METRICS)
    assert store.merge() == {"runs": 5, "scores": 5, "stages": 5, "judgements": 5}
    assert store.merge() == {}  # then up to date


def test_a_run_compacted_after_the_merge_is_not_read_twice(tmp_path):
    store = ResultStore(tmp_path)
    store.write_questions("set", _questions([f"q{i}" for i in range(10)]))
    store.write_run("r0", {"run_id": "r0", "questions_key": "set"})
    _commit(store, "r0", ["q0", "q1", "q2"], seed=1)
    _commit(store, "r0", ["q3", "q4"], seed=2)
    store.merge()  # copies the two shard parts
    assert store.compact_run("r0")  # replaces them by one part the copy does not hold
    got = _read(store)
    assert len(got) == 5 * len(METRICS) and not got.duplicated(["run_id", "question_id", "metric"]).any()
    pd.testing.assert_frame_equal(got, _without_merged(store))


def test_stale_rows_are_dropped_when_the_copy_holds_them(tmp_path):
    store = _folder(tmp_path)
    store.merge()
    # q3's text changes: the set's key for it changes, so every run's q3 rows are stale.
    ids = [f"q{i}" for i in range(10)]
    questions = _questions(ids)
    questions.loc[3, "question_key"] = "k-q3-edited"
    store.write_questions("set", questions)
    got = _read(store)
    assert "q3" not in set(got["question_id"]) and len(got) == 4 * 9 * len(METRICS)
    pd.testing.assert_frame_equal(got, _without_merged(store))


def test_each_row_group_of_a_merged_scores_copy_holds_one_metric(tmp_path):
    store = _folder(tmp_path)
    store.merge()
    metadata = pq.ParquetFile(tmp_path / MERGED / "scores.parquet").metadata
    column = [metadata.schema.column(i).name for i in range(metadata.num_columns)].index("metric")
    seen = []
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(column).statistics
        assert stats.min == stats.max
        seen.append(stats.min)
    assert sorted(seen) == sorted(METRICS)


def test_a_file_that_is_not_a_merged_copy_is_ignored(tmp_path):
    store = _folder(tmp_path)
    expected = _read(store)
    (tmp_path / MERGED).mkdir()
    (tmp_path / MERGED / "scores.parquet").write_bytes(b"garbage")
    assert merged_copy(store, "scores") is None
    pd.testing.assert_frame_equal(_read(store), expected)
    pd.DataFrame({"run_id": ["x"]}).to_parquet(tmp_path / MERGED / "scores.parquet")  # Parquet, but no index
    assert merged_copy(store, "scores") is None
    pd.testing.assert_frame_equal(_read(store), expected)


def test_ragkit_compact_writes_the_merged_copies(tmp_path, capsys):
    _folder(tmp_path)
    assert main(["compact", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path}: merged read copies written: runs, scores, stages, judgements" in out
    assert main(["compact", str(tmp_path)]) == 0
    assert "merged" not in capsys.readouterr().out  # already up to date


def test_the_runs_table_is_read_from_its_copy_until_a_run_file_changes(tmp_path, monkeypatch):
    store = _folder(tmp_path)
    expected = store.read("runs")
    store.merge()
    part_store._RUNS.clear()
    opened = []
    monkeypatch.setattr(part_store, "read_parquet_file",
                        lambda entry, fs: opened.append(entry.stem) or read_parquet_file(entry, fs))
    pd.testing.assert_frame_equal(store.read("runs"), expected)
    assert opened == ["runs"]  # the copy alone
    store.write_run("r1", {"run_id": "r1", "questions_key": "set", "note": "changed"})
    opened.clear()
    runs = store.read("runs")
    assert sorted(opened) == ["r0", "r1", "r2", "r3"] and runs.set_index("run_id").loc["r1", "note"] == "changed"



def test_markers_checked_at_the_merge_are_not_read_again_until_they_or_their_question_set_change(tmp_path,
                                                                                             monkeypatch):
    store = _folder(tmp_path)
    store.merge()
    read = []
    original = PartStore.marker_record
    monkeypatch.setattr(PartStore, "marker_record", lambda self, part: read.append(part) or original(self, part))
    staleness._STALE.clear()
    part_store._MARKER_METRICS.clear()
    assert store.stale_keys() == set() and store.metric_names() == sorted(METRICS)
    assert read == []  # every marker checked clean at the merge, none changed
    # A question set rewritten with one question edited: its runs' markers are read and checked again.
    questions = _questions([f"q{i}" for i in range(10)])
    questions.loc[0, "question_key"] = "k-q0-edited"
    store.write_questions("set", questions)
    assert {run_id for run_id, _, _ in store.stale_keys()} == {"r0", "r1", "r2", "r3"}
    assert len(read) == 4


def test_a_copy_written_before_a_column_existed_is_not_used_for_it(tmp_path):
    store = _folder(tmp_path)
    store.merge()
    path = tmp_path / MERGED / "scores.parquet"
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["error"]), path)  # as an older schema, index kept
    assert merged_copy(store, "scores") is not None
    pd.testing.assert_frame_equal(_read(store), _without_merged(store))


def test_stale_runs_read_from_their_parts_and_current_ones_from_the_copy_make_one_table(tmp_path):
    store = _folder(tmp_path)
    ids = [f"q{i}" for i in range(4)]
    store.write_questions("other", _questions(ids))
    store.write_run("r9", {"run_id": "r9", "questions_key": "other"})
    _commit(store, "r9", ids, seed=9)
    store.merge()
    edited = _questions(ids)
    edited.loc[1, "question_key"] = "k-q1-edited"  # only r9's set changes: only r9 has stale rows
    store.write_questions("other", edited)
    assert {run_id for run_id, _, _ in store.stale_keys()} == {"r9"}
    for options in ({}, {"metrics": ["mrr"]}):
        got = _read(store, **options)
        pd.testing.assert_frame_equal(got, _without_merged(store, **options))
        pd.testing.assert_frame_equal(_read_as_arrow(store, **options), got)
        assert set(got.loc[got["run_id"] == "r9", "question_id"]) == {"q0", "q2", "q3"}
        assert (got["run_id"] == "r0").sum() == 10 * len(options.get("metrics", METRICS))

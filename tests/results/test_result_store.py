"""ResultStore: a shard counts only once committed; uncommitted parts are invisible."""

from __future__ import annotations

import pandas as pd
import pytest

from ragkit.results import ResultStore
from ragkit.results.schema import is_evaluation_stage

pytestmark = pytest.mark.unit


def _scores(run_id: str, ids: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"run_id": run_id, "question_id": ids, "metric": "mrr", "value": 1.0, "error": None})


def test_committed_shards_are_read_back(tmp_path):
    store = ResultStore(tmp_path)
    store.commit_shard("r1", ["a", "b"], {"scores": _scores("r1", ["a", "b"])})
    store.commit_shard("r1", ["c"], {"scores": _scores("r1", ["c"])})
    assert sorted(store.read("scores")["question_id"]) == ["a", "b", "c"]
    assert store.completed_questions() == {"r1": {"a", "b", "c"}}
    assert store.read("retrievals").empty


def test_parts_without_a_commit_marker_are_ignored(tmp_path):
    store = ResultStore(tmp_path)
    store.commit_shard("r1", ["a"], {"scores": _scores("r1", ["a"])})
    # A crash between writing a part and its marker leaves an orphan part.
    (tmp_path / "scores" / "r1-orphan.parquet").write_bytes(
        _scores("r1", ["z"]).to_parquet(index=False)
    )
    assert list(store.read("scores")["question_id"]) == ["a"]
    assert store.completed_questions() == {"r1": {"a"}}


def test_unknown_table_lists_valid_ones(tmp_path):
    with pytest.raises(ValueError, match="Valid tables: runs, scores, retrievals, stages"):
        ResultStore(tmp_path).read("nope")


@pytest.mark.parametrize(("stage", "evaluating"), [
    ("eval", True), ("eval:faithfulness", True),
    ("generate", False), ("judge:rerank", False), ("evaluator", False), (None, False),
])
def test_evaluation_stages_are_eval_and_eval_metric_only(stage, evaluating):
    for dtype in ("string", "category"):
        assert is_evaluation_stage(pd.Series([stage], dtype=dtype)).tolist() == [evaluating]


def _questions(ids: list[str], document: str) -> pd.DataFrame:
    return pd.DataFrame({"question_id": ids, "text": "t", "document": document, "n_relevant_docs": 1,
                         "n_answer_groups": 1})


def test_questions_are_the_union_of_every_question_set(tmp_path):
    store = ResultStore(tmp_path)
    store.write_questions("set-a", _questions(["q1", "q2"], "d1"))
    store.write_questions("set-b", _questions(["q2", "q3"], "d1"))
    store.write_questions("set-a", _questions(["q1", "q2"], "d1"))  # a re-run rewrites its own file
    questions = store.read("questions")
    assert sorted(questions["question_id"]) == ["q1", "q2", "q3"]
    assert questions["n_answer_groups"].dtype == "int64"
    assert sorted(p.name for p in (tmp_path / "questions").iterdir()) == ["set-a.parquet", "set-b.parquet"]


def test_a_results_folder_from_before_the_questions_table_reads_an_empty_one(tmp_path):
    store = ResultStore(tmp_path)
    store.commit_shard("r1", ["a"], {"scores": _scores("r1", ["a"])})
    questions = store.read("questions")
    assert questions.empty
    assert list(questions.columns) == ["question_id", "text", "document", "n_relevant_docs", "n_answer_groups",
                                      "question_key"]


def test_retrievals_written_before_the_tokens_column_read_it_as_null(tmp_path):
    store = ResultStore(tmp_path)
    chunk = {"run_id": "r1", "question_id": "a", "rank": 1, "chunk_id": "d:0", "doc_id": "d", "start_char": 0,
             "end_char": 9, "score": 1.0}
    store.commit_shard("r1", ["a"], {"retrievals": pd.DataFrame([{**chunk, "tokens": 3}])})
    old = pd.DataFrame([{**chunk, "question_id": "b"}]).astype({"rank": "int64", "start_char": "int64",
                                                                  "end_char": "int64"})
    (tmp_path / "retrievals" / "r1-old.parquet").write_bytes(old.to_parquet(index=False))
    (tmp_path / "_commits" / "r1-old.json").write_text('{"run_id": "r1", "question_ids": ["b"]}')
    tokens = store.read("retrievals").set_index("question_id")["tokens"]
    assert tokens["a"] == 3 and pd.isna(tokens["b"])


def _three_shards(store: ResultStore) -> None:
    for ids in (["a", "b"], ["c"], ["d"]):
        store.commit_shard("r1", ids, {"scores": _scores("r1", ids),
                                       "stages": pd.DataFrame({"run_id": "r1", "question_id": ids, "stage": "retrieve",
                                                               "seconds": 0.5})},
                           [f"k{qid}" for qid in ids])
    store.commit_shard("r2", ["a"], {"scores": _scores("r2", ["a"])}, ["ka"])


def _files(folder) -> list[str]:
    return sorted(p.stem for p in folder.glob("*")) if folder.exists() else []


def test_a_finished_run_compacts_into_one_part_per_table_and_reads_the_same(tmp_path):
    store = ResultStore(tmp_path)
    _three_shards(store)
    before = {name: store.read(name) for name in ("scores", "stages")}
    keys, metrics = store.completed_keys(), store.metric_names()

    assert store.compact_run("r1") and not store.compact_run("r2")  # r2 has one part already
    assert len([p for p in _files(tmp_path / "_commits") if p.startswith("r1-")]) == 1
    assert len([p for p in _files(tmp_path / "scores") if p.startswith("r1-")]) == 1
    for name, frame in before.items():
        pd.testing.assert_frame_equal(store.read(name).sort_values(["run_id", "question_id"]).reset_index(drop=True),
                                      frame.sort_values(["run_id", "question_id"]).reset_index(drop=True))
    assert store.completed_keys() == keys and store.metric_names() == metrics
    assert not store.compact_run("r1")  # nothing left to merge

    # More questions later: the merged part and the new shard merge again.
    store.commit_shard("r1", ["e"], {"scores": _scores("r1", ["e"])}, ["ke"])
    assert store.compact_run("r1")
    assert sorted(store.read("scores", run_ids=["r1"])["question_id"]) == ["a", "b", "c", "d", "e"]


def test_a_compaction_that_stops_before_removing_the_old_parts_reads_no_row_twice(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    _three_shards(store)
    monkeypatch.setattr(store.files, "delete", lambda relative: None)  # killed right after the merged marker
    assert store.compact_run("r1")
    assert len([p for p in _files(tmp_path / "_commits") if p.startswith("r1-")]) == 4
    scores = store.read("scores")
    assert sorted(scores.loc[scores["run_id"] == "r1", "question_id"]) == ["a", "b", "c", "d"]
    assert store.completed_questions() == {"r1": {"a", "b", "c", "d"}, "r2": {"a"}}


def _old_shards(store: ResultStore, tmp_path) -> None:
    """Three parts of r1 as results from before question keys and marker metrics were written."""
    import json

    for ids in (["a", "b"], ["c"], ["d"]):
        store.commit_shard("r1", ids, {"scores": _scores("r1", ids)})
    store.write_run("r1", {"run_id": "r1", "top_k": 1})
    for marker in (tmp_path / "_commits").glob("*.json"):
        record = json.loads(marker.read_text())
        del record["metrics"]
        marker.write_text(json.dumps(record))


def test_ragkit_compact_merges_a_folder_written_before_question_keys_and_it_reads_the_same(tmp_path, capsys):
    import json

    from ragkit.cli import main

    store = ResultStore(tmp_path)
    _old_shards(store, tmp_path)
    before, metrics, done = store.read("scores"), store.metric_names(), store.completed_questions()
    assert main(["compact", str(tmp_path)]) == 0
    compacted = f"{tmp_path}: 1 run(s) compacted from 3 parts into one part per table each"
    assert capsys.readouterr().out.splitlines() == [
        compacted, f"{tmp_path}: merged read copies written: runs, scores, stages, judgements"]
    markers = list((tmp_path / "_commits").glob("*.json"))
    assert len(markers) == 1 and len(list((tmp_path / "scores").glob("*.parquet"))) == 1
    # What the old parts' markers said, no more: no keys, no metric list (read from the scores);
    # and the checksums of the parts it wrote.
    assert set(json.loads(markers[0].read_text())) == {"run_id", "question_ids", "replaces", "files"}
    pd.testing.assert_frame_equal(store.read("scores").sort_values("question_id").reset_index(drop=True),
                                  before.sort_values("question_id").reset_index(drop=True))
    assert store.metric_names() == metrics == ["mrr"] and store.completed_questions() == done

    assert main(["compact", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == f"{tmp_path}: nothing to compact (every run has one part per table)"


def test_parts_from_before_and_after_question_keys_are_not_merged(tmp_path):
    store = ResultStore(tmp_path)
    _old_shards(store, tmp_path)
    store.commit_shard("r1", ["e"], {"scores": _scores("r1", ["e"])}, ["ke"])
    assert store.compact() == (0, 0) and len(list((tmp_path / "_commits").glob("*.json"))) == 4


def test_ragkit_compact_is_refused_while_a_run_writes_the_folder_and_names_a_missing_one(tmp_path, capsys):
    from ragkit.cli import main

    store = ResultStore(tmp_path)
    _three_shards(store)
    store.write_run("r1", {"run_id": "r1", "top_k": 1})
    with store.writer_lock():
        assert main(["compact", str(tmp_path)]) != 0
    assert "results folder" in capsys.readouterr().err
    assert len(list((tmp_path / "_commits").glob("*.json"))) == 4  # nothing merged
    assert main(["compact", str(tmp_path / "nope")]) != 0
    assert capsys.readouterr().err.strip().startswith(f"error: no results folder at {tmp_path / 'nope'}")


def test_a_question_filter_reads_that_question_and_the_run_level_rows_only(tmp_path):
    from ragkit.analysis.loading import load_results

    store = ResultStore(tmp_path)
    store.write_run("r1", {"run_id": "r1", "chunker": "token", "embedder": "minilm", "retriever": "dense", "top_k": 5})
    judgements = pd.DataFrame({"run_id": "r1", "question_id": ["a", "b", None], "judge": "rerank",
                               "decision": "{}"})
    store.commit_shard("r1", ["a", "b"], {"judgements": judgements})
    assert sorted(store.read("judgements", question_id="b")["question_id"].fillna("-")) == ["-", "b"]
    results = load_results(tmp_path)
    rows = results.subset(["r1"]).question_rows("judgements", "a")
    assert sorted(rows["question_id"].fillna("-")) == ["-", "a"]
    assert "judgements" not in results.__dict__  # the whole table was not read

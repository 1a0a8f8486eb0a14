"""ResultStore: a shard counts only once committed; uncommitted parts are invisible."""

from __future__ import annotations

import pandas as pd
import pytest

from ragkit.results import ResultStore, is_evaluation_stage

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

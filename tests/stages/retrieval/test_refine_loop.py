"""The Retrieval Judge's phase-4 loop (``loop: evaluate_refine``, issue 43 item 14): retrieve ->
evaluate -> a separate refine call -> retrieve, on a scripted LLM; one real-model run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ragkit.errors import LLMError
from ragkit.llms import LLMClient
from ragkit.stages.base import JudgementLog
from ragkit.stages.retrieval.params import RetrievalJudgeInfo
from ragkit.stages.retrieval.retrieval_judge import RetrievalJudge, RetrievalJudgeParams
from tests.scripted_llm import ScriptedLLM
from tests.stages.retrieval.test_retrieval_judge import FIRST, QUERY, retriever_of

pytestmark = pytest.mark.unit


def evaluation(relevant: list[Any], sufficient: bool, missing: str = "") -> str:
    return json.dumps({"relevant": relevant, "sufficient": sufficient, "missing": missing})


def refine(query: str) -> str:
    return json.dumps({"query": query})


def loop(replies: list[Any], tmp_path, **params: Any) -> tuple[RetrievalJudge, ScriptedLLM]:
    backend = ScriptedLLM(replies)
    params = {"loop": "evaluate_refine", "max_iterations": 3, "max_chunks": 10, **params}
    return RetrievalJudge(RetrievalJudgeParams(**params), LLMClient(backend, tmp_path)), backend


def calls(trace: JudgementLog) -> list[tuple[str, str]]:
    return [(j.decision["call"], j.decision.get("action", "")) for j in trace.judgements]


def test_enough_at_once_is_one_evaluation_and_no_refine(tmp_path):
    judge, backend = loop([evaluation([2], True)], tmp_path)
    retriever = retriever_of({})
    trace = JudgementLog()
    kept = judge.refine(QUERY, FIRST, retriever, trace)
    assert [n.node.node_id for n in kept] == ["cats"]
    assert len(backend.requests) == 1 and retriever.queries == []
    assert calls(trace) == [("evaluate", "final"), ("result", "kept 1 of 3 shown")]


def test_not_enough_refines_in_a_separate_call_and_evaluates_the_new_search(tmp_path):
    judge, backend = loop([evaluation([2], False, "when kittens purr"), refine("kittens purring age"),
                           evaluation([1], True)], tmp_path)
    retriever = retriever_of({"kittens purring age": ["cats", "kittens", "market"]})
    trace = JudgementLog()
    kept = judge.refine(QUERY, FIRST, retriever, trace)
    assert [n.node.node_id for n in kept] == ["cats", "kittens"]  # round 1's relevant, then round 2's
    assert retriever.queries == ["kittens purring age"]
    assert len(backend.requests) == 3
    refine_prompt = backend.requests[1][-1]["content"]
    assert "Missing: when kittens purr" in refine_prompt and f"Searched: {QUERY}" in refine_prompt
    assert "[1]" not in refine_prompt.split("\n\n", 1)[1]  # the refine call is not shown chunks
    second = trace.judgements[2]
    assert second.decision["shown"] == ["kittens"]  # cats and market were shown already
    assert calls(trace) == [("evaluate", "refine"), ("refine", "search"), ("evaluate", "final"),
                            ("result", "kept 2 of 4 shown")]
    assert trace.judgements[-1].decision["queries"] == [QUERY, "kittens purring age"]


def test_at_most_max_iterations_evaluations(tmp_path):
    judge, backend = loop([evaluation([], False, "x"), refine("q two"), evaluation([], False, "y")], tmp_path,
                          max_iterations=2, none_relevant="drop_all")
    retriever = retriever_of({"q two": ["kittens"]})
    trace = JudgementLog()
    assert judge.refine(QUERY, FIRST, retriever, trace) == []
    assert len(backend.requests) == 3 and trace.judgements[-1].decision["stopped"] == "max_iterations"


def test_none_relevant_keep_all_keeps_every_chunk_shown(tmp_path):
    judge, _ = loop([evaluation([], False, "x"), refine("q two"), evaluation([], False, "y")], tmp_path,
                    max_iterations=2, none_relevant="keep_all")
    kept = judge.refine(QUERY, FIRST, retriever_of({"q two": ["kittens"]}), JudgementLog())
    assert [n.node.node_id for n in kept] == ["dogs", "cats", "market", "kittens"]


def test_each_evaluation_sees_at_most_max_chunks(tmp_path):
    judge, backend = loop([evaluation([1], True)], tmp_path, max_chunks=2)
    trace = JudgementLog()
    judge.refine(QUERY, FIRST, retriever_of({}), trace)
    assert trace.judgements[0].decision["shown"] == ["dogs", "cats"]
    assert "[3]" not in backend.requests[0][-1]["content"].split("\n\n", 1)[1]


@pytest.mark.parametrize("bad", ["not json", evaluation([9], True), LLMError("down")])
def test_an_unusable_first_evaluation_returns_the_unjudged_retrieval(tmp_path, bad):
    judge, _ = loop([bad], tmp_path)
    trace = JudgementLog()
    assert judge.refine(QUERY, FIRST, retriever_of({}), trace) == FIRST
    (judgement,) = trace.judgements
    assert judgement.fell_back and not judgement.valid


@pytest.mark.parametrize("bad_refine", ["not json", refine("  "), LLMError("down")])
def test_an_unusable_refine_ends_the_loop_with_what_was_judged(tmp_path, bad_refine):
    judge, _ = loop([evaluation([2], False, "more"), bad_refine], tmp_path)
    retriever = retriever_of({})
    trace = JudgementLog()
    kept = judge.refine(QUERY, FIRST, retriever, trace)
    assert [n.node.node_id for n in kept] == ["cats"] and retriever.queries == []
    assert trace.judgements[1].fell_back and trace.judgements[-1].decision["stopped"] == "no new query"


def test_an_unusable_later_evaluation_keeps_the_earlier_rounds(tmp_path):
    judge, _ = loop([evaluation([2], False, "more"), refine("q two"), "not json"], tmp_path,
                    none_relevant="keep_all")
    kept = judge.refine(QUERY, FIRST, retriever_of({"q two": ["kittens"]}), JudgementLog())
    assert [n.node.node_id for n in kept] == ["cats"]


def test_the_loop_is_an_added_option_and_its_depth_bound_holds():
    assert "loop" not in RetrievalJudgeParams().key_dump()
    params = RetrievalJudgeParams(loop="evaluate_refine", max_iterations=3, max_chunks=10)
    assert RetrievalJudgeInfo.final_depth(params, depth=15, top_k=15) == 30
    assert RetrievalJudgeInfo.final_depth(params.model_copy(update={"keep_unjudged": True}), 15, 15) == 45
    with pytest.raises(ValueError, match="min_relevance"):
        RetrievalJudgeParams(loop="evaluate_refine", min_relevance=0.5)


@pytest.mark.integration
@pytest.mark.slow  # several calls of the embedded model
def test_real_local_model_runs_the_loop_with_recorded_calls(tmp_path, local_backend):
    judge = RetrievalJudge(RetrievalJudgeParams(loop="evaluate_refine", max_iterations=2, max_chunks=3,
                                                none_relevant="keep_all"), LLMClient(local_backend, tmp_path))
    retriever = retriever_of({})
    trace = JudgementLog()
    kept = judge.refine(QUERY, FIRST, retriever, trace)
    evaluations = [j for j in trace.judgements if j.decision["call"] == "evaluate"]
    refines = [j for j in trace.judgements if j.decision["call"] == "refine"]
    assert 1 <= len(evaluations) <= 2 and len(refines) <= 1 and all(j.raw_reply is not None for j in evaluations)
    assert len(retriever.queries) == sum(1 for j in refines if j.decision.get("action") == "search")
    assert {n.node.node_id for n in kept} <= {"dogs", "cats", "market"}
    assert trace.judgements[-1].decision["call"] in {"result", "evaluate"}


@pytest.mark.parametrize("repeated", [QUERY, QUERY.upper() + "?", " ".join(reversed(QUERY.split())), "cat purrs"])
def test_a_refined_query_that_repeats_a_searched_one_is_recorded_and_not_searched(tmp_path, repeated):
    """The same query up to case, punctuation, order and plurals ("why do cats purr" and "cat
    purrs": the content words cats/purr against cat/purrs, plurals folded) is a repeat: a valid
    judgement naming the query it repeats, no search, and the loop ends with round 1's chunks."""
    judge, backend = loop([evaluation([2], False, "more"), refine(repeated), evaluation([1], True)], tmp_path)
    retriever = retriever_of({})
    trace = JudgementLog()
    kept = judge.refine(QUERY, FIRST, retriever, trace)
    assert [n.node.node_id for n in kept] == ["cats"] and retriever.queries == [] and len(backend.requests) == 2
    refined = trace.judgements[1].decision
    assert refined["action"] == "not searched" and refined["repeats"] == QUERY and refined["overlap"] == 1.0
    assert trace.judgements[1].valid and not trace.judgements[1].fell_back
    assert trace.judgements[-1].decision["stopped"] == "repeated query"
    assert trace.judgements[-1].decision["queries"] == [QUERY]


@pytest.mark.parametrize(("query", "searched", "overlap"), [
    ("decibels of a cat's purr", ["cat purr decibel"], 1.0),  # the same content words
    ("cat purr loudness decibels", ["cat purr loudness decibel level"], 0.8),  # 4 of 5 words
    ("cat purr loudness", ["cat purr decibels"], None),  # 2 of 4: new
    ("kittens purring age", ["why do cats purr", "cat purr loudness"], None),
    ("why?", ["why"], 1.0),  # no content word: the same words
    ("why?", ["how"], None),
])
def test_a_near_duplicate_overlaps_a_searched_query_at_0_8_or_more(query, searched, overlap):
    from ragkit.stages.retrieval.refine_loop import repeat_of

    found = repeat_of(query, searched)
    assert (found[1] if found else None) == overlap


def test_a_near_duplicate_after_a_second_round_is_caught_against_every_searched_query(tmp_path):
    judge, _ = loop([evaluation([2], False, "more"), refine("kittens purring age"),
                     evaluation([1], False, "still more"), refine("age of purring kittens")], tmp_path)
    retriever = retriever_of({"kittens purring age": ["kittens"]})
    trace = JudgementLog()
    kept = judge.refine(QUERY, FIRST, retriever, trace)
    assert retriever.queries == ["kittens purring age"]  # searched once, the reworded repeat not again
    assert [n.node.node_id for n in kept] == ["cats", "kittens"]
    assert trace.judgements[-2].decision["repeats"] == "kittens purring age"
    assert trace.judgements[-1].decision["stopped"] == "repeated query"

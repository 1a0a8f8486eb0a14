"""Retrieval Judge: reply parsing, fallbacks and the ask-for-more loop on a scripted LLM; one real-model run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.errors import LLMError
from ragkit.llms import LLMClient
from ragkit.stages.base import STAGES, JudgementLog
from ragkit.stages.retrieval.retrieval_judge import RetrievalJudge, RetrievalJudgeParams, merge_nodes, valid_numbers
from tests.doubles import ListRetriever
from tests.factories import scripted_llm_class

TEXTS = {
    "dogs": "Dogs bark at strangers and are loyal companions.",
    "cats": "Cats purr when they are content, and felines sleep most of the day.",
    "market": "The stock market fell after the central bank raised interest rates.",
    "kittens": "Kittens start purring when they are a few days old.",
}


ScriptedLLM = scripted_llm_class()


def retriever_of(answers: dict[str, list[str]]) -> ListRetriever:
    """Answers each query from ``answers`` (chunk ids of TEXTS), scores from 0.9 down."""
    return ListRetriever(answers, texts=TEXTS, top=0.9, doc_ids=True)


def node(chunk_id: str, score: float) -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=chunk_id, text=TEXTS[chunk_id], metadata={"doc_id": chunk_id}), score=score)


def reply(relevant: list[Any], order: list[Any] | None = None, request_more: bool = False,
          refined_query: str = "", reason: str = "r") -> str:
    return json.dumps({"refined_query": refined_query, "relevant": relevant, "order": order or [],
                       "request_more": request_more, "reason": reason})


def judge(replies: list[Any], tmp_path, **params: Any) -> tuple[RetrievalJudge, ScriptedLLM]:
    backend = ScriptedLLM(replies)
    return RetrievalJudge(RetrievalJudgeParams(**params), LLMClient(backend, tmp_path)), backend


FIRST = [node("dogs", 0.8), node("cats", 0.7), node("market", 0.6)]
QUERY = "why do cats purr"


def ids(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in nodes]


@pytest.mark.unit
def test_keeps_relevant_chunks_in_the_judged_order(tmp_path):
    trace = JudgementLog()
    refined, backend = judge([reply([2, 1], order=[1, 2])], tmp_path)
    assert ids(refined.refine(QUERY, FIRST, retriever_of({}), trace)) == ["dogs", "cats"]
    (judgement,) = trace.judgements
    assert judgement.valid and not judgement.fell_back
    assert judgement.decision["kept"] == ["dogs", "cats"] and judgement.decision["dropped"] == ["market"]
    assert judgement.raw_reply.startswith("{") and judgement.judge == "retrieval"
    prompt = backend.requests[0][-1]["content"]
    assert "[1] Dogs bark" in prompt and "[3] The stock market" in prompt


@pytest.mark.unit
def test_relevant_not_in_order_follow_the_ordered_ones(tmp_path):
    refined, _ = judge([reply([1, 2, 3], order=[3])], tmp_path)
    assert ids(refined.refine(QUERY, FIRST, retriever_of({}), JudgementLog())) == ["market", "dogs", "cats"]


@pytest.mark.unit
def test_keep_unjudged_appends_the_rest(tmp_path):
    refined, _ = judge([reply([2])], tmp_path, keep_unjudged=True)
    assert ids(refined.refine(QUERY, FIRST, retriever_of({}), JudgementLog())) == ["cats", "dogs", "market"]


@pytest.mark.unit
def test_out_of_range_and_duplicate_numbers_are_dropped_and_recorded(tmp_path):
    trace = JudgementLog()
    refined, _ = judge([reply([2, 2, 7, 0, -1], order=[9, 2])], tmp_path)
    assert ids(refined.refine(QUERY, FIRST, retriever_of({}), trace)) == ["cats"]
    decision = trace.judgements[0].decision
    assert sorted(decision["dropped_numbers"]) == [-1, 0, 2, 7, 9]
    assert trace.judgements[0].valid


@pytest.mark.unit
@pytest.mark.parametrize(
    "bad",
    [
        '{"relevant": [1, 2',  # cut off
        "",  # empty
        "The first chunk is relevant.",  # prose, no JSON
        '{"relevant": "first", "request_more": false}',  # wrong type
        '{"order": [1]}',  # required fields missing
        reply(["dogs", "cats"]),  # raw ids instead of numbers
        reply([5, 6]),  # only numbers that were not shown
    ],
)
def test_an_unusable_reply_falls_back_to_the_unjudged_retrieval(tmp_path, bad):
    trace = JudgementLog()
    refined, _ = judge([bad], tmp_path)
    assert refined.refine(QUERY, FIRST, retriever_of({}), trace) == FIRST
    (judgement,) = trace.judgements
    assert (judgement.valid, judgement.fell_back) == (False, True)
    assert judgement.error and judgement.raw_reply == bad


@pytest.mark.unit
def test_a_reply_in_a_code_fence_is_read(tmp_path):
    fenced = "Here you go:\n```json\n" + reply([3, 2], order=[3, 2]) + "\n```"
    trace = JudgementLog()
    refined, _ = judge([fenced], tmp_path)
    assert ids(refined.refine(QUERY, FIRST, retriever_of({}), trace)) == ["market", "cats"]
    assert trace.judgements[0].valid


@pytest.mark.unit
def test_a_backend_error_falls_back_instead_of_crashing(tmp_path):
    trace = JudgementLog()
    refined, _ = judge([LLMError("prompt too long")], tmp_path)
    assert refined.refine(QUERY, FIRST, retriever_of({}), trace) == FIRST
    assert (trace.judgements[0].valid, trace.judgements[0].fell_back) == (False, True)
    assert "prompt too long" in trace.judgements[0].error


@pytest.mark.unit
def test_asking_for_more_retrieves_with_the_refined_query_and_merges(tmp_path):
    retriever = retriever_of({"cat purring": ["kittens", "cats"]})
    trace = JudgementLog()
    refined, backend = judge(
        [reply([2], request_more=True, refined_query="cat purring"), reply([1, 3], order=[3, 1])], tmp_path
    )
    result = refined.refine(QUERY, FIRST, retriever, trace)
    assert retriever.queries == ["cat purring"]
    assert ids(result) == ["cats", "kittens"]
    # cats came back with a better score (0.8 > 0.7): one copy, the best score
    assert [n.score for n in result] == pytest.approx([0.8, 0.9])
    first, second = trace.judgements
    assert first.decision["action"] == "retrieve more" and first.decision["added"] == ["kittens"]
    assert second.decision["action"] == "final" and second.decision["stopped"] == "enough"
    assert second.decision["query"] == "cat purring"
    second_prompt = backend.requests[1][-1]["content"]
    # the merged pool is shown best score first: kittens 0.9, dogs 0.8, cats 0.8, market 0.6
    shown = [line[:8] for line in second_prompt.split("Question: cat purring\n")[1].splitlines()[:4]]
    assert shown == ["[1] Kitt", "[2] Dogs", "[3] Cats", "[4] The "]


@pytest.mark.unit
def test_the_loop_stops_at_max_iterations(tmp_path):
    retriever = retriever_of({"more 1": ["kittens"], "more 2": ["kittens"]})
    refined, backend = judge(
        [reply([1], request_more=True, refined_query="more 1"),
         reply([1], request_more=True, refined_query="more 2")], tmp_path, max_iterations=2,
    )
    trace = JudgementLog()
    refined.refine(QUERY, FIRST, retriever, trace)
    assert len(backend.requests) == 2 and retriever.queries == ["more 1"]
    assert trace.judgements[-1].decision["stopped"] == "max_iterations"


@pytest.mark.unit
def test_the_loop_stops_when_a_new_search_finds_nothing_new(tmp_path):
    retriever = retriever_of({"same": ["dogs", "cats"]})
    refined, backend = judge([reply([2], request_more=True, refined_query="same")], tmp_path, max_iterations=5)
    trace = JudgementLog()
    assert ids(refined.refine(QUERY, FIRST, retriever, trace)) == ["cats"]
    assert len(backend.requests) == 1
    assert trace.judgements[-1].decision["stopped"] == "no new chunks"


@pytest.mark.unit
def test_only_max_chunks_are_shown(tmp_path):
    refined, backend = judge([reply([2])], tmp_path, max_chunks=2, chunk_chars=40)
    assert ids(refined.refine(QUERY, FIRST, retriever_of({}), JudgementLog())) == ["cats"]
    prompt = backend.requests[0][-1]["content"]
    assert "[3]" not in prompt.split("Question: why")[1]
    assert "Cats purr when they are content, and fel\n" in prompt


@pytest.mark.unit
def test_mode_off_is_the_identity_and_calls_nothing(tmp_path):
    retriever = retriever_of({})
    refined = RetrievalJudge(RetrievalJudgeParams(mode="off"))
    trace = JudgementLog()
    assert refined.refine(QUERY, FIRST, retriever, trace) == FIRST
    assert trace.judgements == [] and retriever.queries == []


@pytest.mark.unit
def test_params_have_bounds_and_modes_are_checked():
    with pytest.raises(ValueError):
        RetrievalJudgeParams(max_iterations=6)
    with pytest.raises(ValueError, match="no mode 'heuristic'"):
        RetrievalJudge(RetrievalJudgeParams(mode="heuristic"))
    with pytest.raises(ValueError, match="needs an LLM client"):
        RetrievalJudge(RetrievalJudgeParams())


@pytest.mark.unit
def test_registered_by_name(tmp_path):
    with STAGES.registered("retrieval-test", RetrievalJudge):
        built = STAGES.build({"type": "retrieval-test", "params": {"mode": "off", "max_iterations": 3}})
    assert isinstance(built, RetrievalJudge) and built.params.max_iterations == 3


@pytest.mark.unit
def test_helpers():
    assert valid_numbers([3, 1, 3, 0, 4], 3) == ([3, 1], [3, 0, 4])
    merged = merge_nodes([node("dogs", 0.2), node("cats", 0.5)], [node("dogs", 0.9)])
    assert ids(merged) == ["dogs", "cats"] and merged[0].score == 0.9


@pytest.mark.integration
def test_real_local_model_gives_a_recorded_well_formed_result(tmp_path, local_backend):
    client = LLMClient(local_backend, cache_dir=tmp_path)
    retriever = retriever_of({QUERY: ["kittens"]})
    trace = JudgementLog()
    result = RetrievalJudge(RetrievalJudgeParams(max_tokens=64, max_iterations=2), client).refine(
        QUERY, FIRST, retriever, trace
    )
    assert all(isinstance(n, NodeWithScore) for n in result)
    assert set(ids(result)) <= set(TEXTS)
    assert 1 <= len(trace.judgements) <= 2
    last = trace.judgements[-1]
    assert last.raw_reply is not None
    assert last.valid or last.fell_back
    if last.fell_back:
        assert result == FIRST


@pytest.mark.unit
def test_nothing_retrieved_asks_nothing(tmp_path):
    trace = JudgementLog()
    refined, backend = judge([reply([1])], tmp_path)
    assert refined.refine(QUERY, [], retriever_of({}), trace) == []
    assert backend.requests == [] and trace.judgements[0].decision["action"] == "nothing to judge"


@pytest.mark.unit
def test_history_is_shown_before_the_question_and_an_empty_one_changes_nothing(tmp_path):
    from ragkit.questions import Turn

    nodes = [node("cats", 0.9), node("dogs", 0.5)]
    replies = [reply([1])]
    plain, plain_backend = judge(replies, tmp_path / "a")
    plain.refine(QUERY, nodes, retriever_of({}), JudgementLog())
    empty, empty_backend = judge(replies, tmp_path / "b")
    empty.refine(QUERY, nodes, retriever_of({}), JudgementLog(), history=[])
    assert empty_backend.requests == plain_backend.requests
    followed, followed_backend = judge(replies, tmp_path / "c")
    history = [Turn(role="user", content="Tell me about cats."), Turn(role="assistant", content="Cats are pets.")]
    followed.refine(QUERY, nodes, retriever_of({}), JudgementLog(), history=history)
    prompt = followed_backend.requests[0][-1]["content"]
    assert f"Conversation so far:\nuser: Tell me about cats.\nassistant: Cats are pets.\nQuestion: {QUERY}" in prompt


def rated(relevant: list[Any], ratings: list[Any], order: list[Any] | None = None) -> str:
    return json.dumps({"refined_query": "", "relevant": relevant, "order": order or [], "request_more": False,
                       "reason": "r", "ratings": ratings})


@pytest.mark.unit
@pytest.mark.parametrize(("ratings", "kept", "filtered"), [
    ([0.9, 0.5, 0.1], ["dogs", "cats"], []),        # both relevant chunks rated above 0.4
    ([0.9, 0.39, 0.1], ["dogs"], ["cats"]),          # just under the threshold: dropped and recorded
    ([0.4, 0.4, 0.9], ["dogs", "cats"], []),         # at the threshold: kept; a high rating alone keeps nothing
    ([0.1, 0.2, 0.9], [], ["dogs", "cats"]),
])
def test_relevance_filter_drops_relevant_chunks_rated_below_min_relevance(tmp_path, ratings, kept, filtered):
    trace = JudgementLog()
    refined, backend = judge([rated([1, 2], ratings)], tmp_path, min_relevance=0.4)
    assert ids(refined.refine(QUERY, FIRST, retriever_of({}), trace)) == kept
    (judgement,) = trace.judgements
    assert judgement.valid and judgement.decision["filtered"] == filtered
    assert judgement.decision["ratings"] == dict(zip(["dogs", "cats", "market"], ratings))
    assert "ratings (relevance 0 to 1 of each of the 3 chunks" in backend.requests[0][-1]["content"]


@pytest.mark.unit
@pytest.mark.parametrize(("ratings", "error"), [
    ([0.9], "field 'ratings': List should have at least 3 items"),   # the example's count copied
    ([0.9, 2.4, 0.1], "less than or equal to 1"),                     # outside 0-1
])
def test_relevance_filter_with_unusable_ratings_falls_back(tmp_path, ratings, error):
    trace = JudgementLog()
    refined, _ = judge([rated([1], ratings)], tmp_path, min_relevance=0.4)
    assert ids(refined.refine(QUERY, FIRST, retriever_of({}), trace)) == ids(FIRST)
    (judgement,) = trace.judgements
    assert not judgement.valid and judgement.fell_back and error in judgement.error


@pytest.mark.unit
def test_without_min_relevance_the_prompt_asks_for_no_ratings(tmp_path):
    refined, backend = judge([reply([1])], tmp_path)
    refined.refine(QUERY, FIRST, retriever_of({}), JudgementLog())
    prompt = backend.requests[0][-1]["content"]
    assert "ratings" not in prompt and prompt.endswith("request_more (true if they are not enough) and reason.")


@pytest.mark.unit
@pytest.mark.parametrize("request_more", [False, True])
def test_keep_all_keeps_every_chunk_when_none_is_relevant(tmp_path, request_more):
    trace = JudgementLog()
    refined, backend = judge([reply([], request_more=request_more, refined_query="cats")], tmp_path,
                             max_iterations=1, none_relevant="keep_all")
    retriever = retriever_of({"cats": ["kittens"]})
    assert ids(refined.refine(QUERY, FIRST, retriever, trace)) == ["dogs", "cats", "market"]
    assert len(backend.requests) == 1 and retriever.queries == []  # one call, no second search
    assert trace.judgements[0].decision["stopped"] == "none relevant: kept all"


@pytest.mark.unit
def test_by_default_none_relevant_empties_the_context(tmp_path):
    refined, _ = judge([reply([])], tmp_path)
    assert refined.refine(QUERY, FIRST, retriever_of({}), JudgementLog()) == []


@pytest.mark.unit
def test_previews_follow_their_file_name_when_asked(tmp_path):
    refined, backend = judge([reply([2])], tmp_path, show_file_name=True, chunk_chars=40)
    refined.refine(QUERY, FIRST, retriever_of({}), JudgementLog())
    prompt = backend.requests[0][-1]["content"]
    assert "[2] (file: cats) Cats purr when they are content, and fel\n" in prompt  # 40 characters of text

"""Multi-query and HyDE retrievers: RRF, reply parsing and fallbacks on a scripted LLM; real-model runs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.errors import LLMError
from ragkit.llms import LLMClient
from ragkit.stages.base import STAGES, JudgementLog
from ragkit.stages.query.transforms import (
    HyDEParams,
    HyDERetriever,
    MultiQueryParams,
    MultiQueryRetriever,
    rrf_fuse,
)
from tests.doubles import ListRetriever
from tests.factories import scripted_llm_class

QUERY = "why do cats purr"


ScriptedLLM = scripted_llm_class()


def node(chunk_id: str, score: float | None = None) -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=chunk_id, text=f"text of {chunk_id}"), score=score)


def ids(result: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in result]


def client(replies: list[Any], tmp_path) -> tuple[LLMClient, ScriptedLLM]:
    backend = ScriptedLLM(replies)
    return LLMClient(backend, tmp_path), backend


def queries(*texts: str) -> str:
    return json.dumps({"queries": list(texts)})


BASE = {QUERY: ["a", "b", "c"], "cat purring reasons": ["c", "d"], "what makes cats purr": ["c", "b"]}


# --- RRF ---------------------------------------------------------------------------------------


@pytest.mark.unit
def test_rrf_matches_hand_computed_scores():
    fused = rrf_fuse([[node("a"), node("b")], [node("b"), node("c")]], k=60)
    assert ids(fused) == ["b", "a", "c"]
    assert [n.score for n in fused] == pytest.approx([1 / 61 + 1 / 62, 1 / 61, 1 / 62])


@pytest.mark.unit
def test_rrf_counts_a_node_once_per_ranking_and_handles_empty_lists():
    fused = rrf_fuse([[node("a"), node("a"), node("b")], []], k=1)
    assert [n.score for n in fused] == pytest.approx([1 / 2, 1 / 4])
    assert rrf_fuse([]) == []


# --- multi-query -------------------------------------------------------------------------------


@pytest.mark.unit
def test_multi_query_retrieves_each_variant_and_fuses(tmp_path):
    llm, backend = client([queries("cat purring reasons", "what makes cats purr", "Why do cats purr ")], tmp_path)
    retriever = ListRetriever(BASE)
    trace = JudgementLog()
    multi = MultiQueryRetriever(MultiQueryParams(top_k=3), llm, retriever=retriever, trace=trace)
    assert isinstance(multi, BaseRetriever)
    result = multi.retrieve(QUERY)
    # c: ranks 3, 1, 1; b: 2, 2; a: 1; d: 2
    assert ids(result) == ["c", "b", "a"]
    assert result[0].score == pytest.approx(1 / 63 + 2 / 61)
    assert retriever.queries == [QUERY, "cat purring reasons", "what makes cats purr"]
    (judgement,) = trace.judgements
    assert judgement.valid and judgement.decision["dropped_queries"] == ["Why do cats purr "]
    assert "Write 3 different search queries" in backend.requests[0][-1]["content"]


@pytest.mark.unit
def test_multi_query_keeps_at_most_num_queries_and_can_leave_out_the_original(tmp_path):
    llm, _ = client([queries("q1", "q2", "q3")], tmp_path)
    retriever = ListRetriever({}, default=["x"])
    trace = JudgementLog()
    params = MultiQueryParams(num_queries=2, include_original=False)
    MultiQueryRetriever(params, llm, retriever=retriever, trace=trace).retrieve(QUERY)
    assert retriever.queries == ["q1", "q2"] and trace.judgements[0].decision["dropped_queries"] == ["q3"]


@pytest.mark.unit
@pytest.mark.parametrize(
    "bad", ["", "cat purring reasons", '{"queries": ["a", ', '{"queries": "one"}', queries("", QUERY), "```\n{}\n```"]
)
def test_multi_query_falls_back_to_the_base_retriever(tmp_path, bad):
    llm, _ = client([bad], tmp_path)
    retriever = ListRetriever(BASE)
    trace = JudgementLog()
    result = MultiQueryRetriever(MultiQueryParams(), llm, retriever=retriever, trace=trace).retrieve(QUERY)
    assert ids(result) == ["a", "b", "c"] and [n.score for n in result] == pytest.approx([1.0, 0.9, 0.8])
    assert retriever.queries == [QUERY]
    (judgement,) = trace.judgements
    assert (judgement.valid, judgement.fell_back) == (False, True) and judgement.error


@pytest.mark.unit
def test_multi_query_reads_a_fenced_reply(tmp_path):
    llm, _ = client(["Sure!\n```json\n" + queries("cat purring reasons") + "\n```"], tmp_path)
    retriever = ListRetriever(BASE)
    MultiQueryRetriever(MultiQueryParams(), llm, retriever=retriever).retrieve(QUERY)
    assert retriever.queries == [QUERY, "cat purring reasons"]


@pytest.mark.unit
def test_multi_query_backend_error_falls_back(tmp_path):
    llm, _ = client([LLMError("timeout")], tmp_path)
    trace = JudgementLog()
    result = MultiQueryRetriever(MultiQueryParams(), llm, retriever=ListRetriever(BASE), trace=trace).retrieve(QUERY)
    assert ids(result) == ["a", "b", "c"] and trace.judgements[0].fell_back


@pytest.mark.unit
def test_multi_query_off_is_the_base_retriever():
    retriever = ListRetriever(BASE)
    trace = JudgementLog()
    multi = MultiQueryRetriever(MultiQueryParams(mode="off"), retriever=retriever, trace=trace)
    assert ids(multi.retrieve(QUERY)) == ["a", "b", "c"] and trace.judgements == []


# --- HyDE --------------------------------------------------------------------------------------

PASSAGE = "Cats purr when content."


def passage(text: str = PASSAGE) -> str:
    return json.dumps({"passage": text})


@pytest.mark.unit
@pytest.mark.parametrize(
    ("combine", "expected_queries", "expected_ids"),
    [
        ("passage", [PASSAGE], ["p1", "p2"]),
        ("concatenate", [f"{QUERY}\n{PASSAGE}"], ["both"]),
        ("rrf", [QUERY, PASSAGE], ["a", "p1", "b", "p2", "c"]),
    ],
)
def test_hyde_combines_question_and_passage(tmp_path, combine, expected_queries, expected_ids):
    llm, _ = client([passage()], tmp_path)
    retriever = ListRetriever({QUERY: ["a", "b", "c"], PASSAGE: ["p1", "p2"], f"{QUERY}\n{PASSAGE}": ["both"]})
    trace = JudgementLog()
    result = HyDERetriever(HyDEParams(combine=combine), llm, retriever=retriever, trace=trace).retrieve(QUERY)
    assert retriever.queries == expected_queries and ids(result) == expected_ids
    assert trace.judgements[0].decision["passage"] == PASSAGE and trace.judgements[0].valid


@pytest.mark.unit
def test_hyde_cuts_the_passage_and_top_k(tmp_path):
    llm, _ = client([passage("word " * 100)], tmp_path)
    retriever = ListRetriever({}, default=["a", "b", "c"])
    result = HyDERetriever(HyDEParams(combine="passage", passage_chars=20, top_k=2), llm,
                           retriever=retriever).retrieve(QUERY)
    assert retriever.queries == ["word word word word"] and len(result) == 2


@pytest.mark.unit
@pytest.mark.parametrize("bad", ["", '{"passage": "   "}', '{"text": "cats"}', "Cats purr."])
def test_hyde_falls_back_to_the_question(tmp_path, bad):
    llm, _ = client([bad], tmp_path)
    retriever = ListRetriever(BASE)
    trace = JudgementLog()
    result = HyDERetriever(HyDEParams(), llm, retriever=retriever, trace=trace).retrieve(QUERY)
    assert ids(result) == ["a", "b", "c"] and retriever.queries == [QUERY]
    assert (trace.judgements[0].valid, trace.judgements[0].fell_back) == (False, True)
    assert trace.judgements[0].error


@pytest.mark.unit
def test_hyde_off_is_the_base_retriever():
    retriever = ListRetriever(BASE)
    assert ids(HyDERetriever(HyDEParams(mode="off"), retriever=retriever).retrieve(QUERY)) == ["a", "b", "c"]


@pytest.mark.unit
def test_construction_checks_and_registry():
    with pytest.raises(ValueError, match="needs a base retriever"):
        HyDERetriever(HyDEParams(mode="off"))
    with pytest.raises(ValueError):
        MultiQueryParams(num_queries=6)
    with pytest.raises(ValueError):
        HyDEParams(combine="average")
    with STAGES.registered("mq-test", MultiQueryRetriever):
        built = STAGES.build({"type": "mq-test", "params": {"mode": "off"}}, retriever=ListRetriever(BASE))
    assert isinstance(built, MultiQueryRetriever) and built.spec_dict()["type"] == "multi_query"


# --- the real embedded model -------------------------------------------------------------------


@pytest.mark.integration
def test_multi_query_with_the_real_local_model(tmp_path, local_backend):
    retriever = ListRetriever(BASE, default=["z"])
    trace = JudgementLog()
    multi = MultiQueryRetriever(MultiQueryParams(max_tokens=60), LLMClient(local_backend, cache_dir=tmp_path),
                                retriever=retriever, trace=trace)
    result = multi.retrieve(QUERY)
    (judgement,) = trace.judgements
    assert judgement.raw_reply is not None and result
    assert all(isinstance(n, NodeWithScore) for n in result)
    if judgement.valid:
        assert 2 <= len(retriever.queries) <= 4 and retriever.queries[0] == QUERY
    else:
        assert judgement.fell_back and ids(result) == ["a", "b", "c"]


@pytest.mark.integration
def test_hyde_with_the_real_local_model(tmp_path, local_backend):
    retriever = ListRetriever(BASE, default=["z"])
    trace = JudgementLog()
    hyde = HyDERetriever(HyDEParams(max_tokens=60, combine="rrf"), LLMClient(local_backend, cache_dir=tmp_path),
                         retriever=retriever, trace=trace)
    result = hyde.retrieve(QUERY)
    (judgement,) = trace.judgements
    assert judgement.raw_reply is not None and result
    if judgement.valid:
        assert len(retriever.queries) == 2 and judgement.decision["passage"]
    else:
        assert judgement.fell_back and ids(result) == ["a", "b", "c"]


# --- over a real LanceDB index -----------------------------------------------------------------

DOCS = {
    "cats": "Cats purr when they are content, and felines sleep most of the day.",
    "dogs": "Dogs bark at strangers and are loyal companions to their owners.",
    "market": "The stock market fell sharply after the central bank raised interest rates.",
    "vaccine": "The vaccine trial reported 95 percent efficacy against symptomatic infection.",
}


@pytest.fixture(scope="module")
def dense(tmp_path_factory, minilm_embedder):
    import pandas as pd

    from ragkit.artefacts.index import IndexStore
    from ragkit.hashing import text_sha256
    from ragkit.retrievers import retrievers

    texts = list(DOCS.values())
    chunks = pd.DataFrame({
        "chunk_id": [f"{key}:0" for key in DOCS], "doc_id": list(DOCS), "chunk_index": 0, "start_char": 0,
        "end_char": [len(text) for text in texts], "text": texts, "embed_text": texts,
        "text_sha": [text_sha256(text) for text in texts], "metadata": "{}",
    })
    index = IndexStore(tmp_path_factory.mktemp("lancedb")).build("judges", chunks, minilm_embedder.embed_texts(texts))
    return retrievers.build({"type": "dense", "params": {"top_k": 2}}, index=index, embedder=minilm_embedder)


@pytest.mark.integration
def test_transforms_wrap_a_real_dense_retriever(tmp_path, dense):
    """A vague question finds the right chunk once the LLM's passage or rewrites name the topic."""
    vague = "what happened after the decision"
    llm, _ = client([passage("Share prices dropped when the central bank raised interest rates.")], tmp_path / "h")
    hyde = HyDERetriever(HyDEParams(combine="passage", top_k=1), llm, retriever=dense).retrieve(vague)
    assert [n.node.metadata["doc_id"] for n in hyde] == ["market"]

    llm, _ = client([queries("stock market fall interest rates", "central bank rate rise")], tmp_path / "m")
    multi = MultiQueryRetriever(MultiQueryParams(top_k=2), llm, retriever=dense).retrieve(vague)
    assert multi[0].node.metadata["doc_id"] == "market"
    assert {"doc_id", "start_char", "end_char"} <= set(multi[0].node.metadata)


# --- typed multi-query ---------------------------------------------------------------------------

def typed(technical: str, simple: str, aspect: str) -> str:
    return json.dumps({"technical": technical, "simple": simple, "aspect": aspect})


@pytest.mark.unit
def test_typed_multi_query_retrieves_the_three_variants_and_fuses_with_rrf(tmp_path):
    llm, backend = client([typed("cat purring reasons", "what makes cats purr", "purring when injured")], tmp_path)
    retriever = ListRetriever({**BASE, "purring when injured": ["d"]})
    trace = JudgementLog()
    multi = MultiQueryRetriever(MultiQueryParams(style="typed", top_k=4), llm, retriever=retriever, trace=trace)
    result = multi.retrieve(QUERY)
    assert retriever.queries == [QUERY, "cat purring reasons", "what makes cats purr", "purring when injured"]
    # c: ranks 3, 1, 1 -> 1/63 + 2/61; d: 2, 1 -> 1/62 + 1/61; b: 2, 2 -> 2/62; a: 1 -> 1/61
    assert ids(result) == ["c", "d", "b", "a"]
    assert [n.score for n in result] == pytest.approx([1 / 63 + 2 / 61, 1 / 62 + 1 / 61, 2 / 62, 1 / 61])
    (judgement,) = trace.judgements
    assert judgement.decision["variants"] == {"technical": "cat purring reasons", "simple": "what makes cats purr",
                                              "aspect": "purring when injured"}
    assert "technical (expert terms), simple (plain words) and aspect" in backend.requests[0][-1]["content"]


@pytest.mark.unit
def test_typed_variants_equal_to_the_question_or_each_other_are_dropped(tmp_path):
    llm, _ = client([typed("Why do cats purr", "cat purring reasons", "cat purring reasons")], tmp_path)
    retriever = ListRetriever(BASE)
    trace = JudgementLog()
    MultiQueryRetriever(MultiQueryParams(style="typed", include_original=False), llm, retriever=retriever,
                        trace=trace).retrieve(QUERY)
    assert retriever.queries == ["cat purring reasons"]
    assert trace.judgements[0].decision["dropped"] == ["aspect", "technical"]


@pytest.mark.unit
@pytest.mark.parametrize("bad", [json.dumps({"technical": "x", "simple": "y"}), "three queries", LLMError("down")])
def test_typed_falls_back_to_the_base_retriever(tmp_path, bad):
    llm, _ = client([bad], tmp_path)
    retriever = ListRetriever(BASE)
    trace = JudgementLog()
    result = MultiQueryRetriever(MultiQueryParams(style="typed"), llm, retriever=retriever, trace=trace).retrieve(QUERY)
    assert ids(result) == ["a", "b", "c"] and retriever.queries == [QUERY]
    assert not trace.judgements[0].valid and trace.judgements[0].fell_back


@pytest.mark.unit
def test_typed_depth_counts_three_variants():
    assert MultiQueryRetriever.final_depth(MultiQueryParams(style="typed", num_queries=1, top_k=100), 5, 5) == 20


@pytest.mark.integration
def test_typed_multi_query_with_the_real_local_model(tmp_path, local_backend):
    retriever = ListRetriever(BASE, default=["z"])
    trace = JudgementLog()
    multi = MultiQueryRetriever(MultiQueryParams(style="typed", max_tokens=80),
                                LLMClient(local_backend, cache_dir=tmp_path), retriever=retriever, trace=trace)
    result = multi.retrieve(QUERY)
    (judgement,) = trace.judgements
    assert judgement.raw_reply is not None and result
    if judgement.valid:
        assert 2 <= len(retriever.queries) <= 4 and set(judgement.decision["variants"]) <= {
            "technical", "simple", "aspect"}
    else:
        assert judgement.fell_back and ids(result) == ["a", "b", "c"]

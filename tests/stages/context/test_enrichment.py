"""Context enrichment over a real LanceDB index with hand-made vectors: neighbour windows at
document edges, duplicates when hits are neighbours, same-section chunks over and under the
similarity threshold, and an index without vectors."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from llama_index.core.schema import NodeWithScore

from ragkit.artefacts.index import IndexStore
from ragkit.retrievers.base import hit_to_node
from ragkit.stages.base import STAGES, JudgementLog
from ragkit.stages.context.enrichment import EnrichmentJudge, EnrichmentParams

pytestmark = pytest.mark.integration

QUERY_VECTOR = np.array([1.0, 0.0, 0.0, 0.0], np.float32)


def unit_at(similarity: float) -> list[float]:
    """A unit vector whose cosine with QUERY_VECTOR is ``similarity``."""
    return [similarity, math.sqrt(1 - similarity**2), 0.0, 0.0]


# Two documents of six chunks. Document a: chunks 0-2 in section "Intro", 3-5 in "Methods";
# the similarity of each chunk to the query is chosen by hand.
SECTIONS = {"a": ["Intro"] * 3 + ["Methods"] * 3, "b": ["Only"] * 6}
SIMILARITY = {"a": [0.1, 0.2, 0.3, 0.9, 0.2, 0.75], "b": [0.95, 0.8, 0.72, 0.71, 0.69, 0.1]}


class QueryEmbedder:
    def embed_query(self, text: str) -> np.ndarray:
        return QUERY_VECTOR


def rows():
    for doc, sections in SECTIONS.items():
        for number, section in enumerate(sections):
            yield {"chunk_id": f"{doc}:{number}", "doc_id": doc, "chunk_index": number, "start_char": number * 10,
                   "end_char": number * 10 + 9, "text": f"{doc} chunk {number}", "embed_text": f"{doc} chunk {number}",
                   "metadata": json.dumps({"breadcrumb": section})}


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    chunks = pd.DataFrame(list(rows()))
    vectors = np.array([unit_at(SIMILARITY[doc][n]) for doc, n in zip(chunks["doc_id"], chunks["chunk_index"])],
                       np.float32)
    return IndexStore(tmp_path_factory.mktemp("lancedb")).build("enrich", chunks, vectors)


@pytest.fixture(scope="module")
def text_index(tmp_path_factory):
    return IndexStore(tmp_path_factory.mktemp("lancedb")).build("enrich-text", pd.DataFrame(list(rows())), None)


def hits(index, *chunk_ids, score=0.5):
    found = {hit.row["chunk_id"]: hit for hit in index.chunks("chunk_index >= 0")}
    return [NodeWithScore(node=hit_to_node(found[chunk_id]), score=score) for chunk_id in chunk_ids]


QUERY_EMBEDDER = QueryEmbedder()


def enrich(index, nodes, embedder=QUERY_EMBEDDER, **params):
    judge = EnrichmentJudge(EnrichmentParams(**params), index=index, embedder=embedder)
    trace = JudgementLog()
    return [node.node.node_id for node in judge.enrich("q", nodes, trace)], trace


@pytest.mark.parametrize(("hit", "window", "expected"), [
    ("a:2", 0, ["a:2"]),
    ("a:2", 1, ["a:1", "a:2", "a:3"]),
    ("a:2", 2, ["a:0", "a:1", "a:2", "a:3", "a:4"]),
    ("a:0", 1, ["a:0", "a:1"]),            # the document's start: nothing before
    ("a:5", 2, ["a:3", "a:4", "a:5"]),     # the document's end: nothing after
    ("b:0", 5, ["b:0", "b:1", "b:2", "b:3", "b:4", "b:5"]),   # never into another document
])
def test_the_window_adds_neighbours_in_document_order(index, hit, window, expected):
    ids, _ = enrich(index, hits(index, hit), window=window, max_related=0)
    assert ids == expected


def test_neighbouring_hits_share_chunks_once_where_they_first_come(index):
    ids, trace = enrich(index, hits(index, "a:1", "a:2"), window=1, max_related=0)
    assert ids == ["a:0", "a:1", "a:2", "a:3"]
    decision = trace.judgements[0].decision
    assert decision["added"] == {"a:1": ["a:0"], "a:2": ["a:3"]}  # a:2 is a hit, not added
    assert (decision["chunks_before"], decision["chunks_after"]) == (2, 4)


def test_a_hit_that_is_another_hits_neighbour_keeps_its_own_score(index):
    judge = EnrichmentJudge(EnrichmentParams(window=1, max_related=0), index=index, embedder=QueryEmbedder())
    nodes = hits(index, "b:1", score=0.9) + hits(index, "b:2", score=0.4)
    enriched = judge.enrich("q", nodes, JudgementLog())
    assert [(n.node.node_id, n.score, n.node.metadata.get("enriched_from")) for n in enriched] == [
        ("b:0", 0.9, "b:1"), ("b:1", 0.9, None), ("b:2", 0.4, None), ("b:3", 0.4, "b:2")]


def test_added_chunks_carry_their_hits_score_and_origin(index):
    judge = EnrichmentJudge(EnrichmentParams(window=1, max_related=0), index=index, embedder=QueryEmbedder())
    nodes = judge.enrich("q", hits(index, "a:4", score=0.8), JudgementLog())
    assert [(n.node.node_id, n.score, n.node.metadata.get("enriched_from")) for n in nodes] == [
        ("a:3", 0.8, "a:4"), ("a:4", 0.8, None), ("a:5", 0.8, "a:4")]
    assert nodes[0].node.get_content() == "a chunk 3" and nodes[0].node.metadata["start_char"] == 30


@pytest.mark.parametrize(("hit", "max_related", "expected"), [
    # Section "Only" of b: 0.8, 0.72, 0.71 are above 0.7 (best first), 0.69 is not.
    ("b:5", 3, ["b:4", "b:5", "b:0", "b:1", "b:2"]),
    ("b:5", 1, ["b:4", "b:5", "b:0"]),
    # "Methods" of a: a:3 (0.9) is outside a:5's window of 1, and above 0.7; a:1's section
    # "Intro" has no chunk above 0.7.
    ("a:5", 3, ["a:4", "a:5", "a:3"]),
    ("a:1", 3, ["a:0", "a:1", "a:2"]),
])
def test_same_section_chunks_above_the_score_are_added_best_first(index, hit, max_related, expected):
    ids, _ = enrich(index, hits(index, hit), window=1, max_related=max_related, related_min_score=0.7)
    assert ids == expected


def test_a_related_chunk_from_another_section_is_never_added(index):
    # a:3 scores 0.9 but sits in "Methods"; the hit a:0 is in "Intro".
    ids, _ = enrich(index, hits(index, "a:0"), window=0, max_related=3, related_min_score=0.0)
    assert ids == ["a:0", "a:2", "a:1"]  # a:2 (0.3) before a:1 (0.2): best first


def test_without_vectors_related_chunks_are_skipped_and_the_reason_recorded(text_index):
    ids, trace = enrich(text_index, hits(text_index, "b:5"), embedder=None, window=1, max_related=3)
    assert ids == ["b:4", "b:5"]
    assert "no vectors" in trace.judgements[0].decision["related_skipped"]


def test_off_is_the_identity_and_depth_counts_what_it_can_add(index):
    nodes = hits(index, "a:2")
    judge = EnrichmentJudge(EnrichmentParams(mode="off"), index=None)
    assert judge.enrich("q", nodes, JudgementLog()) == nodes
    assert EnrichmentJudge.final_depth(EnrichmentParams(window=1, max_related=3), 5, 10) == 5 * 6
    assert EnrichmentJudge.final_depth(EnrichmentParams(mode="off"), 5, 10) == 5


@pytest.mark.unit
def test_params_have_bounds_and_the_judge_is_registered():
    from pydantic import ValidationError

    assert STAGES.get("enrichment") is EnrichmentJudge
    for bad in ({"window": 6}, {"max_related": -1}, {"related_min_score": 1.5}, {"mode": "llm"}):
        with pytest.raises((ValidationError, ValueError)):
            EnrichmentJudge(EnrichmentParams(**bad), index=None)


@pytest.fixture(scope="module")
def summarised_index(tmp_path_factory):
    """Document a has an LLM summary and a description, b only a description, c neither."""
    own = {"a": {"doc_summary": "A is about setup.", "description": "A's first paragraph."},
           "b": {"description": "B's first paragraph."}, "c": {}}
    chunks = pd.DataFrame([{**row, "metadata": json.dumps({**json.loads(row["metadata"]), **own[row["doc_id"]]})}
                           for row in rows()] + [
        {"chunk_id": "c:0", "doc_id": "c", "chunk_index": 0, "start_char": 0, "end_char": 9, "text": "c chunk 0",
         "embed_text": "c chunk 0", "metadata": "{}"}])
    return IndexStore(tmp_path_factory.mktemp("lancedb")).build("enrich-summaries", chunks, None)


def test_parent_summary_puts_each_chunks_document_line_before_its_text(summarised_index):
    from ragkit.stages.prompts import shown_chunks

    nodes = hits(summarised_index, "a:2", "b:0", "c:0")
    judge = EnrichmentJudge(EnrichmentParams(window=1, max_related=0, parent_summary=True), index=summarised_index)
    trace = JudgementLog()
    enriched = judge.enrich("q", nodes, trace)
    assert [(n.node.node_id, n.node.metadata.get("parent_summary")) for n in enriched] == [
        ("a:1", "A is about setup."), ("a:2", "A is about setup."), ("a:3", "A is about setup."),
        ("b:0", "B's first paragraph."), ("b:1", "B's first paragraph."), ("c:0", None)]
    assert trace.judgements[-1].decision["parent_summary"] == {"doc_summary": 3, "description": 2, "none": 1}
    assert "parent_summary" not in nodes[0].node.metadata  # the retrieved node itself is left as it was
    assert [text for _, text in shown_chunks(enriched, 10, 400, 2000)][2:5] == [
        "(Document summary: A is about setup.) a chunk 3", "(Document summary: B's first paragraph.) b chunk 0",
        "(Document summary: B's first paragraph.) b chunk 1"]
    # Off (the default): no line, the prompt's text as before, and the option is not in the spec.
    plain = EnrichmentJudge(EnrichmentParams(window=1, max_related=0), index=summarised_index)
    before = plain.enrich("q", nodes, JudgementLog())
    assert [text for _, text in shown_chunks(before, 10, 400, 2000)][:2] == ["a chunk 1", "a chunk 2"]
    assert "parent_summary" not in EnrichmentParams().key_dump()

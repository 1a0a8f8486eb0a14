"""The context-enhancement design's heuristic reformulation (quality gate ``reformulation: design``,
issue 43 item 18): the first 5 words when nothing was found, the query with appended terms otherwise."""

from __future__ import annotations

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.stages.base import JudgementLog
from ragkit.stages.retrieval.quality_gate.reformulation_rules import design_reformulation
from ragkit.stages.retrieval.quality_gate.stage import QualityGate, QualityGateParams

pytestmark = pytest.mark.unit

QUERY = "How long is the default visibility timeout of a job"


def nodes(*texts: str, score: float = 0.2) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=f"n{i}", text=text), score=score) for i, text in enumerate(texts)]


def test_nothing_found_gives_the_first_five_words():
    assert design_reformulation(QUERY, [], terms=3, top=5) == "How long is the default"
    assert design_reformulation("visibility timeout", [], terms=3, top=5) == "visibility timeout"


def test_otherwise_the_query_with_the_most_frequent_new_terms_appended():
    found = nodes("Workers lease jobs; a lease expires after the visibility timeout.",
                  "The lease is renewed by workers. Workers ack jobs.", "Queues hold jobs.")
    # jobs, lease and workers 3 times each (ties alphabetical; "jobs" is not the query's "job"), then
    # ack / expires / queues / renewed once; visibility and timeout are the query's own.
    assert design_reformulation(QUERY, found, terms=3, top=5) == f"{QUERY} jobs lease workers"
    assert design_reformulation(QUERY, found, terms=1, top=1) == f"{QUERY} lease"  # lease twice in the first


def test_the_gate_searches_the_design_queries_in_heuristic_mode():
    searched: list[str] = []

    def retrieve(query: str) -> list[NodeWithScore]:
        searched.append(query)
        if len(searched) == 1:
            return []
        return nodes("Workers lease jobs for thirty seconds.", score=0.3)

    gate = QualityGate(QualityGateParams(mode="heuristic", preset="strict", max_retries=2, expansion_terms=2,
                                         reformulation="design"))
    gate.run(QUERY, retrieve, JudgementLog())
    assert searched == [QUERY, "How long is the default", f"{QUERY} jobs lease"]


def test_the_default_keeps_the_keyword_rule_and_the_option_is_out_of_an_llm_gates_key():
    searched: list[str] = []

    def retrieve(query: str) -> list[NodeWithScore]:
        searched.append(query)
        return []

    gate = QualityGate(QualityGateParams(mode="heuristic", preset="strict", max_retries=1))
    gate.run(QUERY, retrieve, JudgementLog())
    assert searched[1] != "How long is the default"  # the keywords rule: stopwords dropped
    assert "reformulation" not in QualityGateParams(mode="heuristic").key_dump()
    assert QualityGateParams(mode="heuristic", reformulation="design").key_dump()["reformulation"] == "design"
    assert "reformulation" not in QualityGateParams(mode="llm", reformulation="design").key_dump()

"""The quality gate's attempts on one scale (issue 26, items 5 and 6), with scripted retrievers.

Dense scores are cosines, bm25 scores unbounded BM25 sums and hybrid scores RRF fusions (~1/60):
a gate that switches strategy must not rank its attempts, nor apply its thresholds, on those raw
numbers. And it starts from the strategy in use, so an issue mapped to that strategy is no switch.
"""

from __future__ import annotations

import json

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.errors import ConfigError
from ragkit.llms import LLMClient
from ragkit.stages.base import STAGES, JudgementLog
from ragkit.stages.retrieval.quality_gate.attempt_scale import question_overlaps
from ragkit.stages.retrieval.quality_gate.stage import QualityGate, QualityGateParams
from tests.factories import scripted_llm_class

pytestmark = pytest.mark.unit

ScriptedLLM = scripted_llm_class()
QUESTION = "why do cats purr loudly"  # keywords: cats, purr, loudly

# strategy -> (chunk id, text, raw score) in rank order. Dense: cosines, chunks on the question;
# bm25: much larger BM25 scores, chunks that match one word of it; hybrid: RRF-sized scores.
GOOD_DENSE = [("d1", "Cats purr when they are content.", 0.45), ("d2", "A cat purrs.", 0.40)]
WORSE_BM25 = [("b1", "Stocks fell loudly after the rise.", 14.2), ("b2", "Markets closed.", 12.0)]
GOOD_HYBRID = [("h1", "Cats purr loudly when content.", 0.0164), ("h2", "Cats purr to heal.", 0.0161)]
WEAK_DENSE = [("w1", "Dogs bark at night.", 0.62), ("w2", "Dogs dig holes.", 0.60)]


class StrategyRetrieve:
    """Chunks depend on the strategy in use; logs each (strategy, query) and each switch."""

    def __init__(self, tables: dict[str, list[tuple[str, str, float]]], start: str = "dense") -> None:
        self.tables, self.strategy = tables, start
        self.calls: list[tuple[str, str]] = []
        self.switches: list[str] = []

    def switch(self, name: str) -> None:
        self.switches.append(name)
        self.strategy = name

    def __call__(self, query: str) -> list[NodeWithScore]:
        self.calls.append((self.strategy, query))
        return [NodeWithScore(node=TextNode(id_=chunk_id, text=text), score=score)
                for chunk_id, text, score in self.tables[self.strategy]]


def ids(nodes: list[NodeWithScore]) -> list[str]:
    return [node.node.node_id for node in nodes]


def llm_gate(replies: list[str], tmp_path, **params) -> QualityGate:
    return QualityGate(QualityGateParams(mode="llm", **params), LLMClient(ScriptedLLM(replies), tmp_path))


def scored(score: int, issue: str = "none", query: str = "") -> str:
    return json.dumps({"score": score, "issue": issue, "missing_aspects": [], "reformulated_query": query,
                       "reason": "r"})


def test_question_overlap_is_the_share_of_the_questions_keywords_in_each_chunk():
    nodes = [NodeWithScore(node=TextNode(id_=str(i), text=text), score=99.0) for i, text in enumerate(
        ["Cats purr when content.", "A cat purrs.", "Dogs bark loudly.", "Stocks fell."])]
    # {cat, purr, loudly}: "cats"/"cat" and "purr"/"purrs" fold to one stem; raw scores play no part.
    assert question_overlaps(QUESTION, nodes) == pytest.approx([2 / 3, 2 / 3, 1 / 3, 0.0])
    assert question_overlaps("why is it", nodes) == [0.0] * 4  # no keyword: every chunk alike


def test_a_switch_with_larger_raw_scores_but_worse_chunks_does_not_win():
    gate = QualityGate(QualityGateParams(mode="heuristic", preset="strict", score_top_k=2, max_attempts=2,
                                         switch_strategy={"no_coverage": "bm25"}))
    retrieve = StrategyRetrieve({"dense": GOOD_DENSE, "bm25": WORSE_BM25})
    trace = JudgementLog()
    result = gate.run(QUESTION, retrieve, trace, switch=retrieve.switch, strategy="dense")
    assert [strategy for strategy, _ in retrieve.calls] == ["dense", "bm25"]
    # Overlaps: dense 2/3 and 2/3 (mean 0.667), bm25 1/3 and 0 (mean 0.167); raw means 0.425 vs 13.1.
    assert ids(result) == ["d1", "d2"] and gate.outcome.strategy == "dense"
    final = trace.judgements[-1].decision
    assert final["chosen_attempt"] == 0
    assert [a["question_overlap"] for a in final["attempts"]] == [pytest.approx(0.666667), pytest.approx(0.166667)]
    assert [a["mean_score"] for a in final["attempts"]] == [0.425, 13.1]  # raw scores are still recorded
    assert gate.outcome.quality == pytest.approx(2 / 3)
    # The bm25 attempt is judged on the same scale: its huge raw scores do not make it sufficient.
    assert final["sufficient"] is False and "top question overlap 0.333333 < 0.8" in final["reason"]


def test_a_switch_to_hybrid_with_rrf_sized_scores_but_better_chunks_wins():
    gate = QualityGate(QualityGateParams(mode="heuristic", score_top_k=2, max_attempts=2,
                                         switch_strategy={"no_coverage": "hybrid"}))
    retrieve = StrategyRetrieve({"dense": WEAK_DENSE, "hybrid": GOOD_HYBRID})
    trace = JudgementLog()
    result = gate.run(QUESTION, retrieve, trace, switch=retrieve.switch, strategy="dense")
    # Dense cosines 0.62 / 0.60 pass the raw thresholds (0.5 / 0.3) but its chunks share no word
    # with the question: no_coverage on the one scale, so the gate switches; hybrid's RRF scores
    # (0.016) fail every raw threshold but its chunks cover the question: kept, and sufficient.
    first = trace.judgements[0].decision
    assert first["action"] == "switch" and "top question overlap 0.0 < 0.5" in first["reason"]
    assert retrieve.switches == ["hybrid"] and ids(result) == ["h1", "h2"]
    assert (gate.outcome.passed, gate.outcome.strategy, gate.outcome.quality) == (True, "hybrid", pytest.approx(5 / 6))


def test_tied_scored_verdicts_are_broken_on_the_one_scale_not_by_raw_scores(tmp_path):
    gate = llm_gate([scored(40, "wrong_entity"), scored(40, "partial")], tmp_path, verdict="scored",
                    max_attempts=2, switch_strategy={"wrong_entity": "bm25"})
    retrieve = StrategyRetrieve({"dense": GOOD_DENSE, "bm25": WORSE_BM25})
    trace = JudgementLog()
    result = gate.run(QUESTION, retrieve, trace, switch=retrieve.switch, strategy="dense")
    assert retrieve.switches == ["bm25"] and ids(result) == ["d1", "d2"]
    assert trace.judgements[-1].decision["chosen_attempt"] == 0 and gate.outcome.strategy == "dense"


def test_a_higher_scored_verdict_still_wins_whatever_its_overlap(tmp_path):
    gate = llm_gate([scored(20, "wrong_entity"), scored(85)], tmp_path, verdict="scored",
                    switch_strategy={"wrong_entity": "bm25"})
    retrieve = StrategyRetrieve({"dense": GOOD_DENSE, "bm25": WORSE_BM25})
    result = gate.run(QUESTION, retrieve, JudgementLog(), switch=retrieve.switch, strategy="dense")
    assert ids(result) == ["b1", "b2"] and gate.outcome.quality == 0.85


def test_a_switching_gate_resolves_to_question_overlap_and_refuses_raw_scores():
    switching = STAGES.resolve({"type": "quality_gate", "params": {"switch_strategy": {"partial": "bm25"}}})
    assert switching.params["attempt_scale"] == "question_overlap"  # in the run id: its old results are not reused
    plain = STAGES.resolve({"type": "quality_gate", "params": {"mode": "heuristic"}})
    assert "attempt_scale" not in plain.params  # one strategy: raw scores, unchanged id
    assert QualityGateParams(mode="heuristic").scale() == "retriever"
    with pytest.raises(ConfigError, match=r"^judge 'quality_gate': attempt_scale 'retriever' cannot rank attempts "
                                          r"of different strategies .*: use question_overlap with switch_strategy\. "
                                          r"Valid parameters: attempt_scale, ") as error:
        STAGES.validate_params("quality_gate", {"switch_strategy": {"partial": "bm25"}, "attempt_scale": "retriever"})
    assert "\n" not in str(error.value)


def test_thresholds_apply_on_question_overlap_when_asked_without_switching():
    gate = QualityGate(QualityGateParams(mode="heuristic", attempt_scale="question_overlap", score_top_k=2,
                                         max_retries=1))
    retrieve = StrategyRetrieve({"bm25": WORSE_BM25}, start="bm25")
    trace = JudgementLog()
    gate.run(QUESTION, retrieve, trace)
    first = trace.judgements[0].decision
    # BM25 scores 14.2 / 12.0 would pass 0.5 / 0.3; the overlaps 1/3 and 0 (mean 1/6) fail both.
    assert first["sufficient"] is False and first["question_overlap"] == pytest.approx(0.166667)
    assert first["reason"] == "top question overlap 0.333333 < 0.5; mean top-2 question overlap 0.166667 < 0.3"


# --- item 6: the gate starts from the strategy in use -----------------------------------------------

def test_an_issue_mapped_to_the_strategy_in_use_does_not_repeat_the_search(tmp_path):
    gate = llm_gate([scored(20, "no_coverage"), scored(20, "no_coverage")], tmp_path, verdict="scored",
                    max_attempts=2, switch_strategy={"no_coverage": "hybrid"})
    retrieve = StrategyRetrieve({"hybrid": GOOD_HYBRID}, start="hybrid")
    trace = JudgementLog()
    gate.run(QUESTION, retrieve, trace, switch=retrieve.switch, strategy="hybrid")
    # No reformulation and already on hybrid: nothing new to search, so the loop stops after one search.
    assert retrieve.calls == [("hybrid", QUESTION)] and retrieve.switches == []
    assert trace.judgements[-1].decision["stopped"] == "no new query"


def test_an_issue_mapped_to_the_strategy_in_use_retries_with_the_new_query(tmp_path):
    gate = llm_gate([scored(20, "no_coverage", query="cats purring sound"), scored(70)], tmp_path,
                    verdict="scored", switch_strategy={"no_coverage": "hybrid"})
    retrieve = StrategyRetrieve({"hybrid": GOOD_HYBRID, "dense": GOOD_DENSE}, start="hybrid")
    trace = JudgementLog()
    gate.run(QUESTION, retrieve, trace, switch=retrieve.switch, strategy="hybrid")
    assert retrieve.calls == [("hybrid", QUESTION), ("hybrid", "cats purring sound")] and retrieve.switches == []
    first = trace.judgements[0].decision
    assert first["action"] == "retry" and first["strategy"] == "hybrid"
    assert [a["strategy"] for a in trace.judgements[-1].decision["attempts"]] == ["hybrid", "hybrid"]


def test_an_issue_mapped_to_another_strategy_still_switches(tmp_path):
    gate = llm_gate([scored(20, "no_coverage"), scored(70)], tmp_path, verdict="scored",
                    switch_strategy={"no_coverage": "hybrid"})
    retrieve = StrategyRetrieve({"hybrid": GOOD_HYBRID, "dense": GOOD_DENSE}, start="dense")
    gate.run(QUESTION, retrieve, JudgementLog(), switch=retrieve.switch, strategy="dense")
    assert retrieve.calls == [("dense", QUESTION), ("hybrid", QUESTION)] and retrieve.switches == ["hybrid"]

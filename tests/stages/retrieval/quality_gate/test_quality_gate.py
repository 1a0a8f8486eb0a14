"""Quality gate: verdict parsing, the retry loop and the best-attempt rule on a scripted LLM; one real-model run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from llama_index.core.schema import NodeWithScore, TextNode
from pydantic import ValidationError

from ragkit.errors import LLMError
from ragkit.llms import LLMClient, llms
from ragkit.stages.base import STAGES, JudgementLog
from ragkit.stages.retrieval.quality_gate.attempt_scale import mean_top_score
from ragkit.stages.retrieval.quality_gate.stage import QualityGate, QualityGateParams
from ragkit.text import keywords
from tests.factories import scripted_llm_class

QUERY = "why do cats purr"


ScriptedLLM = scripted_llm_class()


class StubRetrieve:
    """Answers each query from a table of (chunk id, score) lists; unknown queries get ``default``."""

    def __init__(self, answers: dict[str, list[tuple[str, float]]],
                 default: list[tuple[str, float]] | None = None) -> None:
        self.answers = answers
        self.default = default or [("other", 0.1)]
        self.queries: list[str] = []

    def __call__(self, query: str) -> list[NodeWithScore]:
        self.queries.append(query)
        return [NodeWithScore(node=TextNode(id_=chunk_id, text=f"{chunk_id} text about felines purring"),
                              score=score)
                for chunk_id, score in self.answers.get(query, self.default)]


def verdict(sufficient: bool, reformulated_query: str = "", reason: str = "r") -> str:
    return json.dumps({"sufficient": sufficient, "reformulated_query": reformulated_query, "reason": reason})


def gate(replies: list[Any], tmp_path, **params: Any) -> tuple[QualityGate, ScriptedLLM]:
    backend = ScriptedLLM(replies)
    return QualityGate(QualityGateParams(**params), LLMClient(backend, tmp_path)), backend


def ids(nodes: list[NodeWithScore]) -> list[str]:
    return [node.node.node_id for node in nodes]


WEAK = [("dogs", 0.3), ("market", 0.2)]
STRONG = [("cats", 0.9), ("kittens", 0.8)]
MIDDLE = [("pets", 0.6), ("fur", 0.5)]


@pytest.mark.unit
def test_off_is_exactly_one_retrieval_and_records_nothing(tmp_path):
    retrieve = StubRetrieve({QUERY: WEAK})
    trace = JudgementLog()
    result = QualityGate(QualityGateParams(mode="off")).run(QUERY, retrieve, trace)
    assert ids(result) == ["dogs", "market"]
    assert retrieve.queries == [QUERY]
    assert trace.judgements == []


@pytest.mark.unit
def test_a_sufficient_first_verdict_keeps_the_first_retrieval(tmp_path):
    judge, backend = gate([verdict(True)], tmp_path)
    retrieve = StubRetrieve({QUERY: WEAK})
    trace = JudgementLog()
    assert ids(judge.run(QUERY, retrieve, trace)) == ["dogs", "market"]
    assert retrieve.queries == [QUERY] and len(backend.requests) == 1
    (only,) = trace.judgements
    assert only.valid and only.decision["stopped"] == "sufficient" and only.decision["chosen_attempt"] == 0


@pytest.mark.unit
def test_a_reformulated_query_that_scores_better_is_kept(tmp_path):
    judge, _ = gate([verdict(False, "cat purring reasons", "off topic"), verdict(True)], tmp_path)
    retrieve = StubRetrieve({QUERY: WEAK, "cat purring reasons": STRONG})
    trace = JudgementLog()
    assert ids(judge.run(QUERY, retrieve, trace)) == ["cats", "kittens"]
    assert retrieve.queries == [QUERY, "cat purring reasons"]
    first, last = trace.judgements
    assert first.decision["action"] == "retry" and first.decision["reformulated_query"] == "cat purring reasons"
    assert last.decision["stopped"] == "sufficient"
    assert last.decision["chosen_query"] == "cat purring reasons"
    assert [a["mean_score"] for a in last.decision["attempts"]] == [pytest.approx(0.25), pytest.approx(0.85)]


@pytest.mark.unit
def test_the_best_attempt_wins_even_when_a_later_one_is_judged_sufficient(tmp_path):
    judge, _ = gate([verdict(False, "q2"), verdict(False, "q3"), verdict(True)], tmp_path, max_retries=3)
    retrieve = StubRetrieve({QUERY: WEAK, "q2": STRONG, "q3": MIDDLE})
    trace = JudgementLog()
    assert ids(judge.run(QUERY, retrieve, trace)) == ["cats", "kittens"]
    assert trace.judgements[-1].decision["chosen_attempt"] == 1


@pytest.mark.unit
def test_retries_that_score_worse_keep_the_original_retrieval(tmp_path):
    judge, _ = gate([verdict(False, "q2"), verdict(False, "q3")], tmp_path, max_retries=2)
    retrieve = StubRetrieve({QUERY: MIDDLE, "q2": WEAK, "q3": MIDDLE})  # q3 ties the original: earliest wins
    assert ids(judge.run(QUERY, retrieve, JudgementLog())) == ["pets", "fur"]


@pytest.mark.unit
@pytest.mark.parametrize("max_retries", [1, 3, 5])
def test_the_loop_stops_at_max_retries(tmp_path, max_retries):
    replies = [verdict(False, f"query {n}") for n in range(1, 10)]
    judge, backend = gate(replies, tmp_path, max_retries=max_retries)
    retrieve = StubRetrieve({QUERY: WEAK})
    trace = JudgementLog()
    judge.run(QUERY, retrieve, trace)
    assert len(retrieve.queries) == 1 + max_retries
    assert len(backend.requests) == max_retries  # the last retry is ranked by score, not judged
    assert len(trace.judgements) == max_retries
    assert trace.judgements[-1].decision["stopped"] == "max_retries"
    last_prompt = backend.requests[-1][-1]["content"]
    assert all(f"query {n}" in last_prompt for n in range(1, max_retries))  # so it proposes a new one


@pytest.mark.unit
@pytest.mark.parametrize("reformulated", ["", "  ", QUERY, "WHY do  cats purr"])
def test_no_new_query_stops_the_loop(tmp_path, reformulated):
    judge, _ = gate([verdict(False, reformulated)], tmp_path)
    retrieve = StubRetrieve({QUERY: WEAK})
    trace = JudgementLog()
    assert ids(judge.run(QUERY, retrieve, trace)) == ["dogs", "market"]
    assert retrieve.queries == [QUERY]
    assert trace.judgements[-1].decision["stopped"] == "no new query"


@pytest.mark.unit
def test_a_verdict_in_a_code_fence_is_read(tmp_path):
    judge, _ = gate(["```json\n" + verdict(False, "q2") + "\n```", verdict(True)], tmp_path)
    retrieve = StubRetrieve({QUERY: WEAK, "q2": STRONG})
    assert ids(judge.run(QUERY, retrieve, JudgementLog())) == ["cats", "kittens"]


@pytest.mark.unit
@pytest.mark.parametrize(
    "bad",
    ['{"sufficient": "maybe"}', '{"sufficient": false, "reformulated_query": "x"', "no idea", "",
     LLMError("llm 'scripted': down")],
)
def test_an_unusable_verdict_falls_back_to_the_original_retrieval(tmp_path, bad):
    judge, _ = gate([bad], tmp_path)
    retrieve = StubRetrieve({QUERY: WEAK})
    trace = JudgementLog()
    assert ids(judge.run(QUERY, retrieve, trace)) == ["dogs", "market"]
    (only,) = trace.judgements
    assert only.fell_back and not only.valid and only.error
    assert only.decision["action"] == "fell back"


@pytest.mark.unit
def test_an_unusable_verdict_in_a_later_round_also_falls_back_to_the_original(tmp_path):
    judge, _ = gate([verdict(False, "q2"), "garbage"], tmp_path)
    retrieve = StubRetrieve({QUERY: WEAK, "q2": STRONG})
    trace = JudgementLog()
    assert ids(judge.run(QUERY, retrieve, trace)) == ["dogs", "market"]
    assert trace.judgements[0].valid and trace.judgements[-1].fell_back


@pytest.mark.unit
@pytest.mark.parametrize(
    ("first", "expected_queries", "stopped"),
    [
        (STRONG, 1, "sufficient"),  # top 0.9 >= 0.5 and mean 0.85 >= 0.3
        ([("a", 0.9), ("b", 0.0), ("c", 0.0), ("d", 0.0)], 3, "max_retries"),  # mean 0.225 < 0.3
        (WEAK, 3, "max_retries"),  # top 0.3 < 0.5
        ([], 3, "max_retries"),  # nothing retrieved
    ],
)
def test_heuristic_thresholds_decide_the_retries(first, expected_queries, stopped):
    retrieve = StubRetrieve({QUERY: first}, default=[("other", 0.1)])
    trace = JudgementLog()
    QualityGate(QualityGateParams(mode="heuristic", max_retries=2, score_top_k=4)).run(QUERY, retrieve, trace)
    assert len(retrieve.queries) == expected_queries
    assert trace.judgements[-1].decision["stopped"] == stopped
    assert all(j.valid and j.raw_reply is None for j in trace.judgements)


@pytest.mark.unit
def test_heuristic_reformulation_is_keywords_plus_words_of_the_best_chunks():
    retrieve = StubRetrieve({QUERY: WEAK})
    trace = JudgementLog()
    QualityGate(QualityGateParams(mode="heuristic", max_retries=2, expansion_terms=2)).run(QUERY, retrieve, trace)
    first_retry, second_retry = retrieve.queries[1:]
    assert first_retry.startswith("cats purr ") and len(first_retry.split()) == 2 + 2
    assert second_retry.startswith("cats purr ") and len(second_retry.split()) == 2 + 4
    assert keywords("Why do the cats purr?") == ["cats", "purr"]


@pytest.mark.unit
def test_mean_top_score_rule():
    nodes = [NodeWithScore(node=TextNode(id_=str(i), text="t"), score=s) for i, s in enumerate([0.2, 0.9, 0.5])]
    assert mean_top_score(nodes, 2) == pytest.approx(0.7)
    assert mean_top_score(nodes, 10) == pytest.approx(1.6 / 3)
    assert mean_top_score([], 3) == float("-inf")


@pytest.mark.unit
@pytest.mark.parametrize("max_retries", [0, 6])
def test_max_retries_is_bounded(max_retries):
    with pytest.raises(ValidationError):
        QualityGateParams(max_retries=max_retries)


@pytest.mark.unit
def test_builds_through_the_judges_registry():
    with STAGES.registered("quality_gate", QualityGate):
        judge = STAGES.build({"type": "quality_gate", "params": {"mode": "heuristic", "max_retries": 1}})
    assert isinstance(judge, QualityGate) and judge.params.max_retries == 1


@pytest.mark.integration
def test_real_local_model_gives_a_recorded_well_formed_result(tmp_path):
    client = LLMClient(llms.build({"type": "local"}), cache_dir=tmp_path)
    retrieve = StubRetrieve({QUERY: WEAK}, default=STRONG)
    trace = JudgementLog()
    result = QualityGate(QualityGateParams(max_retries=1, max_tokens=48, chunk_chars=80), client).run(
        QUERY, retrieve, trace
    )
    assert ids(result) in (["dogs", "market"], ["cats", "kittens"])
    assert len(trace.judgements) == 1 and len(retrieve.queries) <= 2
    (only,) = trace.judgements
    assert only.raw_reply is not None
    assert only.valid or (only.fell_back and ids(result) == ["dogs", "market"])


# --- scored verdicts, presets, spread and strategy switching ---------------------------------------

def scored(score: int, issue: str = "none", query: str = "", missing: list[str] | None = None) -> str:
    return json.dumps({"score": score, "issue": issue, "missing_aspects": missing or [],
                       "reformulated_query": query, "reason": "r"})


class StrategyRetrieve:
    """Chunks depend on the strategy switched to: dense -> WEAK, bm25 -> STRONG, hybrid -> MIDDLE."""

    def __init__(self) -> None:
        self.strategy = "dense"
        self.calls: list[tuple[str, str]] = []

    def switch(self, name: str) -> None:
        self.strategy = name

    def __call__(self, query: str) -> list[NodeWithScore]:
        self.calls.append((self.strategy, query))
        table = {"dense": WEAK, "bm25": STRONG, "hybrid": MIDDLE}[self.strategy]
        return [NodeWithScore(node=TextNode(id_=chunk_id, text=chunk_id), score=score) for chunk_id, score in table]


@pytest.mark.unit
def test_scored_verdict_switches_strategy_on_a_mapped_issue_and_keeps_the_best(tmp_path):
    judge, backend = gate([scored(20, "wrong_entity"), scored(85)], tmp_path, verdict="scored",
                          switch_strategy={"wrong_entity": "bm25", "no_coverage": "hybrid"})
    retrieve = StrategyRetrieve()
    trace = JudgementLog()
    result = judge.run(QUERY, retrieve, trace, switch=retrieve.switch)
    assert retrieve.calls == [("dense", QUERY), ("bm25", QUERY)]
    assert ids(result) == ["cats", "kittens"] and len(backend.requests) == 2
    first, second = trace.judgements
    assert (first.decision["action"], first.decision["strategy"], first.decision["score"]) == ("switch", "bm25", 20)
    assert second.decision["sufficient"] is True and second.decision["chosen_attempt"] == 1
    assert [a["strategy"] for a in second.decision["attempts"]] == [None, "bm25"]
    outcome = judge.outcome
    assert (outcome.passed, outcome.quality, outcome.issue, outcome.strategy) == (True, 0.85, None, "bm25")


@pytest.mark.unit
def test_switching_stops_at_max_attempts_and_every_attempt_is_scored(tmp_path):
    judge, backend = gate([scored(30, "no_coverage", missing=["cause"]), scored(40, "wrong_entity"),
                           scored(10, "off_topic")], tmp_path, verdict="scored", max_attempts=3,
                          switch_strategy={"no_coverage": "hybrid", "wrong_entity": "bm25"})
    retrieve = StrategyRetrieve()
    trace = JudgementLog()
    result = judge.run(QUERY, retrieve, trace, switch=retrieve.switch)
    assert [call[0] for call in retrieve.calls] == ["dense", "hybrid", "bm25"]
    assert len(backend.requests) == 3  # the third attempt is scored too (a final check)
    assert trace.judgements[-1].decision["action"] == "final check"
    # scores 30, 40, 10: the hybrid attempt is kept although bm25's chunks score higher
    assert ids(result) == ["pets", "fur"] and judge.outcome.passed is False
    assert (judge.outcome.quality, judge.outcome.issue, judge.outcome.strategy) == (0.4, "wrong_entity", "hybrid")


@pytest.mark.unit
def test_an_unmapped_issue_retries_with_the_reformulated_query(tmp_path):
    judge, _ = gate([scored(30, "partial", query="cats purring reasons"), scored(70)], tmp_path, verdict="scored",
                    switch_strategy={"wrong_entity": "bm25"})
    retrieve = StrategyRetrieve()
    judge.run(QUERY, retrieve, JudgementLog(), switch=retrieve.switch)
    assert retrieve.calls == [("dense", QUERY), ("dense", "cats purring reasons")]


@pytest.mark.unit
@pytest.mark.parametrize("reply", [scored(50, "too vague"), json.dumps({"score": 120, "issue": "none"}), "fine"])
def test_an_unusable_scored_verdict_falls_back_to_the_first_retrieval(tmp_path, reply):
    judge, _ = gate([reply], tmp_path, verdict="scored")
    retrieve = StubRetrieve({QUERY: WEAK})
    trace = JudgementLog()
    assert ids(judge.run(QUERY, retrieve, trace)) == ["dogs", "market"]
    (judgement,) = trace.judgements
    assert not judgement.valid and judgement.fell_back and judge.outcome.passed is None


@pytest.mark.unit
@pytest.mark.parametrize(("preset", "scores", "sufficient", "issue"), [
    ("basic", [0.5, 0.3, 0.1], True, None),                 # top 0.5, mean 0.3
    ("basic", [0.45, 0.4, 0.4], False, "no_coverage"),
    ("basic", [0.6, 0.1, 0.1], False, "partial"),           # mean 0.267
    ("strict", [0.9, 0.7, 0.6], True, None),               # mean 0.733, variance 0.0156
    ("strict", [0.85, 0.6, 0.6], False, "partial"),        # mean 0.683
    ("custom", [0.45, 0.4, 0.4], False, "no_coverage"),    # the fields: today's 0.5 / 0.3
])
def test_presets(preset, scores, sufficient, issue):
    judge = QualityGate(QualityGateParams(mode="heuristic", preset=preset, score_top_k=3, max_retries=1))
    table = {QUERY: [(f"c{i}", s) for i, s in enumerate(scores)]}
    trace = JudgementLog()
    judge.run(QUERY, StubRetrieve(table, default=[("x", 0.0)]), trace)
    assert trace.judgements[0].decision["sufficient"] is sufficient
    assert (judge.outcome.issue, judge.outcome.passed) == (issue, sufficient)


@pytest.mark.unit
@pytest.mark.parametrize(("scores", "max_spread", "sufficient"), [
    ([1.0, 0.4], 0.1, True),     # variance 0.09
    ([1.0, 0.3], 0.1, False),    # variance 0.1225
    ([1.0, 0.3], None, True),    # no spread check
])
def test_spread_check(scores, max_spread, sufficient):
    judge = QualityGate(QualityGateParams(mode="heuristic", max_spread=max_spread, score_top_k=2, max_retries=1))
    trace = JudgementLog()
    judge.run(QUERY, StubRetrieve({QUERY: [(f"c{i}", s) for i, s in enumerate(scores)]}), trace)
    assert trace.judgements[0].decision["sufficient"] is sufficient
    if not sufficient:
        assert "score variance 0.1225 > 0.1" in trace.judgements[0].decision["reason"]


@pytest.mark.unit
def test_heuristic_quality_is_the_kept_mean_clipped_and_the_switch_map_is_validated():
    judge = QualityGate(QualityGateParams(mode="heuristic", score_top_k=2))
    judge.run(QUERY, StubRetrieve({QUERY: STRONG}), JudgementLog())
    assert judge.outcome.passed is True and judge.outcome.quality == pytest.approx(0.85)
    from ragkit.errors import ConfigError

    with pytest.raises(ConfigError, match=r"unknown issue \['vague'\]\. Valid issues: off_topic"):
        STAGES.validate_params("quality_gate", {"switch_strategy": {"vague": "bm25"}})
    with pytest.raises(ConfigError, match=r"unknown strategy \['sparse'\]\. Valid strategies: dense, bm25, hybrid"):
        STAGES.validate_params("quality_gate", {"switch_strategy": {"off_topic": "sparse"}})


@pytest.mark.integration
def test_real_local_model_gives_a_recorded_scored_verdict(tmp_path):
    client = LLMClient(llms.build({"type": "local"}), cache_dir=tmp_path)
    judge = QualityGate(QualityGateParams(mode="llm", verdict="scored", max_retries=1, max_tokens=96), client)
    trace = JudgementLog()
    judge.run(QUERY, StubRetrieve({QUERY: STRONG}), trace)
    first = trace.judgements[0]
    assert first.raw_reply is not None
    if first.valid:
        assert 0 <= first.decision["score"] <= 100 and judge.outcome.passed is not None
    else:
        assert first.fell_back and judge.outcome.passed is None

"""Quality gate: verdict parsing, the retry loop and the best-attempt rule on a scripted LLM; one real-model run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from llama_index.core.schema import NodeWithScore, TextNode
from pydantic import ValidationError

from ragkit.judges.base import JudgeTrace, judges
from ragkit.judges.quality_gate import QualityGate, QualityGateParams, keywords, mean_top_score
from ragkit.llms import LLMClient, llms
from ragkit.llms.base import LLMError
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
    trace = JudgeTrace()
    result = QualityGate(QualityGateParams(mode="off")).run(QUERY, retrieve, trace)
    assert ids(result) == ["dogs", "market"]
    assert retrieve.queries == [QUERY]
    assert trace.judgements == []


@pytest.mark.unit
def test_a_sufficient_first_verdict_keeps_the_first_retrieval(tmp_path):
    judge, backend = gate([verdict(True)], tmp_path)
    retrieve = StubRetrieve({QUERY: WEAK})
    trace = JudgeTrace()
    assert ids(judge.run(QUERY, retrieve, trace)) == ["dogs", "market"]
    assert retrieve.queries == [QUERY] and len(backend.requests) == 1
    (only,) = trace.judgements
    assert only.valid and only.decision["stopped"] == "sufficient" and only.decision["chosen_attempt"] == 0


@pytest.mark.unit
def test_a_reformulated_query_that_scores_better_is_kept(tmp_path):
    judge, _ = gate([verdict(False, "cat purring reasons", "off topic"), verdict(True)], tmp_path)
    retrieve = StubRetrieve({QUERY: WEAK, "cat purring reasons": STRONG})
    trace = JudgeTrace()
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
    trace = JudgeTrace()
    assert ids(judge.run(QUERY, retrieve, trace)) == ["cats", "kittens"]
    assert trace.judgements[-1].decision["chosen_attempt"] == 1


@pytest.mark.unit
def test_retries_that_score_worse_keep_the_original_retrieval(tmp_path):
    judge, _ = gate([verdict(False, "q2"), verdict(False, "q3")], tmp_path, max_retries=2)
    retrieve = StubRetrieve({QUERY: MIDDLE, "q2": WEAK, "q3": MIDDLE})  # q3 ties the original: earliest wins
    assert ids(judge.run(QUERY, retrieve, JudgeTrace())) == ["pets", "fur"]


@pytest.mark.unit
@pytest.mark.parametrize("max_retries", [1, 3, 5])
def test_the_loop_stops_at_max_retries(tmp_path, max_retries):
    replies = [verdict(False, f"query {n}") for n in range(1, 10)]
    judge, backend = gate(replies, tmp_path, max_retries=max_retries)
    retrieve = StubRetrieve({QUERY: WEAK})
    trace = JudgeTrace()
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
    trace = JudgeTrace()
    assert ids(judge.run(QUERY, retrieve, trace)) == ["dogs", "market"]
    assert retrieve.queries == [QUERY]
    assert trace.judgements[-1].decision["stopped"] == "no new query"


@pytest.mark.unit
def test_a_verdict_in_a_code_fence_is_read(tmp_path):
    judge, _ = gate(["```json\n" + verdict(False, "q2") + "\n```", verdict(True)], tmp_path)
    retrieve = StubRetrieve({QUERY: WEAK, "q2": STRONG})
    assert ids(judge.run(QUERY, retrieve, JudgeTrace())) == ["cats", "kittens"]


@pytest.mark.unit
@pytest.mark.parametrize(
    "bad",
    ['{"sufficient": "maybe"}', '{"sufficient": false, "reformulated_query": "x"', "no idea", "",
     LLMError("llm 'scripted': down")],
)
def test_an_unusable_verdict_falls_back_to_the_original_retrieval(tmp_path, bad):
    judge, _ = gate([bad], tmp_path)
    retrieve = StubRetrieve({QUERY: WEAK})
    trace = JudgeTrace()
    assert ids(judge.run(QUERY, retrieve, trace)) == ["dogs", "market"]
    (only,) = trace.judgements
    assert only.fell_back and not only.valid and only.error
    assert only.decision["action"] == "fell back"


@pytest.mark.unit
def test_an_unusable_verdict_in_a_later_round_also_falls_back_to_the_original(tmp_path):
    judge, _ = gate([verdict(False, "q2"), "garbage"], tmp_path)
    retrieve = StubRetrieve({QUERY: WEAK, "q2": STRONG})
    trace = JudgeTrace()
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
    trace = JudgeTrace()
    QualityGate(QualityGateParams(mode="heuristic", max_retries=2, score_top_k=4)).run(QUERY, retrieve, trace)
    assert len(retrieve.queries) == expected_queries
    assert trace.judgements[-1].decision["stopped"] == stopped
    assert all(j.valid and j.raw_reply is None for j in trace.judgements)


@pytest.mark.unit
def test_heuristic_reformulation_is_keywords_plus_words_of_the_best_chunks():
    retrieve = StubRetrieve({QUERY: WEAK})
    trace = JudgeTrace()
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
    with judges.registered("quality_gate", QualityGate):
        judge = judges.build({"type": "quality_gate", "params": {"mode": "heuristic", "max_retries": 1}})
    assert isinstance(judge, QualityGate) and judge.params.max_retries == 1


@pytest.mark.integration
def test_real_local_model_gives_a_recorded_well_formed_result(tmp_path):
    client = LLMClient(llms.build({"type": "local"}), cache_dir=tmp_path)
    retrieve = StubRetrieve({QUERY: WEAK}, default=STRONG)
    trace = JudgeTrace()
    result = QualityGate(QualityGateParams(max_retries=1, max_tokens=48, chunk_chars=80), client).run(
        QUERY, retrieve, trace
    )
    assert ids(result) in (["dogs", "market"], ["cats", "kittens"])
    assert len(trace.judgements) == 1 and len(retrieve.queries) <= 2
    (only,) = trace.judgements
    assert only.raw_reply is not None
    assert only.valid or (only.fell_back and ids(result) == ["dogs", "market"])

"""The quality gate's design issue set (``issue_set: design``): each issue's strategy and rewrite
guidance on a scripted LLM, the rewrite's fallback, the heuristic's names, the parameters'
validation and unchanged keys; one real-model run of the mechanics."""

from __future__ import annotations

import json
from typing import Any

import pytest
from llama_index.core.schema import NodeWithScore, TextNode
from pydantic import ValidationError

from ragkit.llms import LLMClient
from ragkit.stages.base import JudgementLog
from ragkit.stages.retrieval.quality_gate.issues import DESIGN_ISSUE_TYPES, DesignScoredVerdict
from ragkit.stages.retrieval.quality_gate.stage import QualityGate, QualityGateParams
from tests.factories import scripted_llm_class

ScriptedLLM = scripted_llm_class()
QUESTION = "what is the incubation period of covid-19"

# The design's table, written out here rather than read from the module: issue -> (strategy the
# early tier switches to, None: it rewrites the query in the strategy in use; words of its guidance).
STRATEGY_WORDS = {"dense": "a meaning-based search", "bm25": "an exact-word search",
                  "hybrid": "a search by both meaning and exact words"}
DESIGN_TABLE = {
    "off_topic": ("bm25", "exact subject words"),
    "wrong_domain": ("bm25", "field or context"),
    "missing_key_info": (None, "exact key terms"),
    "partial_coverage": (None, "missing aspects"),
    "too_broad": (None, "distinguishing terms"),
    "too_narrow": (None, "broader wording"),
    "no_coverage": (None, "synonyms"),
}


class StubRetrieve:
    def __init__(self) -> None:
        self.queries: list[str] = []

    def __call__(self, query: str) -> list[NodeWithScore]:
        self.queries.append(query)
        return [NodeWithScore(node=TextNode(id_=f"{query}:{n}", text=f"chunk {n} for {query}"), score=0.5)
                for n in range(3)]


class Switches:
    def __init__(self) -> None:
        self.used: list[str] = []

    def __call__(self, strategy: str) -> None:
        self.used.append(strategy)


def scored(score: int, issue: str = "none", query: str = "", missing: list[str] | None = None) -> str:
    return json.dumps({"score": score, "issue": issue, "missing_aspects": missing or [],
                       "reformulated_query": query, "reason": "r"})


def rewrite(query: str) -> str:
    return json.dumps({"query": query})


def design_gate(replies: list[Any], tmp_path, **params: Any) -> tuple[QualityGate, Any]:
    backend = ScriptedLLM(replies)
    full = {"mode": "llm", "verdict": "scored", "issue_set": "design", **params}
    return QualityGate(QualityGateParams(**full), LLMClient(backend, tmp_path)), backend


def prompt_of(backend: Any, call: int) -> str:
    return backend.requests[call][-1]["content"]


def other_strategy(strategy: str) -> str:
    return next(name for name in ("dense", "bm25", "hybrid") if name != strategy)


@pytest.mark.unit
@pytest.mark.parametrize("issue", sorted(DESIGN_TABLE))
def test_each_design_issue_switches_or_rewrites_as_the_early_tier_says(tmp_path, issue):
    target, guidance = DESIGN_TABLE[issue]
    judge, backend = design_gate(
        [scored(20, issue, "verdict query", ["the period"]), rewrite("guided query"), scored(80)], tmp_path,
        switch_strategy="design", max_attempts=2)
    retrieve, switch, trace = StubRetrieve(), Switches(), JudgementLog()
    judge.run(QUESTION, retrieve, trace, switch=switch, strategy="dense")
    assert switch.used == ([target] if target else [])
    assert retrieve.queries == [QUESTION, "guided query"]  # the rewrite's query, not the verdict's
    rewrite_prompt = prompt_of(backend, 1)
    assert f"Problem: {issue}" in rewrite_prompt and guidance in rewrite_prompt
    assert f"used in {STRATEGY_WORDS[target or 'dense']}." in rewrite_prompt
    assert "Missing: the period" in rewrite_prompt
    first = trace.judgements[0].decision
    assert first["issue"] == issue and first["action"] == ("switch" if target else "retry")
    assert first.get("strategy") == (target or "dense")
    assert guidance in first["rewrite_guidance"] and first["rewrite_strategy"] == (target or "dense")
    assert first["rewrite_query"] == "guided query"


@pytest.mark.unit
def test_an_issue_mapped_to_the_strategy_in_use_retries_with_the_rewrite_in_it(tmp_path):
    judge, backend = design_gate([scored(20, "off_topic", "verdict query"), rewrite("specific query"), scored(70)],
                                 tmp_path, switch_strategy="design", max_attempts=2)
    retrieve, switch, trace = StubRetrieve(), Switches(), JudgementLog()
    judge.run(QUESTION, retrieve, trace, switch=switch, strategy="bm25")
    assert switch.used == [] and retrieve.queries == [QUESTION, "specific query"]
    assert "used in an exact-word search." in prompt_of(backend, 1)
    assert trace.judgements[0].decision["action"] == "retry"


@pytest.mark.unit
def test_without_a_switch_map_the_rewrite_still_follows_the_issue(tmp_path):
    judge, backend = design_gate([scored(10, "wrong_domain", "verdict query"), rewrite("medical query"), scored(90)],
                                 tmp_path, max_retries=1)
    retrieve, trace = StubRetrieve(), JudgementLog()
    judge.run(QUESTION, retrieve, trace)
    assert retrieve.queries == [QUESTION, "medical query"]
    assert "Problem: wrong_domain" in prompt_of(backend, 1) and "The new query is used" not in prompt_of(backend, 1)
    assert trace.judgements[0].decision["rewrite_strategy"] is None


@pytest.mark.unit
@pytest.mark.parametrize("reply", ["not json at all", json.dumps({"query": "   "})])
def test_an_unusable_rewrite_keeps_the_verdicts_reformulation_and_says_why(tmp_path, reply):
    judge, _ = design_gate([scored(20, "missing_key_info", "verdict query"), reply, scored(90)], tmp_path,
                           max_retries=1)
    retrieve, trace = StubRetrieve(), JudgementLog()
    judge.run(QUESTION, retrieve, trace)
    assert retrieve.queries == [QUESTION, "verdict query"]
    decision = trace.judgements[0].decision
    assert decision["rewrite_error"] and decision["rewrite_query"] == "verdict query"


@pytest.mark.unit
def test_a_sufficient_verdict_asks_for_no_rewrite(tmp_path):
    judge, backend = design_gate([scored(75, "partial_coverage")], tmp_path)
    trace = JudgementLog()
    judge.run(QUESTION, StubRetrieve(), trace)
    assert len(backend.requests) == 1 and "rewrite_guidance" not in trace.judgements[0].decision


@pytest.mark.unit
def test_the_basic_issue_set_makes_no_rewrite_call(tmp_path):
    backend = ScriptedLLM([scored(20, "off_topic", "verdict query"), scored(90)])
    judge = QualityGate(QualityGateParams(mode="llm", verdict="scored", max_retries=1), LLMClient(backend, tmp_path))
    retrieve = StubRetrieve()
    judge.run(QUESTION, retrieve, JudgementLog())
    assert retrieve.queries == [QUESTION, "verdict query"] and len(backend.requests) == 2
    assert "missing_key_info" not in prompt_of(backend, 0)


@pytest.mark.unit
def test_the_design_prompt_lists_the_design_issues_with_their_meaning(tmp_path):
    judge, backend = design_gate([scored(90)], tmp_path)
    judge.run(QUESTION, StubRetrieve(), JudgementLog())
    prompt = prompt_of(backend, 0)
    assert all(f"- {issue}: the chunks are" in prompt for issue in DESIGN_TABLE)


@pytest.mark.unit
def test_the_design_verdict_names_only_design_issues():
    assert set(DESIGN_ISSUE_TYPES) == set(DESIGN_TABLE)
    issue_field = DesignScoredVerdict.model_json_schema()["properties"]["issue"]
    assert set(issue_field["enum"]) == {"none", *DESIGN_TABLE}
    assert DesignScoredVerdict.model_validate_json(scored(10, "Missing key-info")).issue == "missing_key_info"
    with pytest.raises(ValidationError):
        DesignScoredVerdict.model_validate_json(scored(10, "missing_aspect"))  # a basic-only name


@pytest.mark.unit
def test_a_basic_issue_in_a_design_verdict_falls_back_to_the_first_retrieval(tmp_path):
    judge, _ = design_gate([scored(10, "missing_aspect", "q2")], tmp_path)
    retrieve, trace = StubRetrieve(), JudgementLog()
    judge.run(QUESTION, retrieve, trace)
    assert retrieve.queries == [QUESTION] and trace.judgements[0].fell_back


@pytest.mark.unit
def test_the_heuristic_names_its_diagnosis_in_the_design_set():
    judge = QualityGate(QualityGateParams(mode="heuristic", issue_set="design", min_top_score=0.0,
                                          min_mean_score=0.9, max_retries=1))
    trace = JudgementLog()
    judge.run(QUESTION, StubRetrieve(), trace)
    assert trace.judgements[0].decision["issue"] == "partial_coverage"  # basic: partial


@pytest.mark.unit
def test_design_parameters_are_validated_with_one_line_naming_the_choices():
    assert QualityGateParams(mode="llm", verdict="scored", issue_set="design",
                             switch_strategy={"wrong_domain": "dense"}).switch_map() == {"wrong_domain": "dense"}
    # The early tier switches on off_topic and wrong_domain only (missing_key_info -> dense is the late tier's).
    assert QualityGateParams(mode="llm", verdict="scored", issue_set="design", switch_strategy="design"
                             ).switch_map() == {"off_topic": "bm25", "wrong_domain": "bm25"}
    with pytest.raises(ValidationError, match="set issue_set: design"):
        QualityGateParams(mode="llm", verdict="scored", switch_strategy="design")
    with pytest.raises(ValidationError, match="needs verdict: scored"):
        QualityGateParams(mode="llm", issue_set="design")
    with pytest.raises(ValidationError, match=r"unknown issue \['wrong_domain'\]\. Valid issues: off_topic"):
        QualityGateParams(mode="llm", verdict="scored", switch_strategy={"wrong_domain": "dense"})
    with pytest.raises(ValidationError, match=r"unknown issue \['missing_aspect'\]\. Valid issues: off_topic, missing"):
        QualityGateParams(mode="llm", verdict="scored", issue_set="design",
                          switch_strategy={"missing_aspect": "dense"})


@pytest.mark.unit
def test_the_new_options_at_their_default_leave_the_key_unchanged():
    plain = QualityGateParams(mode="llm")
    explicit = QualityGateParams(mode="llm", issue_set="basic", position="before_rerank")
    assert explicit.key_dump() == plain.key_dump() and "issue_set" not in plain.key_dump()
    design = QualityGateParams(mode="llm", verdict="scored", issue_set="design", switch_strategy="design")
    assert design.key_dump()["switch_strategy"] == "design"
    assert design.key_dump()["design_revision"] == 2  # the set's meaning changed: no stale cached result
    assert "design_revision" not in explicit.key_dump()
    assert design.attempt_scale == "question_overlap"  # a switching gate ranks on one scale


@pytest.mark.integration
@pytest.mark.slow  # three calls of the embedded model: 1-2 minutes on a shared machine
def test_the_design_issue_set_on_the_embedded_model(local_backend, tmp_path):
    """Mechanics on SmolLM2: every verdict is a design issue (the schema allows no other) or a
    recorded fallback, and each failed check with an issue is followed by a guided rewrite."""
    judge = QualityGate(QualityGateParams(mode="llm", verdict="scored", issue_set="design", switch_strategy="design",
                                          max_attempts=2, max_tokens=120),
                        LLMClient(local_backend, tmp_path))
    retrieve, switch, trace = StubRetrieve(), Switches(), JudgementLog()
    judge.run(QUESTION, retrieve, trace, switch=switch, strategy="dense")
    assert trace.judgements
    for judgement in trace.judgements:
        decision = judgement.decision
        if judgement.fell_back:
            continue
        assert decision["issue"] in ("none", *DESIGN_TABLE)
        if not decision["sufficient"] and decision["issue"] != "none" and "action" in decision \
                and decision["action"] != "final check":
            assert decision["rewrite_guidance"] and decision["rewrite_query"]
            assert decision["rewrite_strategy"] in ("dense", "bm25", "hybrid")

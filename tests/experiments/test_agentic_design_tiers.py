"""The agentic design's three tiers, with the numbers of experiments/reference/agentic.yaml (read
from the file, so a change there is tested here) on scripted LLMs: each case asserts the action
the design names.

- hallucination tiers: 0.6 and above proceeds (0.6-0.8 too); below 0.6 regenerate when the
  retrieval was good, re-retrieve (next strategy) when it was poor;
- the early tier (the retrieval gate): 8 issue types (none and 7 issues, off_topic among them);
  off_topic and wrong_domain switch to keyword search (bm25), every other issue rewrites the query
  in the strategy in use;
- the late tier: the answer passes at 65 after a good retrieval, 50 after a poor one; a failed
  answer's issue (named by the grader, else its lowest grade) picks the strategy from the design's
  map (off_topic, wrong_domain -> bm25, missing_key_info -> dense) and the retry goes back through
  query expansion and the gate; three attempts at most.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.pipeline.pipeline import Pipeline
from ragkit.stages.answer.answer_check import AnswerCheckJudge, AnswerCheckParams
from ragkit.stages.answer.correction import CorrectionAttempt, HallucinationCorrector
from ragkit.stages.answer.generator import Answer
from ragkit.stages.answer.groundedness import GroundednessParams
from ragkit.stages.base import Judgement, JudgementLog
from ragkit.stages.question import AnswerActions, QuestionContext
from ragkit.stages.retrieval.quality_gate.issues import DESIGN_ISSUE_TYPES, DesignScoredVerdict
from ragkit.stages.retrieval.quality_gate.stage import QualityGate, QualityGateParams
from tests.doubles import SwitchableStub
from tests.pipeline.test_loops import client, generator, stages

pytestmark = pytest.mark.unit

AGENTIC = Path(__file__).resolve().parents[2] / "experiments" / "reference" / "agentic.yaml"
QUESTION = "why do cats purr"


def design(judge: str, variant: int | None = None) -> dict[str, Any]:
    """The judge's design-level params as agentic.yaml writes them."""
    params = yaml.safe_load(AGENTIC.read_text(encoding="utf-8"))["judges"][judge]["params"]
    return dict(params[variant] if variant is not None else params)


# --- hallucination tiers --------------------------------------------------------------------------

class Steps:
    """Scripted correction steps: the re-check scores the corrected answer 0.9 (accepted)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.switched: list[str] = []

    def regenerate(self, nodes, unsupported):
        self.calls.append("regenerate")
        return Answer("corrected", [], "p", valid=True)

    def re_retrieve(self, query):
        self.calls.append("re_retrieve")
        return [NodeWithScore(node=TextNode(id_="fresh", text="fresh"), score=0.5)]

    def check(self, answer, nodes):
        self.calls.append("check")
        return 0.9, Judgement("groundedness", QUESTION, {"claims": []})


def correct(score: float, retrieval_quality: float | None) -> tuple[list[str], list[str]]:
    params = GroundednessParams(mode="llm", **design("groundedness", 1))
    steps = Steps()
    claims = {"claims": [{"claim": "Cats bark.", "verdict": "unsupported"}]}
    first = CorrectionAttempt(Answer("first", [], "p", valid=True), [], score,
                              Judgement("groundedness", QUESTION, claims))
    actions = AnswerActions(steps.regenerate, steps.re_retrieve, switch=steps.switched.append, strategy="dense")
    HallucinationCorrector(params).run(QuestionContext(QUESTION, QUESTION), first, actions, steps.check,
                                       retrieval_quality)
    return steps.calls, steps.switched


@pytest.mark.parametrize(("score", "quality"), [(0.9, 0.8), (0.8, None), (0.7, 0.8), (0.6, 0.3), (0.65, None)])
def test_a_hallucination_score_of_0_6_or_more_proceeds_whatever_the_retrieval(score, quality):
    assert correct(score, quality) == ([], [])


@pytest.mark.parametrize(("score", "quality"), [(0.59, 0.8), (0.2, 0.6), (0.0, None)])
def test_below_0_6_after_a_good_retrieval_the_answer_is_regenerated(score, quality):
    assert correct(score, quality) == (["regenerate", "check"], [])


@pytest.mark.parametrize("score", [0.59, 0.1])
def test_below_0_6_after_a_poor_retrieval_the_next_strategy_is_searched(score):
    assert correct(score, 0.4) == (["re_retrieve", "regenerate", "check"], ["bm25"])  # dense -> bm25


# --- the early tier: the gate's issue types and switch map ----------------------------------------

def scored(score: int, issue: str = "none", query: str = "") -> str:
    return json.dumps({"score": score, "issue": issue, "missing_aspects": [], "reformulated_query": query,
                       "reason": "r"})


def test_the_gate_knows_the_designs_8_types():
    assert set(DesignScoredVerdict.model_json_schema()["properties"]["issue"]["enum"]) == {
        "none", "off_topic", "missing_key_info", "wrong_domain", "partial_coverage", "too_broad", "too_narrow",
        "no_coverage"}
    assert len(DESIGN_ISSUE_TYPES) + 1 == 8


@pytest.mark.parametrize(("issue", "action", "strategy"), [
    ("off_topic", "switch", "bm25"), ("wrong_domain", "switch", "bm25"),
    ("missing_key_info", "retry", "hybrid"), ("partial_coverage", "retry", "hybrid"), ("too_broad", "retry", "hybrid"),
    ("too_narrow", "retry", "hybrid"), ("no_coverage", "retry", "hybrid"),
])
def test_the_early_tier_switches_on_off_topic_and_wrong_domain_only(tmp_path, issue, action, strategy):
    llm, _ = client([scored(20, issue, "verdict query"), json.dumps({"query": "rewritten query"}), scored(80)],
                    tmp_path)
    gate = QualityGate(QualityGateParams(mode="llm", **design("quality_gate", 1)), llm)
    switched: list[str] = []
    searched: list[str] = []

    def retrieve(query: str) -> list[NodeWithScore]:
        searched.append(query)
        return [NodeWithScore(node=TextNode(id_=query, text=f"about {query}"), score=0.5)]

    trace = JudgementLog()
    gate.run(QUESTION, retrieve, trace, switch=switched.append, strategy="hybrid")
    first = trace.judgements[0].decision
    assert (first["issue"], first["action"], first["strategy"]) == (issue, action, strategy)
    assert switched == ([strategy] if action == "switch" else [])
    assert searched == [QUESTION, "rewritten query"]  # every issue rewrites the query for the retry


# --- the late tier ---------------------------------------------------------------------------------

def graded(relevance: int, completeness: int, accuracy: int, issue: str = "none", reason: str = "") -> str:
    return json.dumps({"relevance": relevance, "completeness": completeness, "accuracy": accuracy,
                       "reason": reason, "issue": issue})


def late_tier(tmp_path, replies: list[str], start: str = "hybrid"):
    """A pipeline of the design's gate (scored, no strategy switch: its verdicts here name no issue),
    the generator and the design's late tier, over a switchable retriever starting at ``start``."""
    llm, _ = client(replies, tmp_path)
    gate = QualityGate(QualityGateParams(mode="llm", **design("quality_gate", 0)), llm)
    checker = AnswerCheckJudge(AnswerCheckParams(mode="llm", **design("answer_check")), llm)
    switchable = SwitchableStub(start)
    trace = Pipeline(switchable, switchable, stages=(gate, generator(llm), checker), switchable=switchable,
                     clients=(llm,)).answer(QUESTION)
    return trace, switchable, [j.decision for j in trace.judgements if j.judge == "answer_check"]


def test_after_a_good_retrieval_an_answer_needs_65(tmp_path):
    # gate 80 (good) -> answer graded 55 fails at 65 -> back through the gate (80) -> retry graded 70 passes.
    trace, switchable, (first, retry) = late_tier(tmp_path, [
        scored(80), "Cats purr.", graded(55, 90, 90, "partial_coverage", "misses why"),
        scored(80), "Cats purr when content.", graded(70, 90, 90)])
    assert (first["threshold"], first["passed"], first["issue"], first["action"]) == (65, False, "partial_coverage",
                                                                                      "re_retrieve")
    assert retry["threshold"] == 65 and retry["passed"] and retry["kept"] == 1
    # The retry went back through the gate (query expansion sits inside its retrieve), not one plain search.
    assert stages(trace) == ["judge:quality_gate", "generate", "judge:answer_check", "judge:quality_gate",
                             "retry:regenerate", "judge:answer_check"]
    assert switchable.parts["hybrid"].queries == [QUESTION, "why do cats purr misses"]


def test_after_a_poor_retrieval_an_answer_passes_at_50(tmp_path):
    _, _, (first,) = late_tier(tmp_path, [scored(40), "Cats purr.", graded(55, 90, 90)])
    assert (first["threshold"], first["retrieval_quality"], first["passed"], first["action"]) == (50, 0.4, True,
                                                                                                  "accept")


@pytest.mark.parametrize(("named", "grades", "issue", "strategy"), [
    ("off_topic", (30, 90, 90), "off_topic", "bm25"),
    ("wrong_domain", (90, 90, 30), "wrong_domain", "bm25"),
    ("missing_key_info", (90, 30, 90), "missing_key_info", "dense"),
    ("too_narrow", (90, 30, 90), "too_narrow", "hybrid"),  # no entry in the map: the strategy in use
    ("none", (30, 90, 90), "off_topic", "bm25"),  # named none: the lowest grade stands for it
    ("none", (90, 90, 30), "missing_key_info", "dense"),
])
def test_a_failed_answers_issue_picks_the_strategy_of_its_retry(tmp_path, named, grades, issue, strategy):
    _, switchable, decisions = late_tier(tmp_path, [
        scored(80), "Cats purr.", graded(*grades, issue=named, reason="purring"),
        scored(80), "Cats purr when content.", graded(90, 90, 90)])
    first = decisions[0]
    assert (first["issue"], first["action"]) == (issue, "re_retrieve")
    assert first.get("strategy", "hybrid") == strategy
    assert switchable.parts[strategy].queries[-1] == "why do cats purr purring"  # the retry searched with it


def test_three_attempts_at_most(tmp_path):
    trace, _, decisions = late_tier(tmp_path, [
        scored(80), "a1.", graded(30, 30, 30, "partial_coverage", "whiskers"),
        scored(80), "a2.", graded(35, 35, 35, "partial_coverage", "vibration"),
        scored(80), "a3.", graded(40, 40, 40, "partial_coverage", "larynx")])
    assert [d["attempt"] for d in decisions] == [0, 1, 2]
    assert decisions[-1]["stopped"] == "max_retries" and decisions[-1]["action"] == "stop"
    assert stages(trace).count("judge:quality_gate") == 3

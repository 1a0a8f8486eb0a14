"""The pipeline's agentic paths with scripted parts: routing (documents, conversational, web with
and without a provider), follow-ups condensed before retrieval, a strategy chosen per query, web
fallback after a failed gate, hallucination correction with every attempt a stage of its own,
and the answer check. The judges' own rules are tested with each judge; here the order of the
steps, what each sees, and what the trace records."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import ClassVar

import pytest
from llama_index.core.retrievers import BaseRetriever

from ragkit.errors import WebSearchError
from ragkit.llms import LLMClient
from ragkit.pipeline.pipeline import NO_WEB_PROVIDER, Pipeline
from ragkit.stages.answer.answer_check import AnswerCheckJudge, AnswerCheckParams
from ragkit.stages.answer.generator import Generator, GeneratorParams
from ragkit.stages.answer.groundedness import GroundednessJudge, GroundednessParams
from ragkit.web import WebResult
from tests.doubles import NamedRetriever, SwitchableStub
from tests.factories import scripted_llm_class

pytestmark = pytest.mark.unit

ScriptedLLM = scripted_llm_class()


@dataclass
class Route:
    route: str
    relevance: str = "yes"
    confidence: float | None = 0.9
    valid: bool = True


@dataclass
class FixedRouter:
    name: ClassVar[str] = "router"
    role: ClassVar[str] = "route"
    route_to: str
    seen: list = field(default_factory=list)

    def route(self, question, history, trace):
        self.seen.append((question, list(history)))
        return Route(self.route_to)


class FakeWeb:
    name = "fake"

    def __init__(self, results=None, error=None) -> None:
        self.results, self.error, self.queries = results or [], error, []

    def search(self, query, k):
        self.queries.append((query, k))
        if self.error:
            raise WebSearchError(self.error)
        return self.results[:k]


@dataclass
class Turn:
    role: str
    content: str


def client(replies, tmp_path):
    backend = ScriptedLLM(replies)
    return LLMClient(backend, tmp_path), backend


def generator(llm, **params):
    return Generator(GeneratorParams(constrained=False, **params), llm)


def stages(trace):
    return [row["stage"] for row in trace.stages]


def test_conversational_route_answers_without_retrieval(tmp_path):
    llm, backend = client(["Hello there!"], tmp_path)
    retriever = NamedRetriever()
    router = FixedRouter("conversational")
    history = [Turn("user", "hi")]
    trace = Pipeline(retriever, retriever, stages=(router, generator(llm)), clients=(llm,)).answer(
        "thanks a lot", history=history)
    assert retriever.queries == [] and trace.nodes == [] and trace.route == "conversational"
    assert trace.answer.text == "Hello there!" and stages(trace) == ["judge:router", "generate"]
    assert router.seen == [("thanks a lot", history)] and "user: hi" in backend.requests[0][-1]["content"]


def test_web_route_without_a_provider_is_recorded_and_answered_not_found(tmp_path):
    llm, backend = client(["unused"], tmp_path)
    retriever = NamedRetriever()
    trace = Pipeline(retriever, retriever, stages=(FixedRouter("web"), generator(llm)), clients=(llm,)).answer(
        "who won the cup final")
    assert retriever.queries == [] and backend.requests == []
    assert (trace.answer.text, trace.abstained) == ("not found", True)
    web = next(j for j in trace.judgements if j.judge == "web")
    assert web.decision["action"] == "not searched" and web.decision["reason"] == NO_WEB_PROVIDER
    assert stages(trace) == ["judge:router", "generate"]


def test_web_route_with_a_provider_answers_from_its_results(tmp_path):
    llm, backend = client(["The final was won by A [1]."], tmp_path)
    retriever = NamedRetriever()
    web = FakeWeb([WebResult(title="Final", url="http://example.test/final", snippet="A won the final.")])
    trace = Pipeline(retriever, retriever, stages=(FixedRouter("web"), generator(llm)), web=web, web_results=3,
                     clients=(llm,)).answer("who won the cup final")
    assert web.queries == [("who won the cup final", 3)] and retriever.queries == []
    assert [n.node.metadata["doc_id"] for n in trace.nodes] == ["web:http://example.test/final"]
    assert "A won the final." in backend.requests[0][-1]["content"] and not trace.abstained
    assert stages(trace) == ["judge:router", "web:search", "generate"]


def test_a_failing_provider_is_recorded_invalid_and_nothing_is_made_up(tmp_path):
    llm, _ = client(["unused"], tmp_path)
    retriever = NamedRetriever()
    trace = Pipeline(retriever, retriever,
                     stages=(FixedRouter("web"), generator(llm, abstain_text="I could not find it.")),
                     web=FakeWeb(error="http://x: refused"), clients=(llm,)).answer("q?")
    web = next(j for j in trace.judgements if j.judge == "web")
    assert (web.valid, web.error) == (False, "http://x: refused")
    assert trace.answer.text == "I could not find it." and trace.abstained


def test_documents_route_takes_the_plain_path(tmp_path):
    retriever = NamedRetriever()
    trace = Pipeline(retriever, retriever, stages=(FixedRouter("documents"),)).answer("why do cats purr")
    assert retriever.queries == ["why do cats purr"] and stages(trace) == ["judge:router", "retrieve"]
    assert trace.route == "documents"


class Condense:
    name, role = "condense", "follow_up"

    def __init__(self) -> None:
        self.calls = []

    def rewrite(self, question, history, trace):
        self.calls.append((question, list(history)))
        return "standalone: " + question


def test_a_follow_up_is_condensed_before_retrieval_and_a_question_without_history_is_not(tmp_path):
    retriever = NamedRetriever()
    condense = Condense()
    pipeline = Pipeline(retriever, retriever, stages=(condense,))
    trace = pipeline.answer("and its incubation?", history=[Turn("user", "tell me about covid")])
    assert retriever.queries == ["standalone: and its incubation?"] and trace.query == retriever.queries[0]
    assert stages(trace) == ["judge:condense", "retrieve"]
    trace = pipeline.answer("why do cats purr")
    assert len(condense.calls) == 1 and retriever.queries[-1] == "why do cats purr"
    assert stages(trace) == ["retrieve"]


class Strategy:
    name, role = "strategy", "strategy"

    def __init__(self, choice) -> None:
        self.choice = choice

    def choose(self, query, trace):
        return self.choice


@pytest.mark.parametrize(("choice", "used"), [("bm25", "bm25"), (None, "dense")])
def test_the_strategy_chosen_per_query_retrieves_and_is_reset_for_the_next(choice, used):
    switchable = SwitchableStub()
    pipeline = Pipeline(switchable, switchable, stages=(Strategy(choice),), switchable=switchable)
    trace = pipeline.answer("cats")
    assert trace.nodes[0].node.node_id == f"{used}:cats"
    assert switchable.log == (["reset", "use bm25"] if choice else ["reset"])
    assert stages(trace) == ["judge:strategy", "retrieve"]
    pipeline.answer("dogs")
    assert switchable.log[-1] == "reset" or switchable.log[-2] == "reset"


@dataclass
class Outcome:
    passed: bool | None
    quality: float | None = None


class Gate:
    """A quality gate that fails or passes, with web_fallback on."""

    name, role = "quality_gate", "gate"

    def __init__(self, passed, web_fallback=True) -> None:
        self.outcome = Outcome(passed, 0.2)
        self.params = type("P", (), {"web_fallback": web_fallback})()
        self.switch = "unset"

    def run(self, query, retrieve, trace, switch=None, strategy=None):
        self.switch = switch
        return retrieve(query)


@pytest.mark.parametrize(("passed", "web_fallback", "source"), [
    (False, True, "web"), (True, True, "docs"), (False, False, "docs"), (None, True, "docs")])
def test_web_fallback_replaces_the_documents_only_after_a_failed_gate(passed, web_fallback, source):
    retriever = NamedRetriever()
    web = FakeWeb([WebResult(title="t", url="http://w.test/1", snippet="cats purr")])
    gate = Gate(passed, web_fallback)
    trace = Pipeline(retriever, retriever, stages=(gate,), web=web).answer("cats")
    assert trace.nodes[0].node.metadata["doc_id"].startswith("web:") is (source == "web")
    assert gate.switch is None  # no switchable retriever: nothing to switch


def test_web_fallback_without_a_provider_keeps_the_documents_and_records_why():
    retriever = NamedRetriever()
    trace = Pipeline(retriever, retriever, stages=(Gate(False),)).answer("cats")
    assert trace.nodes[0].node.node_id == "docs:cats"
    (web,) = [j for j in trace.judgements if j.judge == "web"]
    assert web.decision["because"] == "the quality gate failed" and web.decision["action"] == "not searched"


def verdict(supported: bool) -> str:
    return json.dumps({"supported": supported, "evidence": ""})


def test_correction_regenerates_and_every_attempt_is_a_stage_and_a_judgement(tmp_path):
    llm, backend = client([
        "Cats purr when content. Cats are made of glass.",    # first answer
        verdict(True), verdict(False),                        # 0.5: below accept_at, regenerate tier
        "Cats purr when content today.",                      # regenerated with the claim listed
        verdict(True),                                        # 1.0: accepted
    ], tmp_path)
    retriever = NamedRetriever()
    grounded = GroundednessJudge(GroundednessParams(on_fail="re_retrieve", regenerate_at=0.5), llm)
    trace = Pipeline(retriever, retriever, stages=(generator(llm), grounded), clients=(llm,)).answer("why do cats purr")
    assert stages(trace) == ["retrieve", "generate", "judge:groundedness", "correct:regenerate",
                             "judge:groundedness"]
    assert [row["llm_calls"] for row in trace.stages] == [0, 1, 2, 1, 1]
    assert trace.answer.text == "Cats purr when content today." and trace.groundedness == 1.0
    assert "- Cats are made of glass." in backend.requests[3][-1]["content"]
    assert [j.judge for j in trace.judgements] == ["generator", "groundedness", "generator", "groundedness",
                                                   "correction"]


def test_a_low_score_re_retrieves_with_the_refined_query(tmp_path):
    llm, _ = client(["Glass cats shatter loudly.", verdict(False),
                     "Cats purr when content.", verdict(True)], tmp_path)
    retriever = NamedRetriever()
    grounded = GroundednessJudge(GroundednessParams(on_fail="re_retrieve"), llm)
    trace = Pipeline(retriever, retriever, stages=(generator(llm), grounded), clients=(llm,)).answer("why do cats purr")
    assert retriever.queries == ["why do cats purr", "why do cats purr glass shatter loudly"]
    assert stages(trace) == ["retrieve", "generate", "judge:groundedness", "correct:re_retrieve",
                             "correct:regenerate", "judge:groundedness"]
    assert trace.nodes[0].node.node_id == "docs:why do cats purr glass shatter loudly"


def test_correction_off_checks_once(tmp_path):
    llm, _ = client(["Glass cats shatter loudly.", verdict(False)], tmp_path)
    retriever = NamedRetriever()
    trace = Pipeline(retriever, retriever, stages=(generator(llm), GroundednessJudge(GroundednessParams(), llm)),
                     clients=(llm,)).answer("q cats")
    assert stages(trace) == ["retrieve", "generate", "judge:groundedness"] and trace.groundedness == 0.0


def test_answer_check_grades_the_final_answer_and_skips_an_abstention(tmp_path):
    llm, _ = client(["Cats purr when content [1].",
                     json.dumps({"relevance": 80, "completeness": 60, "accuracy": 100})], tmp_path)
    retriever = NamedRetriever()
    checker = AnswerCheckJudge(AnswerCheckParams(), llm)
    trace = Pipeline(retriever, retriever, stages=(generator(llm), checker), clients=(llm,)).answer("why do cats purr")
    assert trace.answer_check == {"relevance": 0.8, "completeness": 0.6, "accuracy": 1.0}
    assert stages(trace) == ["retrieve", "generate", "judge:answer_check"]
    trace = Pipeline(retriever, retriever, stages=(FixedRouter("web"), generator(llm), checker),
                     clients=(llm,)).answer("football")
    assert trace.answer_check is None and trace.answer_check_error == "the generator abstained"


def test_abstain_text_when_a_threshold_left_no_chunk(tmp_path):
    class Empty(BaseRetriever):
        def _retrieve(self, query_bundle):
            return []

    llm, backend = client(["unused"], tmp_path)
    trace = Pipeline(Empty(), Empty(), stages=(generator(llm, abstain_text="Not in the documents."),
                                              GroundednessJudge(GroundednessParams(), llm)), clients=(llm,)).answer("q")
    assert trace.answer.text == "Not in the documents." and trace.abstained and backend.requests == []
    assert trace.groundedness is None and "abstained" in trace.groundedness_error


def test_after_the_gate_later_searches_use_the_kept_attempts_strategy():
    class SwitchingGate(Gate):
        """Tries bm25, then hybrid, and keeps the bm25 attempt."""

        def run(self, query, retrieve, trace, switch=None, strategy=None):
            switch("bm25")
            kept = retrieve(query)
            switch("dense")
            retrieve(query)
            self.outcome = type("O", (), {"passed": True, "quality": 0.9, "strategy": "bm25"})()
            return kept

    switchable = SwitchableStub()
    gate = SwitchingGate(True, web_fallback=False)
    trace = Pipeline(switchable, switchable, stages=(gate,), switchable=switchable).answer("cats")
    assert trace.nodes[0].node.node_id == "bm25:cats" and switchable.current == "bm25"


@pytest.mark.parametrize(("run_retriever", "chosen"), [("hybrid", None), ("dense", "hybrid")])
def test_the_gate_starts_from_the_strategy_in_use_and_does_not_repeat_its_search(tmp_path, run_retriever, chosen):
    """A no_coverage -> hybrid diagnosis on a search already made with hybrid (the run's retriever,
    or the strategy judge's choice) is no switch: without a new query there is nothing to search."""
    from ragkit.stages.retrieval.quality_gate.stage import QualityGate, QualityGateParams

    no_coverage = json.dumps({"score": 20, "issue": "no_coverage", "missing_aspects": [], "reformulated_query": "",
                              "reason": "r"})
    llm, backend = client([no_coverage, no_coverage], tmp_path)
    gate = QualityGate(QualityGateParams(verdict="scored", max_attempts=2, switch_strategy={"no_coverage": "hybrid"}),
                       llm)
    switchable = SwitchableStub(run_retriever)
    trace = Pipeline(switchable, switchable, stages=(*([Strategy(chosen)] if chosen else []), gate),
                     switchable=switchable, clients=(llm,)).answer("why do dogs bark")
    assert switchable.parts["hybrid"].queries == ["why do dogs bark"] and len(backend.requests) == 1
    (judgement,) = [j for j in trace.judgements if j.judge == "quality_gate"]
    assert judgement.decision["stopped"] == "no new query" and judgement.decision["strategy"] == "hybrid"
    assert trace.nodes[0].node.node_id == "hybrid:why do dogs bark"

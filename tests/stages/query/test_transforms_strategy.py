"""Multi-query with ``strategy_in_prompt``: the strategy chosen for the question is in the prompt
(and the decision), none is when none was chosen, and a quality-gate retry with another strategy
regenerates the expansions for it; off, the prompt and its cached rewrites stay as they were."""

from __future__ import annotations

import json

import pytest

from ragkit.llms import LLMClient
from ragkit.retrievers.switchable import SwitchableRetriever
from ragkit.stages.base import JudgementLog
from ragkit.stages.query.transforms import MultiQueryParams, MultiQueryRetriever, multi_query_prompt
from ragkit.stages.retrieval.quality_gate.stage import QualityGate, QualityGateParams
from tests.doubles import NamedRetriever
from tests.factories import scripted_llm_class

pytestmark = pytest.mark.unit

ScriptedLLM = scripted_llm_class()
QUERY = "why do cats purr"


def switchable() -> SwitchableRetriever:
    """One chunk per query from each strategy, named after it and the query."""
    parts = {name: NamedRetriever(name, text="cats purr", score=0.5, doc_id=None) for name in ("dense", "bm25")}
    return SwitchableRetriever(parts, default="dense")


def queries(*texts: str) -> str:
    return json.dumps({"queries": list(texts)})


def multi_query(tmp_path, replies, retriever, **params) -> tuple[MultiQueryRetriever, ScriptedLLM]:
    backend = ScriptedLLM(replies)
    judge = MultiQueryRetriever(MultiQueryParams(num_queries=2, **params), LLMClient(backend, tmp_path / "mq"),
                                retriever=retriever)
    return judge, backend


def prompt(backend: ScriptedLLM, call: int) -> str:
    return backend.requests[call][-1]["content"]


@pytest.mark.parametrize("style", ["generic", "typed"])
def test_the_chosen_strategy_is_in_the_prompt_and_the_decision(tmp_path, style):
    typed = json.dumps({"technical": "feline purr", "simple": "cat purring", "aspect": "purr sound"})
    retriever = switchable()
    retriever.use("bm25")  # as the strategy judge does
    judge, backend = multi_query(tmp_path, [typed if style == "typed" else queries("a", "b")], retriever,
                                 strategy_in_prompt=True, style=style)
    trace = JudgementLog()
    judge.use_trace(trace)
    judge.retrieve(QUERY)
    assert "The queries are searched with bm25, an exact-word search" in prompt(backend, 0)
    assert trace.judgements[0].decision["strategy"] == "bm25"


@pytest.mark.parametrize("option, chosen", [(True, None), (False, "bm25")])
def test_without_a_chosen_strategy_or_the_option_the_prompt_is_todays(tmp_path, option, chosen):
    retriever = switchable()
    if chosen:
        retriever.use(chosen)
    judge, backend = multi_query(tmp_path, [queries("a", "b")], retriever, strategy_in_prompt=option)
    trace = JudgementLog()
    judge.use_trace(trace)
    judge.retrieve(QUERY)
    assert prompt(backend, 0) == multi_query_prompt(QUERY, 2)
    assert "strategy" not in trace.judgements[0].decision


def test_the_default_leaves_the_key_unchanged():
    assert MultiQueryParams(strategy_in_prompt=False).key_dump() == MultiQueryParams().key_dump()
    assert "strategy_in_prompt" not in MultiQueryParams().key_dump()


def scored(score: int, issue: str = "none") -> str:
    return json.dumps({"score": score, "issue": issue, "missing_aspects": [], "reformulated_query": "",
                       "reason": "r"})


@pytest.mark.parametrize("option", [True, False])
def test_a_gate_switch_regenerates_the_expansions_for_the_new_strategy_only_with_the_option(tmp_path, option):
    retriever = switchable()
    judge, backend = multi_query(tmp_path, [queries("a", "b"), queries("c", "d")], retriever,
                                 strategy_in_prompt=option)
    gate = QualityGate(QualityGateParams(mode="llm", verdict="scored", switch_strategy={"no_coverage": "bm25"},
                                         max_attempts=2),
                       LLMClient(ScriptedLLM([scored(10, "no_coverage"), scored(90)]), tmp_path / "gate"))
    trace = JudgementLog()
    judge.use_trace(trace)
    gate.run(QUERY, judge.retrieve, trace, switch=retriever.use, strategy="dense")
    expansions = [j.decision["queries"] for j in trace.judgements if j.judge == "multi_query"]
    bm25 = retriever.retrievers["bm25"]
    if option:
        assert len(backend.requests) == 2 and "searched with bm25" in prompt(backend, 1)
        assert expansions == [[QUERY, "a", "b"], [QUERY, "c", "d"]]
        assert bm25.queries == [QUERY, "c", "d"]  # the new expansions, searched with the new strategy
    else:  # the same prompt: the cached rewrites come back, searched with bm25
        assert len(backend.requests) == 1
        assert expansions == [[QUERY, "a", "b"], [QUERY, "a", "b"]]
        assert bm25.queries == [QUERY, "a", "b"]


def test_expansions_before_the_strategy_leave_it_out_until_a_switch_names_the_new_one(tmp_path):
    """The agentic design expands the query before it chooses the strategy: the chosen strategy
    (here the strategy judge's bm25) is not in the first prompt; the gate's switch to dense is."""
    retriever = switchable()
    retriever.use("bm25")  # the strategy judge, before the question's first search
    judge, backend = multi_query(tmp_path, [queries("a", "b"), queries("c", "d")], retriever,
                                 strategy_in_prompt=True, expand_before_strategy=True)
    gate = QualityGate(QualityGateParams(mode="llm", verdict="scored", switch_strategy={"no_coverage": "dense"},
                                         max_attempts=2),
                       LLMClient(ScriptedLLM([scored(10, "no_coverage"), scored(90)]), tmp_path / "gate"))
    trace = JudgementLog()
    judge.use_trace(trace)
    gate.run(QUERY, judge.retrieve, trace, switch=retriever.use, strategy="bm25")
    assert prompt(backend, 0) == multi_query_prompt(QUERY, 2)  # strategy-agnostic, as made before the choice
    assert "searched with dense" in prompt(backend, 1)
    decisions = [j.decision for j in trace.judgements if j.judge == "multi_query"]
    assert [d.get("strategy") for d in decisions] == [None, "dense"]
    assert [d["expanded"] for d in decisions] == ["before the strategy", "for the strategy switched to"]
    assert retriever.retrievers["bm25"].queries == [QUERY, "a", "b"]  # the first expansions, with bm25
    assert retriever.retrievers["dense"].queries == [QUERY, "c", "d"]
    retriever.reset()  # the next question starts unswitched
    assert not retriever.switched and not retriever.searched


def test_expanding_before_the_strategy_needs_the_strategy_in_the_prompt_and_is_off_by_default():
    assert "expand_before_strategy" not in MultiQueryParams(strategy_in_prompt=True).key_dump()
    with pytest.raises(ValueError, match="set strategy_in_prompt"):
        MultiQueryParams(expand_before_strategy=True)

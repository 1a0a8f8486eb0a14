"""The agentic design's order: the query is expanded before the strategy is chosen. With
multi-query's ``expand_before_strategy`` the expansion call is made, recorded and timed (its own
``judge:multi_query`` stage row) before the strategy judge's, and the first search fuses those
expansions with the chosen strategy without another call; without the option the order is as it
was (strategy, then the expansions inside the search)."""

from __future__ import annotations

import json

import pytest

from ragkit.llms import LLMClient
from ragkit.pipeline.pipeline import Pipeline
from ragkit.retrievers.switchable import SwitchableRetriever
from ragkit.stages.query.strategy import StrategyJudge, StrategyParams
from ragkit.stages.query.transforms import MultiQueryParams, MultiQueryRetriever, multi_query_prompt
from tests.doubles import NamedRetriever
from tests.factories import scripted_llm_class

pytestmark = pytest.mark.unit

ScriptedLLM = scripted_llm_class()
QUESTION = "why do cats purr so loudly at night"
EXPANSIONS = json.dumps({"queries": ["feline purring", "cat purr volume"]})
CHOSEN = json.dumps({"strategy": "bm25", "confidence": 0.8, "reason": "names"})


def pipeline(tmp_path, before: bool) -> tuple[Pipeline, ScriptedLLM, SwitchableRetriever]:
    """Multi-query over dense / bm25, and an llm strategy judge, both on one scripted model."""
    replies = [EXPANSIONS, CHOSEN] if before else [CHOSEN, EXPANSIONS]
    backend = ScriptedLLM(replies)
    llm = LLMClient(backend, tmp_path / "llm")
    switchable = SwitchableRetriever({name: NamedRetriever(name, text="cats purr", doc_id=None)
                                      for name in ("dense", "bm25")}, default="dense")
    expand = MultiQueryRetriever(MultiQueryParams(num_queries=2, strategy_in_prompt=True,
                                                  expand_before_strategy=before), llm, retriever=switchable)
    strategy = StrategyJudge(StrategyParams(mode="llm"), llm)
    return (Pipeline(expand, switchable, retrieve_stage="judge:multi_query", stages=(strategy,),
                     switchable=switchable, clients=(llm,)), backend, switchable)


def test_the_expansions_are_made_before_the_strategy_is_chosen_and_searched_with_it(tmp_path):
    pipe, backend, switchable = pipeline(tmp_path, before=True)
    trace = pipe.answer(QUESTION)
    # Execution: the expansion prompt first (strategy-free: none chosen yet), then the strategy judge's.
    assert backend.requests[0][-1]["content"] == multi_query_prompt(QUESTION, 2)
    assert "Reply as JSON with strategy" in backend.requests[1][-1]["content"]
    assert len(backend.requests) == 2  # the search reused the expansions: no second call
    # Stage rows and judgements in the same order, each call on the row of the step that made it.
    assert [(row["stage"], row["llm_calls"]) for row in trace.stages] == [
        ("judge:multi_query", 1), ("judge:strategy", 1), ("judge:multi_query", 0)]
    assert [j.judge for j in trace.judgements] == ["multi_query", "strategy"]
    decision = trace.judgements[0].decision
    assert decision["expanded"] == "before the strategy" and "strategy" not in decision
    assert decision["queries"] == [QUESTION, "feline purring", "cat purr volume"]
    # The expansions are searched with the strategy chosen after them, and the judgement says what was kept.
    assert switchable.retrievers["bm25"].queries == decision["queries"]
    assert switchable.retrievers["dense"].queries == []
    assert decision["kept"] == [node.node.node_id for node in trace.nodes]


def test_expansions_prepared_for_one_question_are_not_used_for_the_next(tmp_path):
    pipe, backend, _ = pipeline(tmp_path, before=True)
    backend.replies = [EXPANSIONS, CHOSEN, json.dumps({"queries": ["dog barking"]}), CHOSEN]
    pipe.answer(QUESTION)
    trace = pipe.answer("why do dogs bark")
    assert trace.judgements[0].decision["queries"] == ["why do dogs bark", "dog barking"]


def test_without_the_option_the_strategy_is_chosen_first_and_named_in_the_expansion_prompt(tmp_path):
    pipe, backend, switchable = pipeline(tmp_path, before=False)
    trace = pipe.answer(QUESTION)
    assert "Reply as JSON with strategy" in backend.requests[0][-1]["content"]
    assert backend.requests[1][-1]["content"] == multi_query_prompt(QUESTION, 2, "bm25")
    assert [(row["stage"], row["llm_calls"]) for row in trace.stages] == [
        ("judge:strategy", 1), ("judge:multi_query", 1)]
    assert [j.judge for j in trace.judgements] == ["strategy", "multi_query"]
    assert switchable.retrievers["bm25"].queries == trace.judgements[1].decision["queries"]

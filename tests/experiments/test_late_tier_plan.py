"""What the late tier's options change in the plan: the LLM a groundedness judge that splits
claims with it gets in mode nli, and the switchable retriever a late re-retrieval with another
strategy needs; at their defaults nothing changes."""

from __future__ import annotations

import pytest

from ragkit.corpus.model import Corpus, make_document
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.config.grid import expand_grid
from ragkit.experiments.plan import make_plan, roles_calling_llm
from ragkit.llms.base import llms
from ragkit.questions import Question, QuestionSet

pytestmark = pytest.mark.unit


def config(judges: dict):
    return config_from_dict({"name": "late", "dataset": {"path": "unused.jsonl"}, "retrievers": ["dense"],
                             "top_k": [5], "judges": judges, "generator": True})


def plan(judges: dict):
    corpus = Corpus.from_documents("late", [make_document("d1", "Cats purr when content. " * 5)])
    questions = QuestionSet(name="late", format="jsonl", questions=[
        Question(id="q1", text="why do cats purr", relevant_docs={"d1": 1.0})])
    local = llms.resolve({"type": "local"})
    return make_plan(config(judges), corpus, questions, {"groundedness": local, "answer_check": local,
                                                         "generator": local})


NLI = {"mode": "nli", "params": {"nli_model_path": "/models/nli"}}


def test_nli_gets_the_llm_only_when_it_splits_claims_with_it():
    (rule,) = expand_grid(config({"groundedness": NLI}))
    (split,) = expand_grid(config({"groundedness": {**NLI, "params": {**NLI["params"], "claim_split": "llm"}}}))
    assert "groundedness" not in roles_calling_llm(rule) and "groundedness" in roles_calling_llm(split)
    (run,) = plan({"groundedness": {**NLI, "params": {**NLI["params"], "claim_split": "llm"}}}).runs
    assert "groundedness" in run.llms
    (rule_run,) = plan({"groundedness": NLI}).runs
    assert "groundedness" not in rule_run.llms


@pytest.mark.parametrize(("judges", "switches"), [
    ({"groundedness": {"mode": "llm", "params": {"on_fail": "re_retrieve"}}}, False),
    ({"groundedness": {"mode": "llm", "params": {"on_fail": "re_retrieve", "re_retrieve_strategy": "same"}}}, False),
    ({"groundedness": {"mode": "llm", "params": {"on_fail": "re_retrieve", "re_retrieve_strategy": "next"}}}, True),
    ({"answer_check": {"mode": "llm", "params": {"retry": True}}}, False),
    ({"answer_check": {"mode": "llm", "params": {"retry": True, "retry_strategy": "bm25"}}}, True),
])
def test_a_late_re_retrieval_with_another_strategy_gets_the_switchable_retriever(judges, switches):
    (point,) = expand_grid(config(judges))
    assert point.switches_strategy() is switches


def test_the_late_tier_at_its_defaults_plans_the_same_run_as_without_its_options():
    plain = plan({"answer_check": "llm", "groundedness": "llm"}).runs[0].run_id
    explicit = plan({"answer_check": {"mode": "llm", "params": {"retry": False, "pass_scores": [65, 50]}},
                     "groundedness": {"mode": "llm", "params": {"re_retrieve_strategy": "same"}}}).runs[0].run_id
    assert plain == explicit
    retry = plan({"answer_check": {"mode": "llm", "params": {"retry": True}}, "groundedness": "llm"}).runs[0].run_id
    assert retry != plain

"""Off is a real baseline: with every option added since run ids were first published left at
its default, a grid of every older judge and mode plans exactly the run ids it planned before.

The pinned values were first computed on the code before issue 12 (commit b965e09), and
recomputed once in issue 14, when run ids stopped hashing the question set (results are keyed
per run and question content since). A change here means every cached result of every user is
recomputed: if it is intended, bump the component's ``version`` instead and say so in the
release notes."""

from __future__ import annotations

import hashlib

import pytest

from ragkit.corpus.model import Corpus, make_document
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.plan import make_plan
from ragkit.llms.base import llms
from ragkit.questions import Question, QuestionSet

OLDER_JUDGES = ["retrieval", "rerank", "multi_query", "hyde", "quality_gate", "groundedness"]
PINNED_QUESTIONS_KEY = "017bab3adc94f648"
PINNED_RUNS = 432
PINNED_DIGEST = "359ab84d61f80d0478fdcdfb347b77988c527bf391a0e175343b4262f7d39948"
PINNED_FIRST = ["007daf9a4ae91952", "0131e027a1cc8b93", "0135ebb301f5c23b"]


@pytest.fixture(autouse=True)
def unreachable_gate_thresholds_allowed(monkeypatch):
    """The pinned grid pairs the heuristic gate's default thresholds (0.5 / 0.3 on raw scores) with
    hybrid retrieval, whose RRF scores never reach them; the config check refuses that pairing
    since issue 43. The pin is about ids, not about whether a configuration is sensible, so the
    check is off here and every pinned id is unchanged."""
    monkeypatch.setattr("ragkit.experiments.config.models.check_gate_scales", lambda config: None)


def _plan(extra_judges: dict | None = None, generator: object = True, more_questions: bool = False):
    corpus = Corpus.from_documents("pin", [make_document("d1", "Cats purr when content. " * 5),
                                           make_document("d2", "Dogs bark at night. " * 5)])
    questions = QuestionSet(name="pin", format="jsonl", questions=[
        Question(id="q1", text="why do cats purr", relevant_docs={"d1": 1.0}, answers=["when content"]),
        Question(id="q2", text="when do dogs bark", relevant_docs={"d2": 1.0}),
        *([Question(id="q3", text="do cats bark", relevant_docs={"d1": 1.0})] if more_questions else [])])
    judges = {"retrieval": "both", "rerank": ["off", "heuristic", "llm"], "multi_query": "both",
              "hyde": "both", "quality_gate": ["off", "heuristic", "llm"], "groundedness": "both",
              **(extra_judges or {})}
    config = config_from_dict({
        "name": "pin", "dataset": {"path": "unused.jsonl"}, "retrievers": ["dense", "bm25", "hybrid"],
        "top_k": [5], "judges": judges, "generator": generator,
    })
    local = llms.resolve({"type": "local"})
    roles = dict.fromkeys([*OLDER_JUDGES, *(extra_judges or {}), "generator", "chunking", "evaluation"], local)
    return make_plan(config, corpus, questions, roles)


def _fingerprint(plan) -> tuple[str, int, str, list[str]]:
    ids = sorted(run.run_id for run in plan.runs)
    return plan.questions_key, len(ids), hashlib.sha256("".join(ids).encode()).hexdigest(), ids[:3]


def test_every_older_judge_and_mode_keeps_its_run_id():
    assert _fingerprint(_plan()) == (PINNED_QUESTIONS_KEY, PINNED_RUNS, PINNED_DIGEST, PINNED_FIRST)


def test_new_judges_that_are_off_and_new_options_at_their_default_keep_every_run_id():
    off = {"condense": "off", "strategy": "off", "router": "off", "answer_check": "off"}
    explicit_defaults = {"quality_gate": {"mode": ["off", "heuristic", "llm"],
                                          "params": {"switch_strategy": {}, "web_fallback": False}},
                         "groundedness": {"mode": "both", "params": {"on_fail": "off"}},
                         "multi_query": {"mode": "both", "params": {"style": "generic"}}}
    plan = _plan({**off, **explicit_defaults},
                 generator={"params": {"system_prompt": None, "abstain_text": None}})
    assert _fingerprint(plan) == (PINNED_QUESTIONS_KEY, PINNED_RUNS, PINNED_DIGEST, PINNED_FIRST)


def test_a_new_option_that_is_on_changes_the_ids_of_the_runs_using_it_only():
    plan = _plan({"groundedness": {"mode": "both", "params": {"on_fail": "regenerate"}}})
    ids = {run.run_id for run in plan.runs}
    baseline = {run.run_id for run in _plan().runs}
    with_correction = {run.run_id for run in plan.runs if run.point.judge("groundedness") is not None}
    assert ids - baseline == with_correction and len(with_correction) == PINNED_RUNS // 2


def test_the_question_set_is_not_part_of_a_run_id():
    """Adding a question changes the set's key, not a run id: the new question is all a re-run answers."""
    grown = _plan(more_questions=True)
    assert grown.questions_key != PINNED_QUESTIONS_KEY
    assert _fingerprint(grown)[1:] == (PINNED_RUNS, PINNED_DIGEST, PINNED_FIRST)


def test_a_mode_whose_behaviour_changed_alone_keys_its_own_version_and_the_others_keep_theirs():
    """The Retrieval Judge's evaluate -> refine loop changed (a repeated refined query ends it), its
    one-call judge did not: only the loop's runs move to version 2."""
    from ragkit.experiments.plan import component_key
    from ragkit.hashing import content_key
    from ragkit.registry import ComponentSpec
    from ragkit.stages.base import STAGES as judges

    loop = ComponentSpec(type="retrieval", params={"loop": "evaluate_refine"})
    one_call = ComponentSpec(type="retrieval", params={"loop": "judge"})
    assert component_key(judges, loop) == content_key(judges.kind, "retrieval", 2, {"loop": "evaluate_refine"})
    assert component_key(judges, one_call) == content_key(judges.kind, "retrieval", 1, {"loop": "judge"})
    # The same rule keys a built stage (its spec key) as the plan keys its spec.
    info = judges.info("retrieval")
    assert info.key_version(info.Params(loop="evaluate_refine").key_dump()) == 2
    assert info.key_version(info.Params().key_dump()) == 1

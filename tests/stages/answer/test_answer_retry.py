"""The late tier: the answer check as a second gate (65, then 50 on a retry), the issue of a failed
answer, the retry it calls for, the stopping rule and the best attempt kept, with scripted steps;
then the real grader and generator on the embedded model."""

from __future__ import annotations

import json

import pytest
from llama_index.core.schema import NodeWithScore, TextNode
from pydantic import ValidationError

from ragkit.llms import LLMClient
from ragkit.stages.answer.answer_check import AnswerCheckJudge, AnswerCheckParams
from ragkit.stages.answer.answer_retry import (
    AnswerAttempt,
    AnswerRetry,
    answer_issue,
    best_attempt,
    gate_score,
)
from ragkit.stages.answer.generator import Answer, Generator, GeneratorParams
from ragkit.stages.base import Judgement, JudgementLog
from ragkit.stages.question import AnswerActions, QuestionContext

QUERY = "why do cats purr"


def nodes(*ids: str) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=i, text=f"{i} text"), score=0.5) for i in ids]


def grades(relevance: int, completeness: int, accuracy: int) -> dict[str, float | None]:
    return {"relevance": relevance / 100, "completeness": completeness / 100, "accuracy": accuracy / 100}


NOTHING: dict[str, float | None] = {"relevance": None, "completeness": None, "accuracy": None}


def judged(scores, reason="misses when they purr") -> Judgement:
    return Judgement("answer_check", QUERY, {**scores, "reason": reason})


class Script:
    """Scripted steps: each grade returns the next grades; every call is logged in order."""

    def __init__(self, graded: list[dict[str, float | None]], answers: list[Answer] | None = None) -> None:
        self.graded = list(graded)
        self.answers = list(answers or [])
        self.calls: list[tuple] = []

    def regenerate(self, chunks, feedback):
        self.calls.append(("regenerate", [n.node.node_id for n in chunks], list(feedback)))
        if self.answers:
            return self.answers.pop(0)
        return Answer(f"Answer {len(self.calls)} here.", [], "prompt", valid=True)

    def re_retrieve(self, query):
        self.calls.append(("re_retrieve", query))
        return nodes("fresh")

    def grade(self, answer, chunks):
        scores = self.graded.pop(0)
        self.calls.append(("grade", answer.text))
        return scores, judged(scores)


def run(first_scores, graded, *, re_retrieve=True, switch=None, strategy=None, answers=None, reason=None, **params):
    script = Script(graded, answers)
    first = AnswerAttempt(Answer("Cats purr. They are cats.", [], "p", valid=True), nodes("a", "b"), first_scores,
                          judged(first_scores, *([reason] if reason is not None else [])))
    trace = JudgementLog()
    actions = AnswerActions(script.regenerate, script.re_retrieve if re_retrieve else None, switch, strategy)
    result = AnswerRetry(AnswerCheckParams(retry=True, **params)).run(
        QuestionContext(QUERY, QUERY, log=trace), first, actions, script.grade)
    return result, script.calls, first


pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("scores", "how", "expected"), [
    (grades(90, 60, 75), "min", 60.0), (grades(90, 60, 75), "mean", 75.0), (NOTHING, "min", None),
    ({"relevance": 0.9, "completeness": None, "accuracy": 0.8}, "mean", None),
])
def test_gate_score(scores, how, expected):
    assert gate_score(scores, how) == expected


@pytest.mark.parametrize(("scores", "issue"), [
    (grades(30, 60, 75), "off_topic"), (grades(90, 60, 75), "incomplete"), (grades(90, 80, 40), "unsupported"),
    (grades(50, 50, 50), "off_topic"), (grades(90, 50, 50), "incomplete"),   # ties: relevance, completeness, accuracy
])
def test_the_issue_is_the_aspect_graded_lowest(scores, issue):
    assert answer_issue(scores) == issue


@pytest.mark.parametrize(("first", "passed"), [(66, True), (65, True), (64, False)])
def test_the_first_answer_passes_at_65(first, passed):
    _, calls, attempt = run(grades(90, first, 90), [grades(90, 90, 90)])
    decision = attempt.judgement.decision
    assert (decision["attempt"], decision["threshold"], decision["gate_score"], decision["passed"]) == (
        0, 65, first, passed)
    assert (calls == []) is passed and decision["action"] == ("accept" if passed else "re_retrieve")


class Recording(Script):
    """Also keeps the judgement of every retry's grade."""

    def __init__(self, graded) -> None:
        super().__init__(graded)
        self.judgements: list[Judgement] = []

    def grade(self, answer, chunks):
        scores, judgement = super().grade(answer, chunks)
        self.judgements.append(judgement)
        return scores, judgement


@pytest.mark.parametrize(("retry", "passed", "stopped", "action"), [
    (51, True, "passed", "accept"), (50, True, "passed", "accept"), (49, False, "max_retries", "stop")])
def test_a_retry_passes_at_50_and_max_retries_stops(retry, passed, stopped, action):
    script = Recording([grades(90, retry, 90), grades(90, 90, 90)])
    first = AnswerAttempt(Answer("Cats purr.", [], "p", valid=True), nodes("a"), grades(90, 60, 90),
                          judged(grades(90, 60, 90)))
    result = AnswerRetry(AnswerCheckParams(retry=True)).run(QuestionContext(QUERY, QUERY), first,
                                                            AnswerActions(script.regenerate, script.re_retrieve),
                                                            script.grade)
    assert [call[0] for call in script.calls] == ["re_retrieve", "regenerate", "grade"]  # max_retries 1: one retry
    (retried,) = script.judgements
    decision = retried.decision
    assert (decision["attempt"], decision["threshold"], decision["gate_score"]) == (1, 50, retry)
    assert (decision["passed"], decision["action"], decision["stopped"]) == (passed, action, stopped)
    # The best attempt is kept, passed or not: 60 beats a retry of 49 to 51.
    assert decision["kept"] == 0 and result.answer.text == "Cats purr."
    assert [a["gate_score"] for a in result.attempts] == [60, retry]


def test_the_retry_judgement_records_threshold_50_and_the_end():
    script = Script([grades(90, 49, 90)])
    first = AnswerAttempt(Answer("Cats purr.", [], "p", valid=True), nodes("a"), grades(90, 60, 90),
                          judged(grades(90, 60, 90)))
    trace = JudgementLog()
    recorded: list[Judgement] = []

    def grade(answer, chunks):
        scores, judgement = script.grade(answer, chunks)
        recorded.append(judgement)
        return scores, judgement

    result = AnswerRetry(AnswerCheckParams(retry=True)).run(QuestionContext(QUERY, QUERY, log=trace), first,
                                                            AnswerActions(script.regenerate, script.re_retrieve), grade)
    retry = recorded[0].decision
    assert (retry["attempt"], retry["threshold"], retry["passed"], retry["issue"]) == (1, 50, False, "incomplete")
    assert (retry["action"], retry["stopped"], retry["kept"]) == ("stop", "max_retries", 0)
    assert result.answer.text == "Cats purr." and result.scores == grades(90, 60, 90)


def test_max_retries_2_uses_the_last_threshold_again_and_stops():
    result, calls, _ = run(grades(20, 90, 90), [grades(40, 90, 90), grades(45, 90, 90)], max_retries=2)
    assert [call[0] for call in calls] == ["regenerate", "grade", "regenerate", "grade"]
    assert [a["gate_score"] for a in result.attempts] == [20, 40, 45] and result.kept == 2


def test_off_topic_regenerates_from_the_same_chunks_listing_the_failed_answers_sentences():
    result, calls, first = run(grades(30, 90, 90), [grades(80, 90, 90)])
    assert calls == [("regenerate", ["a", "b"], ["Cats purr.", "They are cats."]), ("grade", "Answer 1 here.")]
    decision = first.judgement.decision
    assert (decision["issue"], decision["action"], decision["feedback"]) == (
        "off_topic", "regenerate", ["Cats purr.", "They are cats."])
    assert result.kept == 1 and result.answer.text == "Answer 1 here." and result.nodes[0].node.node_id == "a"


def test_incomplete_re_retrieves_with_the_reasons_new_words_and_answers_from_the_new_chunks():
    result, calls, first = run(grades(90, 40, 90), [grades(90, 70, 90)])
    assert calls == [("re_retrieve", "why do cats purr misses they"), ("regenerate", ["fresh"], []),
                     ("grade", "Answer 2 here.")]
    decision = first.judgement.decision
    assert decision["retry_query"] == "why do cats purr misses they" and decision["retrieved"] == ["fresh"]
    assert result.nodes[0].node.node_id == "fresh"


def test_an_issue_mapped_to_another_action_follows_the_map():
    _, calls, _ = run(grades(90, 40, 90), [grades(90, 90, 90)], issue_actions={"incomplete": "regenerate"})
    assert [call[0] for call in calls] == ["regenerate", "grade"]


def test_the_same_search_again_or_web_chunks_regenerate_instead():
    _, calls, first = run(grades(90, 40, 90), [grades(90, 90, 90)], reason="")
    assert [call[0] for call in calls] == ["regenerate", "grade"]
    assert first.judgement.decision["action_note"].startswith("the same search again")
    _, calls, first = run(grades(90, 40, 90), [grades(90, 90, 90)], re_retrieve=False)
    assert [call[0] for call in calls] == ["regenerate", "grade"]
    assert first.judgement.decision["action_note"] == "the chunks cannot be searched again"


def test_retry_strategy_next_switches_before_re_retrieving():
    switched: list[str] = []
    _, calls, first = run(grades(90, 40, 90), [grades(90, 90, 90)], reason="", retry_strategy="next",
                          switch=switched.append, strategy="dense")
    assert switched == ["bm25"] and calls[0] == ("re_retrieve", QUERY)
    assert (first.judgement.decision["strategy_before"], first.judgement.decision["strategy"]) == ("dense", "bm25")


def test_an_unusable_grade_stops_without_a_retry():
    result, calls, first = run(NOTHING, [])
    assert calls == [] and first.judgement.decision["stopped"] == "no score" and result.kept == 0


def test_an_abstained_retry_is_not_graded_and_the_first_answer_is_kept():
    abstained = Answer("not found", [], "", valid=True, abstained=True)
    result, calls, first = run(grades(30, 90, 90), [], answers=[abstained])
    assert [call[0] for call in calls] == ["regenerate"] and result.kept == 0
    assert first.judgement.decision["stopped"] == "no answer to grade"


@pytest.mark.parametrize(("scores", "kept"), [([60, 55], 0), ([60, 61], 1), ([None, 10], 1), ([40, 40], 0)])
def test_best_attempt(scores, kept):
    attempts = [AnswerAttempt(Answer("a", [], "p", valid=True), [], {}, None, gate_score=s) for s in scores]
    assert best_attempt(attempts) == kept


def test_params_are_bounded_and_at_default_leave_the_key_unchanged():
    params = AnswerCheckParams()
    assert params.key_dump() == {"mode": "llm", "prompt_version": 1, "context_chars": 1500, "answer_chars": 800,
                                 "max_tokens": 80}
    assert AnswerCheckParams(retry=False, pass_scores=[65, 50], max_retries=1, gate_score="min",
                             issue_actions={"incomplete": "re_retrieve"}, retry_strategy="same").key_dump() == \
        params.key_dump()
    assert (params.threshold(0), params.threshold(1), params.threshold(5)) == (65, 50, 50)
    for bad, match in (({"pass_scores": [65, 101]}, "out of range"), ({"max_retries": 4}, "max_retries"),
                       ({"issue_actions": {"vague": "regenerate"}}, "Valid issues: off_topic, incomplete, unsupported"),
                       ({"issue_actions": {"incomplete": "search"}}, "issue_actions"),
                       ({"pass_scores": []}, "pass_scores"), ({"retry_strategy": "sparse"}, "retry_strategy")):
        with pytest.raises(ValidationError, match=match):
            AnswerCheckParams(**bad)


@pytest.mark.integration
def test_real_local_model_late_tier_round_is_recorded(tmp_path, local_backend):
    """Mechanics on the embedded model: a first answer graded, then (pass or not) every step recorded."""
    client = LLMClient(local_backend, tmp_path)
    checker = AnswerCheckJudge(AnswerCheckParams(retry=True, pass_scores=[100, 100]), client)
    generator = Generator(GeneratorParams(constrained=False, max_tokens=40), client)
    chunks = [NodeWithScore(node=TextNode(id_="c1", text="Cats purr when they are content or hurt."), score=1.0)]
    trace = JudgementLog()

    def grade(answer, given):
        return checker.grade(QUERY, answer.text, [n.node.get_content() for n in given], trace)

    first_answer = Answer("Cats purr to hunt mice at night.", [], "p", valid=True)
    scores, judgement = grade(first_answer, chunks)
    result = AnswerRetry(checker.params).run(
        QuestionContext(QUERY, QUERY, log=trace), AnswerAttempt(first_answer, chunks, scores, judgement),
        AnswerActions(lambda given, feedback: generator.generate(QUERY, given, trace, feedback=feedback or None),
                      lambda query: chunks), grade)
    checks = [j for j in trace.judgements if j.judge == "answer_check"]
    first = checks[0].decision
    assert first["attempt"] == 0 and first["threshold"] == 100
    if first["gate_score"] is None:  # the small model's reply was unusable: recorded, no retry
        assert first["stopped"] == "no score" and not checks[0].valid
    elif first["passed"]:
        assert first["action"] == "accept"
    else:
        assert first["action"] in ("regenerate", "re_retrieve") and "generator" in [j.judge for j in trace.judgements]
        assert len(result.attempts) == 2 and checks[-1].decision["stopped"] in ("passed", "max_retries", "no score",
                                                                                 "no answer to grade")
    assert result.kept in range(len(result.attempts) or 1)
    assert json.dumps(first)  # the decision is stored as JSON in the judgements table


def test_a_reason_copied_from_the_prompts_example_adds_no_word_to_the_search():
    _, calls, first = run(grades(90, 40, 90), [grades(90, 90, 90)], reason="Explains blue, not red")
    assert [call[0] for call in calls] == ["regenerate", "grade"]
    assert first.judgement.decision["reason_ignored"] == "the reason is the prompt example's"

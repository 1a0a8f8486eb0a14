"""The late tier: the answer check as a second gate, retrying a failed answer by its issue.

After generation (and the groundedness check with its corrections), each answer is graded
(relevance, completeness, accuracy, 0-100) and its gate score (the lowest grade, or their mean:
``gate_score``) is compared with the attempt's threshold, ``pass_scores`` (65 for the first
answer, 50 for a retry: the design's adaptive thresholds). A pass ends the loop. A failure names
an issue, the aspect graded lowest (``ANSWER_ISSUES``: off_topic, incomplete, unsupported; ties
in that order), and ``issue_actions`` says what retries it:

- ``re_retrieve``: search again with the query plus the words of the grader's reason the query
  lacks (the reason says what is missing; a reason copied from the prompt's example is ignored),
  with ``retry_strategy`` (``same`` or a changed one), through the same context stages, then
  answer from the new chunks. When that search would be the same one (no new word, no strategy
  change), or the chunks cannot be searched again (web results), it regenerates instead; when it
  finds the same chunks, the answer is regenerated from them with the failed answer's sentences
  listed (as ``regenerate`` does);
- ``regenerate``: answer from the same chunks, the prompt listing the sentences of the failed
  answer as ones not to repeat unless a source states them (so the model writes a new answer;
  the same prompt would give the same answer).

The design's late tier (``pass_by: retrieval``, ``issue_set: design``, ``re_retrieve_via:
pipeline``, ``max_retries: 2``): the pass score is 65 after a good retrieval and 50 after a poor one
(the quality gate's quality against ``good_retrieval_at``); the grader names one of the design's
issues (``quality_gate_issues.DESIGN_ISSUES``; when it names none, the lowest grade stands for it:
``DESIGN_ASPECT_ISSUES``); every failed answer re-retrieves, switching to the strategy the design's
map gives its issue (``DESIGN_SWITCH_MAP``; the strategy in use for an issue without one), back
through query expansion and the quality gate (the pipeline's ``re_retrieve``), up to three attempts.

The loop stops at a pass, after ``max_retries`` retries, when a check gives no score (nothing to
act on) or when a retry gives no answer to grade (empty, or the abstain text). The best attempt is
kept: the highest gate score, the earliest on a tie (an attempt without a score ranks last), so a
retry must do strictly better to replace the first answer.

Every step is in the ``answer_check`` judgement of the attempt it acts on: ``attempt``,
``threshold``, ``gate_score``, ``passed``, ``issue``, ``action`` and what the action did
(``retry_query``, ``strategy``, ``retrieved``, ``feedback``); the last one adds ``stopped``,
``kept`` and every attempt's scores. The steps are callables the pipeline gives, each timed as its
own stage (``retry:re_retrieve``, ``retry:regenerate``, ``judge:answer_check``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.schema import NodeWithScore

from ragkit.stages.answer.answer_check import ASPECTS, EXAMPLE_REASON
from ragkit.stages.answer.generator import Answer
from ragkit.stages.answer.groundedness import split_claims
from ragkit.stages.answer.params import ANSWER_ISSUES, AnswerCheckParams
from ragkit.stages.answer.retry_strategy import retry_strategy
from ragkit.stages.base import Judgement
from ragkit.stages.question import AnswerActions, QuestionContext
from ragkit.stages.retrieval.quality_gate.issues import DESIGN_ISSUES, DESIGN_SWITCH_MAP
from ragkit.text import with_new_keywords

ACCEPT, REGENERATE, RE_RETRIEVE, STOP = "accept", "regenerate", "re_retrieve", "stop"

# The design issue a failed answer has when the grader names none: the aspect graded lowest.
DESIGN_ASPECT_ISSUES = {"relevance": "off_topic", "completeness": "partial_coverage", "accuracy": "missing_key_info"}

Scores = dict[str, float | None]
Grade = Callable[[Answer, list[NodeWithScore]], tuple[Scores, Judgement | None]]


@dataclass
class AnswerAttempt:
    answer: Answer
    nodes: list[NodeWithScore]
    scores: Scores
    judgement: Judgement | None
    gate_score: float | None = None
    retrieval_quality: float | None = None  # the quality gate's, of the retrieval this answer read


@dataclass
class RetryResult:
    answer: Answer
    nodes: list[NodeWithScore]
    scores: Scores
    kept: int
    attempts: list[dict[str, Any]] = field(default_factory=list)


def gate_score(scores: Scores, how: str) -> float | None:
    """The three grades (in [0, 1]) as one 0-100 gate score: their minimum or mean; None when any
    is missing (an unusable reply has none)."""
    values = [scores.get(aspect) for aspect in ASPECTS]
    if any(value is None for value in values):
        return None
    known = [float(value) for value in values if value is not None]
    return round(100 * (min(known) if how == "min" else sum(known) / len(known)), 6)


def answer_issue(scores: Scores, issue_set: str = "basic", named: object = None) -> str:
    """The issue of a failed answer: the aspect graded lowest (ties: relevance, completeness, accuracy);
    in the design set, the issue the grader named, else the lowest aspect's design issue."""
    lowest = min(ASPECTS, key=lambda aspect: scores.get(aspect) or 0.0)
    if issue_set == "design":
        return named if isinstance(named, str) and named in DESIGN_ISSUES else DESIGN_ASPECT_ISSUES[lowest]
    return ANSWER_ISSUES[lowest]


def _texts(nodes: Sequence[NodeWithScore]) -> list[str]:
    return [node.node.get_content() for node in nodes]


def best_attempt(attempts: Sequence[AnswerAttempt]) -> int:
    """The highest gate score, the earliest on a tie; an attempt without one ranks last."""
    return max(range(len(attempts)), key=lambda i: (attempts[i].gate_score is not None,
                                                    attempts[i].gate_score or 0.0, -i))


class AnswerRetry:
    def __init__(self, params: AnswerCheckParams) -> None:
        self.params = params

    def run(self, context: QuestionContext, first: AnswerAttempt, actions: AnswerActions, grade: Grade,
            retrieval_quality: Callable[[], float | None] | None = None) -> RetryResult:
        """Retry ``first`` (the answer, its grades and its retrieval's quality) for ``context.query``;
        ``actions.re_retrieve`` None when the chunks cannot be searched again; ``actions.switch`` /
        ``actions.strategy``: change / the strategy in use (``retry_strategy``, the design's map);
        ``retrieval_quality()``: the quality of the last re-retrieval (the quality gate's, when it
        ran again), for ``pass_by: retrieval``. Each decision is in the grade's judgement."""
        query, re_retrieve, switch = context.query, actions.re_retrieve, actions.switch
        p = self.params
        if first.judgement is None:  # the check is off: nothing was graded, nothing to act on
            return RetryResult(first.answer, first.nodes, first.scores, 0)
        attempts = [first]
        current = actions.strategy
        stopped = "passed"
        for number in range(p.max_retries + 1):
            latest = attempts[-1]
            latest.gate_score = gate_score(latest.scores, p.gate_score)
            assert latest.judgement is not None  # an attempt without one ends the loop below
            decision = latest.judgement.decision
            threshold = p.threshold(number, latest.retrieval_quality)
            decision.update(attempt=number, threshold=threshold, gate_score=latest.gate_score)
            if p.pass_by == "retrieval":
                decision["retrieval_quality"] = latest.retrieval_quality
            if latest.gate_score is None:
                stopped = "no score"
                decision.update(passed=None, action=STOP)
                break
            passed = latest.gate_score >= threshold
            decision.update(passed=passed, issue=None if passed else answer_issue(
                latest.scores, p.issue_set, decision.get("named_issue")))
            if passed:
                decision["action"] = ACCEPT
                break
            if number == p.max_retries:
                stopped = "max_retries"
                decision["action"] = STOP
                break
            design = p.issue_set == "design"
            action: str = RE_RETRIEVE if design else p.issue_actions[decision["issue"]]
            nodes = latest.nodes
            feedback: list[str] = []
            if action == RE_RETRIEVE:
                reason = str(decision.get("reason") or "")
                if " ".join(reason.lower().split()) == EXAMPLE_REASON:
                    # A small model copies the prompt's example: its words say nothing about this answer.
                    decision["reason_ignored"] = "the reason is the prompt example's"
                    reason = ""
                retry_query = with_new_keywords(query, [reason], min_length=3)
                if switch is None:
                    target = None
                elif design:
                    target = DESIGN_SWITCH_MAP.get(decision["issue"], current)
                else:
                    target = retry_strategy(p.retry_strategy, current)
                if re_retrieve is None or (retry_query == query and target in (None, current)):
                    decision["action_note"] = ("the chunks cannot be searched again" if re_retrieve is None
                                               else "the same search again: no new query word, no strategy change")
                    action = REGENERATE
                else:
                    if target is not None and target != current:
                        switch(target)  # type: ignore[misc]  # target is None without a switch
                        decision.update(strategy_before=current, strategy=target)
                        current = target
                    decision["retry_query"] = retry_query
                    nodes = re_retrieve(retry_query)
                    decision["retrieved"] = [node.node.node_id for node in nodes]
                    if _texts(nodes) == _texts(latest.nodes):
                        # The same prompt would give the same answer: list what not to repeat.
                        decision["action_note"] = "the search found the same chunks: regenerated instead"
                        action = REGENERATE
            if action == REGENERATE:
                feedback = split_claims(latest.answer.text, 1)
                decision["feedback"] = feedback
            decision["action"] = action if "retry_query" not in decision else RE_RETRIEVE
            answer = actions.regenerate(nodes, feedback)
            if not answer.text or answer.abstained:
                stopped = "no answer to grade"
                attempts.append(AnswerAttempt(answer, nodes, dict.fromkeys(ASPECTS), None))
                break
            scores, judgement = grade(answer, nodes)
            quality = latest.retrieval_quality
            if "retry_query" in decision:
                quality = retrieval_quality() if retrieval_quality is not None else None
            attempts.append(AnswerAttempt(answer, nodes, scores, judgement, retrieval_quality=quality))
        kept = best_attempt(attempts)
        summary = [{"gate_score": a.gate_score, **a.scores, "chunks": len(a.nodes)} for a in attempts]
        last = next(a.judgement for a in reversed(attempts) if a.judgement is not None)
        last.decision.update(stopped=stopped, kept=kept, attempts=summary)
        chosen = attempts[kept]
        return RetryResult(chosen.answer, chosen.nodes, chosen.scores, kept, summary)

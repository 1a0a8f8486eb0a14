"""Answer check: how relevant, complete and accurate the final answer is, scored by the LLM.

One call per answer shows the question, the answer and the final context (cut to a budget) and
asks for three integers 0-100: relevance (does it address the question), completeness (does it
answer every part) and accuracy (is what it states backed by the context). They become the
score rows ``answer_relevance``, ``answer_completeness`` and ``answer_accuracy`` in [0, 1]. A
reply that cannot be parsed, or scores out of range, gives no numbers: the rows carry the
reason, and the judgement is recorded invalid.

The late tier (``retry: true``, off by default: then the check only scores, as always) makes the
check a second gate: the answer passes when its gate score (the lowest of the three grades, or
their mean, 0-100) reaches the attempt's threshold (``pass_scores``: 65, then 50 on a retry, the
design's adaptive thresholds); a failed answer gets an issue type (``ANSWER_ISSUES``: the aspect
graded lowest) and is retried by the action ``issue_actions`` maps it to (re-retrieve or
regenerate), at most ``max_retries`` times. The loop is ``ragkit.stages.answer.answer_retry``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from ragkit.errors import LLMError
from ragkit.stages.answer.params import (
    AnswerCheckJudgeInfo,
    AnswerCheckParams,
)
from ragkit.stages.base import Judgement, JudgementLog, Stage
from ragkit.stages.prompts import joined_context
from ragkit.stages.retrieval.quality_gate.issues import DESIGN_ISSUES, normal_issue

ASPECTS = ("relevance", "completeness", "accuracy")
ANSWER_CHECK_METRICS = tuple(f"answer_{aspect}" for aspect in ASPECTS)


class AnswerCheckReply(BaseModel):
    relevance: int = Field(ge=0, le=100, description="0-100: the answer addresses the question.")
    completeness: int = Field(ge=0, le=100, description="0-100: the answer covers every part of the question.")
    accuracy: int = Field(ge=0, le=100, description="0-100: what the answer states is backed by the context.")
    reason: str = ""


class DesignAnswerCheckReply(AnswerCheckReply):
    """The grades and, for the late tier's design issue set, what is wrong (a closed set, so a
    schema-constrained backend can name only one of the design's issues)."""

    issue: Literal["none", "off_topic", "missing_key_info", "wrong_domain", "partial_coverage", "too_broad",
                   "too_narrow", "no_coverage"] = Field(default="none", description="none, or what is wrong.")

    @field_validator("issue", mode="before")
    @classmethod
    def _normal(cls, value: Any) -> Any:
        return normal_issue(value)


SYSTEM = "You grade an answer to a question. Reply with one JSON object only."

EXAMPLE_REASON = "explains blue, not red"
EXAMPLE = (
    "Example:\n"
    "Context: Air scatters blue light more than red light.\n"
    "Question: Why is the sky blue, and when is it red?\n"
    "Answer: Air scatters blue light more than red.\n"
    '{"relevance": 90, "completeness": 50, "accuracy": 95, "reason": "' + EXAMPLE_REASON + '"}'
)


def build_prompt(question: str, answer: str, context: str, design_issues: bool = False) -> str:
    """``design_issues``: also ask which of the design's issues the answer has, each with its meaning."""
    if not design_issues:
        return (
            f"{EXAMPLE}\n\nContext: {context or '(none)'}\nQuestion: {question}\nAnswer: {answer}\n"
            "Grade relevance, completeness and accuracy from 0 to 100. "
            "Reply as JSON with relevance, completeness, accuracy and reason."
        )
    issues = "\n".join(f"- {name}: the context is {issue.meaning}" for name, issue in DESIGN_ISSUES.items())
    example = EXAMPLE[: -1] + ', "issue": "partial_coverage"}'
    return (
        f"{example}\n\nContext: {context or '(none)'}\nQuestion: {question}\nAnswer: {answer}\n"
        "Grade relevance, completeness and accuracy from 0 to 100. Issue: none, or the one that fits best:\n"
        f"{issues}\nReply as JSON with relevance, completeness, accuracy, reason and issue."
    )


def answer_check_scores(check: dict[str, float | None]) -> dict[str, float | None]:
    """A check's result under its score-row names (``ANSWER_CHECK_METRICS``)."""
    return {f"answer_{aspect}": check.get(aspect) for aspect in ASPECTS}


class AnswerCheckJudge(AnswerCheckJudgeInfo, Stage):
    params: AnswerCheckParams

    def __init__(self, params: AnswerCheckParams, llm: Any = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)

    def check(self, question: str, answer: str, contexts: Sequence[str],
              trace: JudgementLog) -> dict[str, float | None]:
        """``{relevance, completeness, accuracy}`` in [0, 1], each None when the reply is unusable; the
        reason is then the recorded judgement's ``error`` (and its decision's ``reason``)."""
        return self.grade(question, answer, contexts, trace)[0]

    def grade(self, question: str, answer: str, contexts: Sequence[str],
              trace: JudgementLog) -> tuple[dict[str, float | None], Judgement | None]:
        """``check``'s scores and the judgement it recorded (None when off: nothing is recorded)."""
        nothing: dict[str, float | None] = dict.fromkeys(ASPECTS)
        if not self.enabled:
            return nothing, None
        started = time.perf_counter()
        shown = " ".join(answer.split())[: self.params.answer_chars]
        design = self.params.retry and self.params.issue_set == "design"
        prompt = build_prompt(question, shown, joined_context(contexts, self.params.context_chars), design)
        summary = f"{question} | {len(contexts)} chunks"
        schema = DesignAnswerCheckReply if design else AnswerCheckReply
        try:
            result = self.ask(prompt, schema, system=SYSTEM, max_tokens=self.params.max_tokens)
        except LLMError as error:
            return nothing, trace.add(self.fallback(summary, {**nothing, "reason": str(error)}, None, started,
                                                    str(error)))
        if result.parsed is None:
            reason = result.parse_error or "unusable reply"
            return nothing, trace.add(self.fallback(summary, {**nothing, "reason": reason}, result, started, reason))
        reply = result.parsed
        scores: dict[str, float | None] = {aspect: getattr(reply, aspect) / 100 for aspect in ASPECTS}
        named = {"named_issue": reply.issue} if isinstance(reply, DesignAnswerCheckReply) else {}
        return scores, trace.add(self.judgement(summary, {**scores, "reason": reply.reason, **named}, result,
                                                started=started))

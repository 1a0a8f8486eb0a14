"""Answer check: how relevant, complete and accurate the final answer is, scored by the LLM.

One call per answer shows the question, the answer and the final context (cut to a budget) and
asks for three integers 0-100: relevance (does it address the question), completeness (does it
answer every part) and accuracy (is what it states backed by the context). They become the
score rows ``answer_relevance``, ``answer_completeness`` and ``answer_accuracy`` in [0, 1]. A
reply that cannot be parsed, or scores out of range, gives no numbers: the rows carry the
reason, and the judgement is recorded invalid.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from ragkit.errors import LLMError
from ragkit.stages.base import Judge, JudgeParams, JudgeTrace
from ragkit.stages.prompts import joined_context

ASPECTS = ("relevance", "completeness", "accuracy")
ANSWER_CHECK_METRICS = tuple(f"answer_{aspect}" for aspect in ASPECTS)


class AnswerCheckParams(JudgeParams):
    context_chars: int = Field(default=1500, ge=100, le=100_000, description="Characters of context shown.")
    answer_chars: int = Field(default=800, ge=50, le=20_000, description="Characters of the answer shown.")
    max_tokens: int = Field(default=80, ge=16, le=2048, description="Most tokens in one reply.")


class AnswerCheckReply(BaseModel):
    relevance: int = Field(ge=0, le=100, description="0-100: the answer addresses the question.")
    completeness: int = Field(ge=0, le=100, description="0-100: the answer covers every part of the question.")
    accuracy: int = Field(ge=0, le=100, description="0-100: what the answer states is backed by the context.")
    reason: str = ""


SYSTEM = "You grade an answer to a question. Reply with one JSON object only."

EXAMPLE = (
    "Example:\n"
    "Context: Air scatters blue light more than red light.\n"
    "Question: Why is the sky blue, and when is it red?\n"
    "Answer: Air scatters blue light more than red.\n"
    '{"relevance": 90, "completeness": 50, "accuracy": 95, "reason": "explains blue, not red"}'
)


def build_prompt(question: str, answer: str, context: str) -> str:
    return (
        f"{EXAMPLE}\n\nContext: {context or '(none)'}\nQuestion: {question}\nAnswer: {answer}\n"
        "Grade relevance, completeness and accuracy from 0 to 100. "
        "Reply as JSON with relevance, completeness, accuracy and reason."
    )


def answer_check_scores(check: dict[str, float | None]) -> dict[str, float | None]:
    """A check's result under its score-row names (``ANSWER_CHECK_METRICS``)."""
    return {f"answer_{aspect}": check.get(aspect) for aspect in ASPECTS}


class AnswerCheckJudge(Judge):
    name: ClassVar[str] = "answer_check"
    role: ClassVar[str] = "check"
    inputs: ClassVar[tuple[str, ...]] = ("question", "answer", "nodes")
    outputs: ClassVar[tuple[str, ...]] = ("answer_check",)
    Params: ClassVar[type[AnswerCheckParams]] = AnswerCheckParams
    params: AnswerCheckParams
    modes: ClassVar[tuple[str, ...]] = ("off", "llm")

    def __init__(self, params: AnswerCheckParams, llm: Any = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)

    def check(self, question: str, answer: str, contexts: Sequence[str],
              trace: JudgeTrace) -> dict[str, float | None]:
        """``{relevance, completeness, accuracy}`` in [0, 1], each None when the reply is unusable; the
        reason is then the recorded judgement's ``error`` (and its decision's ``reason``)."""
        nothing: dict[str, float | None] = dict.fromkeys(ASPECTS)
        if not self.enabled:
            return nothing
        started = time.perf_counter()
        shown = " ".join(answer.split())[: self.params.answer_chars]
        prompt = build_prompt(question, shown, joined_context(contexts, self.params.context_chars))
        summary = f"{question} | {len(contexts)} chunks"
        try:
            result = self.ask(prompt, AnswerCheckReply, system=SYSTEM, max_tokens=self.params.max_tokens)
        except LLMError as error:
            trace.add(self.fallback(summary, {**nothing, "reason": str(error)}, None, started, str(error)))
            return nothing
        if result.parsed is None:
            reason = result.parse_error or "unusable reply"
            trace.add(self.fallback(summary, {**nothing, "reason": reason}, result, started, reason))
            return nothing
        reply = result.parsed
        scores: dict[str, float | None] = {aspect: getattr(reply, aspect) / 100 for aspect in ASPECTS}
        trace.add(self.judgement(summary, {**scores, "reason": reply.reason}, result, started=started))
        return scores

"""From a model's reply to a kept question, or to a drop with its reason.

Every check that can reject a question lives here, each with its own reason code, so the set's
record says why each planned question is missing: ``invalid_reply`` (no JSON of the asked shape),
``empty_question``, ``not_a_question`` (no question mark), ``wrong_language``,
``answer_not_found`` (the reply's answer is not in its passage), ``answer_in_question`` and
``high_overlap`` (a paraphrase that copies its passage). Duplicates are removed afterwards, over
the whole set (``ragkit.qa.dedup``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ragkit.qa.generation.sampling import Slot
from ragkit.qa.language import guess_language
from ragkit.qa.spans import find_answer
from ragkit.qa.wording import word_overlap

# "Here is a question:", "Sure! Question 1:", "**Q:**", "1.", "2)", "- " ... at the start.
_PREAMBLE = re.compile(
    r"^\s*(?:(?:sure|okay|ok|certainly)[!.,]?\s*)?(?:here(?:'s| is| are)\b[^:\n]*:\s*)?"
    r"(?:\**\s*(?:question|q)\s*\d*\s*[:.)]\s*\**\s*)?(?:(?:\d+|[a-z])[.)]\s+|[-*•]\s+)?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Answer:
    doc_id: str
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Verdict:
    """A kept question (``reason`` None) or a dropped one with its reason and detail."""

    question: str
    answers: tuple[Answer, ...] = ()
    overlap: float = 0.0
    language: str | None = None
    reason: str | None = None
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def clean_question(text: str) -> str:
    """The question without preamble, numbering, markdown and quotes; of several lines, the first
    that ends with a question mark (else the first)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    cleaned = [_PREAMBLE.sub("", line, count=1).strip().strip("*\"'“”«» ").strip() for line in lines]
    cleaned = [line for line in cleaned if line]
    asked = [line for line in cleaned if line.endswith("?")]
    return (asked or cleaned or [""])[0]


def judge_reply(slot: Slot, reply: BaseModel | None, parse_error: str | None, texts: dict[str, str],
                language: str | None, max_paraphrase_overlap: float) -> Verdict:
    if reply is None:
        return Verdict(question="", reason="invalid_reply", detail=parse_error or "no reply")
    question = clean_question(str(getattr(reply, "question", "")))
    if not question:
        return Verdict(question="", reason="empty_question", detail="the reply's question is blank")
    if not question.endswith("?"):
        return Verdict(question=question, reason="not_a_question", detail="the reply does not end with '?'")
    asked_language = guess_language(question, min_hits=1)
    if language is not None and asked_language is not None and asked_language != language:
        return Verdict(question=question, language=asked_language, reason="wrong_language",
                       detail=f"the passage is in '{language}', the question reads as '{asked_language}'")
    passage_text = " ".join(texts[p.doc_id][p.start:p.end] for p in slot.passages)
    overlap = word_overlap(question, passage_text)
    common: dict[str, Any] = {"question": question, "overlap": overlap, "language": language}
    answers = []
    if slot.type != "unanswerable":
        given = [getattr(reply, "answer_1", ""), getattr(reply, "answer_2", "")] if slot.type == "multi_hop" \
            else [getattr(reply, "answer", "")]
        for passage, chosen, text in zip(slot.passages, slot.answers, given):
            located = locate(texts[passage.doc_id], passage.start, passage.end, str(text or ""), chosen)
            if located is None:
                return Verdict(**common, reason="answer_not_found",
                               detail=f"the reply's answer {text!r} is not in the passage of '{passage.doc_id}'")
            answer = Answer(passage.doc_id, located[0], located[1], texts[passage.doc_id][located[0]:located[1]])
            if answer.text.casefold() in question.casefold():
                return Verdict(**common, reason="answer_in_question",
                               detail=f"the question contains its answer {answer.text!r}")
            answers.append(answer)
    if slot.type == "paraphrase" and overlap > max_paraphrase_overlap:
        return Verdict(**common, reason="high_overlap",
                       detail=f"word overlap with the passage {overlap:.2f} > {max_paraphrase_overlap:.2f}")
    return Verdict(**common, answers=tuple(answers))


def locate(text: str, start: int, end: int, answer: str, chosen: tuple[int, int]) -> tuple[int, int] | None:
    """Document offsets of the reply's answer inside the passage [start, end): exact, then
    ignoring case. An empty answer keeps the span the prompt gave; an answer found nowhere in the
    passage is None (the question is dropped, never matched loosely)."""
    if not answer.strip():
        return chosen
    # The occurrence at the chosen span wins: the same words may occur earlier in the passage.
    if text[chosen[0]:chosen[1]].casefold() == answer.strip().casefold():
        return chosen
    found = find_answer(text[start:end], answer)
    return (start + found[0], start + found[1]) if found else None

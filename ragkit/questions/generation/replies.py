"""From a model's reply to a kept question, or to a drop with its reason.

Every check that can reject a question lives here, each with its own reason code, so the set's
record says why each planned question is missing: ``invalid_reply`` (no JSON of the asked shape),
``empty_question``, ``not_a_question`` (no question mark), ``wrong_language``,
``about_the_text`` (it asks about the passage, the question or the answer rather than what the
passage says: "What is the answer to this question?"), ``prompt_echo`` (four words in a row of
the prompt's own instructions that are not the passage's), ``no_content_word`` (no content word of
its passage), ``answer_not_found`` (the reply's answer is not in its passage),
``answer_in_question``, ``high_overlap`` (a paraphrase that copies its passage) and
``answer_in_passage`` (an "unanswerable" question asking for a number, date or name its passage
holds: such a label cannot be trusted, so the question is dropped; a reviewer may give it its
answer). Duplicates and templates are removed afterwards, over the whole set (``generate``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ragkit.questions.generation.answer_types import asked_type, typed_spans
from ragkit.questions.generation.prompts import SYSTEM, TEMPLATES
from ragkit.questions.generation.sampling import Slot
from ragkit.questions.language import guess_language
from ragkit.questions.spans import find_answer
from ragkit.questions.wording import word_overlap
from ragkit.text import multilingual_content_words, words

# "Here is a question:", "Sure! Question 1:", "**Q:**", "1.", "2)", "- " ... at the start.
_PREAMBLE = re.compile(
    r"^\s*(?:(?:sure|okay|ok|certainly)[!.,]?\s*)?(?:here(?:'s| is| are)\b[^:\n]*:\s*)?"
    r"(?:\**\s*(?:question|q)\s*\d*\s*[:.)]\s*\**\s*)?(?:(?:\d+|[a-z])[.)]\s+|[-*•]\s+)?",
    re.IGNORECASE,
)

# A question about the text as an object, not about its content. SmolLM2-135M wrote "What is the
# answer to this question?" for 56 of 100 passages, and "What is the passage asking about?".
_ABOUT_THE_TEXT = re.compile(
    r"\b(?:the|this|that|these|those|above|given|following|each)\s+(?:passages?|texts?|paragraphs?|excerpts?|"
    r"questions?|answers?|prompts?|instructions?|sentences?|json)\b",
    re.IGNORECASE,
)
_ECHO_WORDS = 4  # a run of this many words of the instructions, absent from the passage, is an echo


def _ngrams(tokens: list[str], size: int = _ECHO_WORDS) -> set[tuple[str, ...]]:
    return {tuple(tokens[i:i + size]) for i in range(len(tokens) - size + 1)}


_PROMPT_NGRAMS = _ngrams(words(re.sub(r"\{\w+\}", " | ", " | ".join([SYSTEM, *TEMPLATES.values()]))))


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
    junk = junk_reason(question, passage_text)
    if junk is not None:
        return Verdict(**common, reason=junk[0], detail=junk[1])
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
    if slot.type == "unanswerable":
        held = answer_held(question, passage_text)
        if held is not None:
            return Verdict(**common, reason="answer_in_passage",
                           detail=f"labelled unanswerable, but it asks for a {held[0]} and its passage holds "
                                  f"{held[1]!r}")
    return Verdict(**common, answers=tuple(answers))


def junk_reason(question: str, passage: str) -> tuple[str, str] | None:
    """(reason, detail) when the question is about the text rather than its content, echoes the
    prompt's instructions, or shares no content word with its passage; else None."""
    about = _ABOUT_THE_TEXT.search(question)
    if about:
        return "about_the_text", f"asks about {about.group(0)!r}, not about what the passage says"
    echoed = sorted(_ngrams(words(question)) & _PROMPT_NGRAMS - _ngrams(words(passage)))
    if echoed:
        return "prompt_echo", f"repeats the prompt's instructions ({' '.join(echoed[0])!r})"
    if not set(multilingual_content_words(question)) & set(multilingual_content_words(passage)):
        return "no_content_word", "shares no content word with its passage"
    return None


def answer_held(question: str, passage: str) -> tuple[str, str] | None:
    """(type, phrase) when the question asks for a number, date or name and the passage holds one."""
    kind = asked_type(question)
    if kind is None:
        return None
    spans = typed_spans(passage, kind)
    return (kind, passage[spans[0][0]:spans[0][1]]) if spans else None


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

"""Answer spans against a corpus: find them from answer texts, and check them.

Alternatives are any-of: every answer text of a part, and every place one is found, is a span of
that part's group. Parts are all-of: a question with ``answer_parts`` is resolved part by part.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ragkit.questions.model import AnswerSpan, Question, QuestionSet
from ragkit.text import FUNCTION_WORDS, words

if TYPE_CHECKING:
    from llama_index.core.schema import Document

    from ragkit.corpus.model import DocumentRecord

logger = logging.getLogger(__name__)

# How many question ids a warning names before it only counts.
_IDS_SHOWN = 10
# The shortest answer text looked for as a span (stripped): a single character is found anywhere.
MIN_ANSWER_CHARS = 2
REFUSED_REASON = f"shorter than {MIN_ANSWER_CHARS} characters or only function words"
# Scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, kana, CJK ideographs.
_NO_SPACE = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def resolve_answer_spans(question_set: QuestionSet,
                         documents_by_id: Mapping[str, Document | DocumentRecord]) -> QuestionSet:
    """Add spans to questions that have answers and relevant docs but no spans.

    Each answer text of a part is looked up in each relevant document, exact text first, then
    ignoring case; its first occurrence there becomes a span of that part's group (part i is
    group i; a question without ``answer_parts`` has one part, group 0, made of all its answers).
    Identical spans are kept once; an answer is looked for as ``find_answer`` looks (whole words;
    not an answer of one character or function words only, whose count is logged). Questions
    whose answer is found nowhere keep no span: their number is logged as a warning, and
    ``QuestionSet.ids_without_spans()`` lists them. A multi-part question with only some parts
    found keeps those spans; the others stay empty groups in ``Question.span_groups()`` and the
    warning names the question.
    """
    resolved = []
    unresolved = []
    partly_resolved = []
    for question in question_set.questions:
        if question.spans or not question.answers or not question.relevant_docs:
            resolved.append(question)
            continue
        parts = question.answer_parts or [question.answers]
        spans = [
            span
            for group, alternatives in enumerate(parts)
            for span in _part_spans(alternatives, group, question, documents_by_id)
        ]
        if not spans:
            unresolved.append(question.id)
        elif len({span.group for span in spans}) < len(parts):
            partly_resolved.append(question.id)
        resolved.append(question.model_copy(update={"spans": spans}))
    result = question_set.model_copy(update={"questions": resolved})
    refused = answers_refused_as_spans(result)
    if unresolved:
        logger.warning("%s: no answer span found for %d questions", question_set.name, len(unresolved))
    if refused:
        logger.warning("%s: %d answers not looked for as spans: %s", question_set.name, refused, REFUSED_REASON)
    if partly_resolved:
        more = len(partly_resolved) - _IDS_SHOWN
        logger.warning(
            "%s: some answer parts not found (they can never be covered) for %d questions: %s%s",
            question_set.name,
            len(partly_resolved),
            ", ".join(partly_resolved[:_IDS_SHOWN]),
            f" and {more} more" if more > 0 else "",
        )
    return result


def _part_spans(
    alternatives: list[str], group: int, question: Question, documents_by_id: Mapping[str, Document | DocumentRecord]
) -> list[AnswerSpan]:
    spans = []
    for doc_id in question.relevant_docs:
        document = documents_by_id.get(doc_id)
        if document is None:
            continue
        for answer in alternatives:
            found = find_answer(document.text, answer)
            if found is not None:
                spans.append(AnswerSpan(doc_id=doc_id, start=found[0], end=found[1], group=group))
    return list(dict.fromkeys(spans))


def locatable_answer(answer: str) -> bool:
    """Whether an answer text says enough to be looked for as a span: at least
    ``MIN_ANSWER_CHARS`` characters once stripped, and a word that is not a function word
    (``ragkit.text.FUNCTION_WORDS``). "a", "5", "the" or "of the" occur in almost any text, so
    their first occurrence says nothing about where the answer is."""
    stripped = answer.strip()
    return len(stripped) >= MIN_ANSWER_CHARS and any(word not in FUNCTION_WORDS for word in words(stripped))


def find_answer(text: str, answer: str) -> tuple[int, int] | None:
    """(start, end) of the first whole-word occurrence of answer in text: exact, then ignoring
    case; None for an answer ``locatable_answer`` refuses.

    Whole word: an answer that begins (ends) with a letter, digit or underscore does not match
    where the text has one just before (after) it, so "cat" is not found in "concatenate".
    Letters of scripts written without spaces between words (Chinese, Japanese, Thai, Lao, Khmer,
    Myanmar) join nothing: there every character boundary is a word boundary."""
    if not locatable_answer(answer):
        return None
    candidates = [candidate for candidate in dict.fromkeys((answer, answer.strip())) if candidate]
    for candidate in candidates:
        start = text.find(candidate)
        while start >= 0:
            if _whole_word_at(text, start, start + len(candidate)):
                return start, start + len(candidate)
            start = text.find(candidate, start + 1)
    for candidate in candidates:
        for match in re.finditer(re.escape(candidate), text, re.IGNORECASE):
            if _whole_word_at(text, *match.span()):
                return match.span()
    return None


def _whole_word_at(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] joins no word character on either side (see ``find_answer``)."""
    joins_before = start > 0 and _joining(text[start - 1]) and _joining(text[start])
    joins_after = end < len(text) and _joining(text[end - 1]) and _joining(text[end])
    return not (joins_before or joins_after)


def _joining(character: str) -> bool:
    """A letter, digit or underscore of a script written with spaces between words."""
    return (character.isalnum() or character == "_") and not _NO_SPACE.match(character)


def answers_refused_as_spans(question_set: QuestionSet) -> int:
    """Answer parts of answerable questions that have no span because none of their texts may be
    looked for (``locatable_answer``): one-character and function-word-only answers."""
    refused = 0
    for question in question_set.questions:
        if not question.answerable or not question.answers:
            continue
        groups = question.span_groups()
        for group, alternatives in enumerate(question.answer_parts or [question.answers]):
            if not (group < len(groups) and groups[group]) and not any(map(locatable_answer, alternatives)):
                refused += 1
    return refused


def validate_against_corpus(question_set: QuestionSet,
                            documents_by_id: Mapping[str, Document | DocumentRecord]) -> list[str]:
    """Human-readable problems: unknown doc ids, spans outside their document, and spans that do
    not read as any alternative of their part (ignoring case and surrounding whitespace); without
    ``answer_parts`` every answer of the question is an alternative."""
    problems = []
    for question in question_set.questions:
        for doc_id in question.relevant_docs:
            if doc_id not in documents_by_id:
                problems.append(f"question {question.id}: relevant document '{doc_id}' is not in the corpus")
        for doc_id in question.documents:
            if doc_id not in documents_by_id:
                problems.append(f"question {question.id}: its document '{doc_id}' is not in the corpus")
        for span in question.spans:
            document = documents_by_id.get(span.doc_id)
            if document is None:
                continue  # reported above: a span's document is always among relevant_docs
            if span.end > len(document.text):
                problems.append(
                    f"question {question.id}: span [{span.start}, {span.end}) is outside document "
                    f"'{span.doc_id}' ({len(document.text)} chars)"
                )
                continue
            alternatives = question.answer_parts[span.group] if question.answer_parts else question.answers
            found = document.text[span.start : span.end]
            if alternatives and found.strip().casefold() not in {text.strip().casefold() for text in alternatives}:
                part = f" of part {span.group}," if question.answer_parts else ""
                problems.append(
                    f"question {question.id}: span [{span.start}, {span.end}) in '{span.doc_id}' reads "
                    f"{_shorten(found)!r}, not the answer{part} {_shorten(alternatives[0])!r}"
                )
    return problems


def _shorten(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."

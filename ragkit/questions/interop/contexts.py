"""Spans through formats that hold contexts, not offsets (ragas, LlamaIndex).

Export: a question's relevant passages are its reference contexts, as they are; without them each
answer span becomes one, the span's sentence and the next one, cut so that the answer's first
occurrence in it is the span itself. Import: each context is located in the corpus as text
(``ragkit.questions.passages``: in the document its id names first), becoming a relevant passage and
making its document relevant; the reference answer, where it reads inside a located passage, is a
span there. A question without spans or passages exports its relevant documents' texts as
contexts and imports them back as relevant documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragkit.questions.model import Question
from ragkit.questions.passages import MIN_SHARE, ContextMatch, PassageLocator
from ragkit.questions.rows import parse_row
from ragkit.questions.spans import find_answer
from ragkit.questions.wording import passage_around

PART_SEPARATOR = "\n"  # a multi-part reference: one part per line, in part order


@dataclass(frozen=True)
class Context:
    doc_id: str
    text: str


def question_contexts(question: Question, texts: Mapping[str, str]) -> list[Context]:
    """The relevant passages' texts; else one context per answer part (its first span); else each
    relevant document's text."""
    passages = [Context(p.doc_id, texts[p.doc_id][p.start:p.end]) for p in question.passages if p.doc_id in texts]
    if passages:
        return passages
    contexts = []
    for group in question.span_groups():
        if not group or group[0].doc_id not in texts:
            continue
        span = group[0]
        text = texts[span.doc_id]
        begin = _context_start(text, span.start, span.end)
        end = passage_around(text, span.start, span.end, 1)[1]
        # Longer to the right until the context occurs first where it is taken from, so the
        # importer finds it there (more text on the right adds no earlier answer occurrence).
        while text.find(text[begin:end]) < begin and end < len(text):
            end = max(end + 1, passage_around(text, end, min(end + 1, len(text)), 1)[1])
        contexts.append(Context(span.doc_id, text[begin:end]))
    if contexts or question.spans:
        return contexts
    return [Context(doc_id, texts[doc_id]) for doc_id in question.relevant_docs if doc_id in texts]


def _context_start(text: str, start: int, end: int) -> int:
    """The span's sentence start, moved past earlier occurrences of the answer inside it."""
    begin = min(start, passage_around(text, start, end, 0)[0])  # a span may start with a space
    answer = text[start:end]
    found = text.find(answer, begin)
    while 0 <= found < start:
        begin = found + 1
        found = text.find(answer, begin)
    return begin


def reference_text(question: Question) -> str:
    parts = question.answer_parts or ([question.answers[:1]] if question.answers else [])
    return PART_SEPARATOR.join(part[0] for part in parts if part)


@dataclass(frozen=True)
class Sample:
    """One question as another tool wrote it: where it was read, its text, its reference answer,
    its reference contexts and the documents they name (``reference_context_ids``), if any."""

    where: str
    id: str
    text: str
    reference: str
    contexts: list[str]
    context_ids: list[str] | None = None


def imported_questions(samples: Sequence[Sample], texts: Mapping[str, str],
                       min_share: float = MIN_SHARE) -> tuple[list[Question | None], list[list[ContextMatch]]]:
    """The questions rebuilt from the samples, and each one's context outcomes: every context is
    located in the corpus as text (``ragkit.questions.passages``), all samples' contexts at once. A
    sample with contexts, none located, and no reference answer has no ground truth to keep: its
    question is None (left out; the import report counts it)."""
    locator = PassageLocator(texts, min_share)
    flat = [(context, sample.context_ids[index] if sample.context_ids else None)
            for sample in samples for index, context in enumerate(sample.contexts)]
    outcomes = iter(locator.locate_all(flat))
    questions: list[Question | None] = []
    matches: list[list[ContextMatch]] = []
    for sample in samples:
        found = [next(outcomes) for _ in sample.contexts]
        nothing = found and not sample.reference.strip() and all(match.passage is None for match in found)
        questions.append(None if nothing else parse_row(Question, question_fields(sample, found, texts), sample.where))
        matches.append(found)
    return questions, matches


def question_fields(sample: Sample, found: Sequence[ContextMatch], texts: Mapping[str, str]) -> dict[str, object]:
    """A ragkit Question's fields: each located context a relevant passage (its document
    relevant), and the reference answer a span where it reads inside a located passage."""
    fields: dict[str, object] = {"id": sample.id, "text": sample.text}
    located = [match.passage for match in found]
    passages = list(dict.fromkeys((p.doc_id, p.start, p.end) for p in located if p is not None))
    relevant = dict.fromkeys((doc_id for doc_id, _, _ in passages), 1.0)
    if passages:
        fields["passages"] = [{"doc_id": doc_id, "start": start, "end": end} for doc_id, start, end in passages]
    reference = sample.reference
    if not reference.strip():
        return {**fields, "relevant_docs": relevant} if relevant else {**fields, "answerable": False}
    pieces = reference.split(PART_SEPARATOR)
    parts = pieces if len(pieces) > 1 and len(pieces) == len(sample.contexts) else [reference]
    spans = []
    for group, part in enumerate(parts):
        places = [passage for passage in located if passage is not None]
        if len(parts) > 1:
            own = located[group]
            places = [own] if own is not None else []
        for passage in places:
            inside = find_answer(texts[passage.doc_id][passage.start:passage.end], part)
            if inside is not None:
                spans.append({"doc_id": passage.doc_id, "start": passage.start + inside[0],
                              "end": passage.start + inside[1], "group": group})
                break
    fields.update(relevant_docs=relevant, spans=spans)
    if len(parts) > 1:
        fields["answer_parts"] = [[part] for part in parts]
    else:
        fields["answers"] = [reference]
    return fields

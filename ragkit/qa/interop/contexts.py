"""Spans through formats that hold contexts, not offsets (ragas, LlamaIndex).

Export: each answer span becomes a reference context, the span's sentence and the next one, cut
so that the answer's first occurrence in it is the span itself. Import: each context is found in
the corpus (in the document its id names, else in any document), and the answer is found in its
context, so the span is where it was. A question without spans exports its relevant documents'
texts as contexts and imports them back as relevant documents.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ragkit.qa.model import Question
from ragkit.qa.spans import find_answer
from ragkit.qa.wording import passage_around

PART_SEPARATOR = "\n"  # a multi-part reference: one part per line, in part order


@dataclass(frozen=True)
class Context:
    doc_id: str
    text: str


def question_contexts(question: Question, texts: Mapping[str, str]) -> list[Context]:
    """One context per answer part (its first span), else each relevant document's text."""
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


def locate_context(context: str, texts: Mapping[str, str], doc_id: str | None) -> tuple[str, int] | None:
    """(doc id, offset) of the context: in the named document first, then in any document."""
    candidates = [doc_id] if doc_id is not None and doc_id in texts else []
    candidates += [other for other in texts if other != doc_id]
    for candidate in candidates:
        offset = texts[candidate].find(context)
        if offset >= 0:
            return candidate, offset
    return None


def question_fields(question_id: str, text: str, reference: str, contexts: list[str],
                    context_ids: list[str] | None, texts: Mapping[str, str]) -> dict[str, object]:
    """The fields of a ragkit Question rebuilt from a question, its reference and its contexts."""
    fields: dict[str, object] = {"id": question_id, "text": text}
    named: list[str | None] = list(context_ids) if context_ids else [None] * len(contexts)
    located = [locate_context(context, texts, named[index]) for index, context in enumerate(contexts)]
    relevant = dict.fromkeys((found[0] for found in located if found), 1.0)
    if not reference.strip():
        return {**fields, "relevant_docs": relevant} if relevant else {**fields, "answerable": False}
    pieces = reference.split(PART_SEPARATOR)
    parts = pieces if len(pieces) > 1 and len(pieces) == len(contexts) else [reference]
    spans = []
    for group, part in enumerate(parts):
        places = [(found, context) for found, context in zip(located, contexts) if found is not None]
        if len(parts) > 1:
            own = located[group]
            places = [(own, contexts[group])] if own is not None else []
        for (doc_id, offset), context in places:
            inside = find_answer(context, part)
            if inside is not None:
                spans.append({"doc_id": doc_id, "start": offset + inside[0], "end": offset + inside[1],
                              "group": group})
                break
    fields.update(relevant_docs=relevant or {}, spans=spans)
    if len(parts) > 1:
        fields["answer_parts"] = [[part] for part in parts]
    else:
        fields["answers"] = [reference]
    return fields

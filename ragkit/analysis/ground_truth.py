"""Ground truth on a retrieved list: which chunks are relevant, and where the answer sits in each.

The rules are the metrics' own (``ragkit.metrics.documents`` and ``ragkit.metrics.spans``): a
chunk is relevant by document when its document has a grade > 0, and relevant by span when it
overlaps (half-open, same document, touching does not count) any span the span metrics scored
(``Question.scored_span_groups``: the answer spans, else the relevant passages). So what the
drill-down marks is exactly what recall, nDCG and the span metrics counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ragkit.metrics.spans import overlaps
from ragkit.questions import Question


@dataclass(frozen=True)
class Segment:
    """A piece of a chunk's text, in order; ``answer`` when it lies inside an answer span."""

    text: str
    answer: bool


@dataclass(frozen=True)
class MarkedChunk:
    rank: int
    chunk_id: str
    doc_id: str
    start_char: int
    end_char: int
    score: float
    relevant_doc: bool
    relevant_span: bool
    # The chunk's text cut at answer-span boundaries; empty when the document is not known.
    segments: tuple[Segment, ...] = field(default=())

    @property
    def relevant(self) -> bool:
        return self.relevant_doc or self.relevant_span

    @property
    def text(self) -> str:
        return "".join(segment.text for segment in self.segments)


def answer_segments(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> tuple[Segment, ...]:
    """``text`` (the document's [start, end)) cut into plain and answer pieces; ``spans`` are
    answer spans of the same document in document offsets, overlapping ones merged."""
    marks = sorted((max(a, start) - start, min(b, end) - start) for a, b in spans if a < end and b > start)
    pieces: list[Segment] = []
    cursor = 0
    for a, b in marks:
        if a > cursor:
            pieces.append(Segment(text[cursor:a], False))
        if b > max(a, cursor):
            piece = text[max(a, cursor):b]
            if pieces and pieces[-1].answer and a <= cursor:  # overlapping spans: one mark
                pieces[-1] = Segment(pieces[-1].text + piece, True)
            else:
                pieces.append(Segment(piece, True))
        cursor = max(cursor, b)
    if cursor < len(text):
        pieces.append(Segment(text[cursor:], False))
    return tuple(pieces)


def mark_retrievals(retrievals: pd.DataFrame, question: Question | None,
                    documents: Mapping[str, Any]) -> list[MarkedChunk]:
    """The rows of one (run, question) of the ``retrievals`` table, in rank order, each marked.

    ``documents``: doc_id -> a document with ``.text`` (a corpus's ``by_id()``); a chunk whose
    document is missing is marked all the same, with no text. ``question`` None (not in the
    question set): nothing is relevant."""
    relevant_docs = {doc for doc, grade in (question.relevant_docs.items() if question else []) if grade > 0}
    # The spans the span metrics scored: the answer's, else the relevant passages.
    spans = [(span.doc_id, span.start, span.end)
             for group in (question.scored_span_groups() if question else []) for span in group]
    marked = []
    for row in retrievals.sort_values("rank").itertuples():
        doc_id, start, end = str(row.doc_id), int(row.start_char), int(row.end_char)
        chunk = (doc_id, start, end)
        document = documents.get(doc_id)
        own = [(a, b) for d, a, b in spans if d == doc_id]
        segments = answer_segments(document.text[start:end], start, end, own) if document else ()
        marked.append(MarkedChunk(
            rank=int(row.rank), chunk_id=str(row.chunk_id), doc_id=doc_id, start_char=start, end_char=end,
            score=float(row.score), relevant_doc=doc_id in relevant_docs,
            relevant_span=any(overlaps(chunk, span) for span in spans), segments=segments,
        ))
    return marked

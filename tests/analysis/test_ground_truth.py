"""The drill-down's ground-truth marks, on a hand-built ranking (rules of ragkit.metrics)."""

from __future__ import annotations

import pandas as pd
import pytest

from ragkit.analysis.ground_truth import Segment, mark_retrievals
from ragkit.corpus.model import make_document
from ragkit.questions.model import AnswerSpan, Question

pytestmark = pytest.mark.unit

#            0         1         2         3
#            0123456789012345678901234567890123456789
TEXT_A = "Masks reduce spread. <b>Wash</b> hands often."
TEXT_B = "Unrelated text about weather and climate."


def _rows(*chunks: tuple[str, int, int]) -> pd.DataFrame:
    # Given out of rank order: the marks come back ranked.
    rows = [{"rank": rank, "chunk_id": f"c{rank}", "doc_id": d, "start_char": s, "end_char": e, "score": 1.0 / rank}
            for rank, (d, s, e) in enumerate(chunks, start=1)]
    return pd.DataFrame(rows[::-1])


def test_each_chunk_marked_by_document_and_by_span_with_the_span_cut_out() -> None:
    documents = {"a": make_document("a", TEXT_A), "b": make_document("b", TEXT_B), "c": make_document("c", TEXT_B)}
    # The answer "reduce spread" is A[6:19]; docs b and c are not relevant.
    question = Question(id="q", text="what do masks do?", relevant_docs={"a": 1.0},
                        spans=[AnswerSpan(doc_id="a", start=6, end=19)])
    rows = _rows(("a", 0, 12), ("a", 19, 44), ("b", 0, 10), ("c", 0, 10), ("a", 10, 30))
    marked = mark_retrievals(rows, question, documents)

    assert [m.rank for m in marked] == [1, 2, 3, 4, 5]
    # chunk 1 [0,12) overlaps the span [6,19); chunk 2 starts at 19: touching is not overlapping.
    assert [(m.relevant_doc, m.relevant_span) for m in marked] == [
        (True, True), (True, False), (False, False), (False, False), (True, True)]
    assert marked[0].segments == (Segment("Masks ", False), Segment("reduce", True))
    assert marked[4].segments == (Segment("ce spread", True), Segment(". <b>Wash</", False))
    assert all(not part.answer for part in marked[1].segments)
    assert marked[1].text == TEXT_A[19:44]


def test_overlapping_spans_are_marked_once_and_a_missing_document_still_scores() -> None:
    documents = {"a": make_document("a", TEXT_A)}
    question = Question(id="q", text="x?", relevant_docs={"a": 1.0, "z": 1.0},
                        spans=[AnswerSpan(doc_id="a", start=0, end=12), AnswerSpan(doc_id="a", start=6, end=19),
                               AnswerSpan(doc_id="z", start=0, end=5)])
    marked = mark_retrievals(_rows(("a", 0, 20), ("z", 2, 9)), question, documents)
    assert marked[0].segments == (Segment("Masks reduce spread", True), Segment(".", False))
    # Document z is not in the corpus at hand: no text, but relevance is still known.
    assert marked[1].segments == () and marked[1].relevant_doc and marked[1].relevant_span


def test_without_the_question_nothing_is_relevant() -> None:
    documents = {"a": make_document("a", TEXT_A)}
    marked = mark_retrievals(_rows(("a", 0, 12)), None, documents)
    assert not marked[0].relevant and marked[0].segments == (Segment(TEXT_A[:12], False),)

"""The quality report against hand-computed numbers, and its BM25 against the rerank judge's."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ragkit.corpus.model import make_document
from ragkit.questions import QuestionSet
from ragkit.questions.document_bm25 import DocumentBM25
from ragkit.questions.quality import format_report, quality_report
from ragkit.questions.wording import word_overlap
from ragkit.stages.context.rerank import bm25_scores

pytestmark = pytest.mark.unit

DOCS = {
    "a": "Cats purr loudly. Cats sleep sixteen hours daily. Dogs bark.",
    "b": "Volcanoes erupt molten rock. Lava cools into basalt.",
    "c": "Rivers carry sediment to deltas.",
    "d": "Nothing here is asked about.",
}


def question_set() -> QuestionSet:
    def span(doc: str, answer: str) -> dict:
        start = DOCS[doc].index(answer)
        return {"doc_id": doc, "start": start, "end": start + len(answer)}

    questions = [
        # copies its sentence: overlap 1 (cats, sleep, sixteen, hours, daily all in the passage)
        {"id": "1", "text": "Cats sleep sixteen hours daily?", "relevant_docs": {"a": 1.0},
         "spans": [span("a", "sixteen hours")], "answers": ["sixteen hours"], "question_type": "factoid"},
        # written anew: content words how, long, felines, rest -> none in doc a: overlap 0
        {"id": "2", "text": "How long do felines rest?", "relevant_docs": {"a": 1.0},
         "spans": [span("a", "sixteen hours")], "answers": ["sixteen hours"], "question_type": "paraphrase"},
        # the same text as 1 once normalised: a duplicate; its span reads wrong: not locatable
        {"id": "3", "text": "cats  sleep sixteen hours, daily", "relevant_docs": {"b": 1.0},
         "spans": [{"doc_id": "b", "start": 0, "end": 9}], "answers": ["basalt"], "question_type": "factoid"},
        # no span: its answer is looked for in its relevant document (found)
        {"id": "4", "text": "What do rivers carry?", "relevant_docs": {"c": 1.0}, "answers": ["sediment"]},
        {"id": "5", "text": "Who first climbed a volcano?", "answerable": False, "source_doc": "b",
         "question_type": "unanswerable"},
    ]
    return QuestionSet.model_validate({"name": "hand", "format": "squad", "questions": questions})


def test_report_matches_the_hand_computed_numbers():
    documents = {doc_id: make_document(doc_id, text) for doc_id, text in DOCS.items()}
    report = quality_report(question_set(), documents)
    # sources: 1->a, 2->a, 3->b, 4->c, 5->b (source_doc); documents a 2, b 2, c 1, d 0
    assert report.questions_per_document is not None
    assert report.questions_per_document.mean == pytest.approx(5 / 4)
    assert report.questions_per_document.maximum == 2 and report.questions_per_document.minimum == 0
    assert report.documents_without_questions == pytest.approx(1 / 4)
    assert report.types == {"factoid": 2, "paraphrase": 1, "unlabelled": 1, "unanswerable": 1}
    assert report.unanswerable == 1
    assert report.duplicates == 1 and report.duplicate_pairs == [("3", "1", "text")]
    assert report.answer_checked == 4 and report.answer_locatable == pytest.approx(3 / 4)
    # overlaps: q1 1.0, q2 0.0, q3 vs doc b's first two sentences 0.0, q4 vs doc c: {rivers, carry} 1.0,
    # q5 vs the whole of doc b ({climbed, volcano, first, who}): 0.0
    assert report.word_overlap is not None and report.word_overlap.mean == pytest.approx(2 / 5)
    assert report.word_overlap_by_type["factoid"] == pytest.approx(0.5)
    # bm25 over the answerable sourced questions 1-4: 1 -> a first; 2 -> no term matches (0, no win);
    # 3 -> 'cats' etc. point at a, not its source b; 4 -> c first
    assert report.bm25_checked == 4 and report.bm25_source_first == pytest.approx(2 / 4)
    assert any("repeat" in warning for warning in report.warnings)
    assert "bm25 ranks the source document first: 50% of 4" in format_report(report)


def test_without_a_corpus_only_the_set_is_measured():
    report = quality_report(question_set())
    assert report.documents is None and report.answer_locatable is None and report.bm25_source_first is None
    assert report.duplicates == 1
    assert "n/a (no corpus)" in format_report(report)


def test_word_overlap_by_hand():
    assert word_overlap("What is the boiling point of water?", "Water boils at a known point.") == \
        pytest.approx(2 / 3)  # {boiling, point, water}: point and water occur
    assert word_overlap("the of and", "anything") == 0.0


def test_document_bm25_equals_the_rerank_judges_bm25_on_random_texts():
    rng = random.Random(7)
    vocabulary = [f"term{index}" for index in range(30)]
    texts = [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(3, 40))) for _ in range(25)]
    index = DocumentBM25([str(i) for i in range(len(texts))], texts)
    for _ in range(20):
        query = " ".join(rng.sample(vocabulary, 4))
        assert np.allclose(index.scores(query), bm25_scores(query, texts))

"""Answer spans from answer texts (alternatives any-of, parts all-of) and their check against the corpus."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ragkit.corpus.model import make_document
from ragkit.questions import (
    AnswerSpan,
    Question,
    QuestionSet,
    find_answer,
    load_question_set,
    resolve_answer_spans,
    validate_against_corpus,
)
from tests.questions.conftest import write_jsonl

pytestmark = pytest.mark.unit

VACCINE_DOCUMENTS = {
    "d1": make_document("d1", "Pfizer made the first vaccine."),
    "d2": make_document("d2", "mRNA-1273 is the Moderna vaccine."),
}


def span(doc_id: str, start: int, end: int, group: int = 0) -> AnswerSpan:
    return AnswerSpan(doc_id=doc_id, start=start, end=end, group=group)


def test_resolve_answer_spans_finds_exact_then_case_insensitive_offsets(caplog: pytest.LogCaptureFixture) -> None:
    documents = {
        "d1": make_document("d1", "Bats host many coronaviruses. Bats fly."),
        "d2": make_document("d2", "MASKS reduce spread."),
    }
    question_set = QuestionSet(
        name="n",
        format="jsonl",
        questions=[
            Question(id="exact", text="Who hosts?", relevant_docs={"d1": 1}, answers=["Bats"]),
            Question(id="case", text="What helps?", relevant_docs={"d2": 1}, answers=["masks"]),
            Question(id="missing", text="Where?", relevant_docs={"d1": 1, "d9": 1}, answers=["Wuhan"]),
            Question(id="docs_only", text="Which?", relevant_docs={"d1": 1}),
            Question(id="has_span", text="Kept?", relevant_docs={"d1": 1}, answers=["fly"], spans=[span("d1", 35, 38)]),
        ],
    )

    with caplog.at_level(logging.WARNING, logger="ragkit.questions"):
        resolved = resolve_answer_spans(question_set, documents)

    by_id = resolved.by_id()
    assert by_id["exact"].spans == [span("d1", 0, 4)]
    assert by_id["case"].spans == [span("d2", 0, 5)]
    assert by_id["missing"].spans == [] and by_id["docs_only"].spans == []
    assert by_id["has_span"].spans == [span("d1", 35, 38)]
    assert resolved.ids_without_spans() == ["missing"]
    assert "no answer span found for 1 questions" in caplog.text
    assert question_set.ids_without_spans() == ["exact", "case", "missing"]
    assert validate_against_corpus(resolved, documents) == [
        "question missing: relevant document 'd9' is not in the corpus"
    ]


def test_every_answer_and_every_document_found_is_an_alternative_of_one_part() -> None:
    question = Question(
        id="v", text="Which vaccine?", relevant_docs={"d1": 1, "d2": 1},
        answers=["vaccine", "Moderna", "VACCINE"],  # "VACCINE" finds the same places as "vaccine"
    )
    resolved = resolve_answer_spans(QuestionSet(name="n", format="jsonl", questions=[question]), VACCINE_DOCUMENTS)

    (only,) = resolved.questions
    assert only.span_groups() == [[span("d1", 22, 29), span("d2", 25, 32), span("d2", 17, 24)]]


def test_answer_parts_resolve_to_one_group_per_part(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "parts.jsonl",
        [{"id": "v", "question": "Which two vaccines?", "relevant_doc_ids": ["d1", "d2"],
          "answer_parts": ["Pfizer", ["Moderna", "mRNA-1273"]]}],
    )
    resolved = resolve_answer_spans(load_question_set(path), VACCINE_DOCUMENTS)

    (question,) = resolved.questions
    assert question.span_groups() == [
        [span("d1", 0, 6)],
        [span("d2", 17, 24, group=1), span("d2", 0, 9, group=1)],
    ]
    assert validate_against_corpus(resolved, VACCINE_DOCUMENTS) == []


def test_an_unresolved_part_stays_an_empty_group_and_is_named(caplog: pytest.LogCaptureFixture) -> None:
    questions = [
        Question(id="partly", text="Which three?", relevant_docs={"d1": 1, "d2": 1},
                 answer_parts=[["Novavax"], ["Moderna"], ["Sputnik"]]),
        Question(id="none", text="Which two?", relevant_docs={"d1": 1}, answer_parts=[["Novavax"], ["Sputnik"]]),
    ]
    with caplog.at_level(logging.WARNING, logger="ragkit.questions.spans"):
        resolved = resolve_answer_spans(QuestionSet(name="n", format="jsonl", questions=questions), VACCINE_DOCUMENTS)

    by_id = resolved.by_id()
    assert by_id["partly"].span_groups() == [[], [span("d2", 17, 24, group=1)], []]
    assert by_id["none"].span_groups() == [[], []]
    assert resolved.ids_without_spans() == ["none"]
    assert "no answer span found for 1 questions" in caplog.text
    assert "some answer parts not found (they can never be covered) for 1 questions: partly" in caplog.text


@pytest.mark.parametrize(
    ("text", "answer", "expected"),
    [
        ("Bats fly. bats sleep.", "bats", (10, 14)),  # exact match before a case-insensitive one
        ("Bats fly.", "bats", (0, 4)),
        ("Bats fly.", " Bats ", (0, 4)),  # surrounding whitespace ignored
        ("Bats fly.", "cats", None),
    ],
)
def test_find_answer(text: str, answer: str, expected: tuple[int, int] | None) -> None:
    assert find_answer(text, answer) == expected


def test_validate_against_corpus_reports_each_problem() -> None:
    documents = {"d1": make_document("d1", "Bats host viruses.")}
    question_set = QuestionSet(
        name="n",
        format="squad",
        questions=[
            Question(id="ok", text="Who?", relevant_docs={"d1": 1}, answers=["Bats"], spans=[span("d1", 0, 4)]),
            Question(id="far", text="Who?", relevant_docs={"d1": 1}, spans=[span("d1", 10, 99)]),
            Question(id="off", text="Who?", relevant_docs={"d1": 1}, answers=["Bats"], spans=[span("d1", 1, 5)]),
            Question(id="gone", text="Who?", relevant_docs={"d7": 1}),
        ],
    )
    assert validate_against_corpus(question_set, documents) == [
        "question far: span [10, 99) is outside document 'd1' (18 chars)",
        "question off: span [1, 5) in 'd1' reads 'ats ', not the answer 'Bats'",
        "question gone: relevant document 'd7' is not in the corpus",
    ]


def test_validate_accepts_any_alternative_of_the_spans_own_part() -> None:
    question = Question(
        id="v", text="Which two?", relevant_docs={"d1": 1, "d2": 1},
        answer_parts=[["Pfizer"], ["Moderna", "mRNA-1273"]],
        spans=[span("d2", 0, 9, group=1), span("d2", 17, 24, group=0)],  # Moderna filed under the Pfizer part
    )
    problems = validate_against_corpus(QuestionSet(name="n", format="jsonl", questions=[question]), VACCINE_DOCUMENTS)
    assert problems == ["question v: span [17, 24) in 'd2' reads 'Moderna', not the answer of part 0, 'Pfizer'"]

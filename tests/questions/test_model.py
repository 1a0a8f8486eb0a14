"""The ground-truth models: consistency checks, answer parts as span groups, and the source document."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ragkit.questions import AnswerSpan, Question, QuestionSet

pytestmark = pytest.mark.unit


def span(doc_id: str, start: int, end: int, group: int = 0) -> AnswerSpan:
    return AnswerSpan(doc_id=doc_id, start=start, end=end, group=group)


def test_models_reject_inconsistent_ground_truth() -> None:
    with pytest.raises(ValidationError, match="end must be > start"):
        AnswerSpan(doc_id="d", start=5, end=5)
    with pytest.raises(ValidationError):
        AnswerSpan(doc_id="d", start=-1, end=3)
    with pytest.raises(ValidationError):
        AnswerSpan(doc_id="d", start=0, end=3, group=-1)
    with pytest.raises(ValidationError, match="relevant documents or an answer"):
        Question(id="q", text="Why?")
    with pytest.raises(ValidationError, match="not among relevant_docs"):
        Question(id="q", text="Why?", answers=["x"], spans=[span("d", 0, 1)])
    with pytest.raises(ValidationError, match="duplicate question ids"):
        QuestionSet(name="n", format="jsonl", questions=[Question(id="q", text="Why?", answers=["x"])] * 2)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"spans": [span("d", 0, 1, group=1)]}, r"question q7: span groups must be numbered 0\.\.G-1 .*got \[1\]"),
        ({"spans": [span("d", 0, 1), span("d", 2, 3, group=2)]}, r"question q7: .*got \[0, 2\]"),
        ({"answer_parts": [["a"], ["b"]], "spans": [span("d", 0, 1, group=2)]},
         r"question q7: span groups \[2\] have no answer part \(groups are numbered 0\.\.1 for 2 parts\)"),
        ({"answer_parts": [["a"], []]}, r"question q7: every answer part needs at least one answer"),
        ({"answer_parts": [["a"], ["b"]], "answers": ["b", "a"]}, r"question q7: answers must be the answer_parts"),
    ],
)
def test_bad_group_numbering_names_the_question(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Question(id="q7", text="Which?", relevant_docs={"d": 1}, **fields)


def test_answers_are_filled_from_answer_parts_and_round_trip() -> None:
    question = Question(id="q", text="Which two?", answer_parts=[["Pfizer", "BioNTech"], ["Moderna"]])
    assert question.answers == ["Pfizer", "BioNTech", "Moderna"]
    assert Question.model_validate(question.model_dump()) == question


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"relevant_docs": {"d": 1}}, []),  # relevance only: no answer part
        ({"relevant_docs": {"d": 1}, "answers": ["x"]}, [[]]),  # one part, not found
        ({"relevant_docs": {"d": 1}, "answers": ["x"], "spans": [span("d", 5, 6), span("d", 0, 1)]},
         [[span("d", 5, 6), span("d", 0, 1)]]),  # alternatives of one part, in their order
        ({"relevant_docs": {"d": 1}, "spans": [span("d", 4, 5, group=1), span("d", 0, 1), span("d", 2, 3, group=1)]},
         [[span("d", 0, 1)], [span("d", 4, 5, group=1), span("d", 2, 3, group=1)]]),
        ({"relevant_docs": {"d": 1}, "answer_parts": [["a"], ["b"], ["c"]], "spans": [span("d", 2, 3, group=1)]},
         [[], [span("d", 2, 3, group=1)], []]),  # unresolved parts stay empty groups
    ],
)
def test_span_groups_has_one_list_per_answer_part(fields: dict, expected: list) -> None:
    assert Question(id="q", text="Which?", **fields).span_groups() == expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"relevant_docs": {"d1": 3, "d2": 1}, "spans": [span("d2", 0, 1), span("d1", 0, 1)]}, "d2"),  # first span
        ({"relevant_docs": {"d1": 1, "d3": 2, "d2": 1}}, "d3"),  # highest grade
        ({"relevant_docs": {"d2": 2, "d1": 2}}, "d2"),  # tie: first listed
        ({"answers": ["x"]}, None),
    ],
)
def test_source_document(fields: dict, expected: str | None) -> None:
    assert Question(id="q", text="Which?", **fields).source_document == expected


def test_content_key_covers_span_groups() -> None:
    def question_set(second_group: int) -> QuestionSet:
        question = Question(
            id="q", text="Which two?", relevant_docs={"d": 1}, answer_parts=[["a"], ["b"]],
            spans=[span("d", 0, 1), span("d", 2, 3, group=second_group)],
        )
        return QuestionSet(name="n", format="jsonl", questions=[question])

    assert question_set(1).content_key() != question_set(0).content_key()
    assert question_set(1).content_key() == question_set(1).content_key()


def test_ids_without_spans_lists_questions_with_no_part_found() -> None:
    questions = [
        Question(id="none", text="A?", relevant_docs={"d": 1}, answer_parts=[["a"], ["b"]]),
        Question(id="some", text="B?", relevant_docs={"d": 1}, answer_parts=[["a"], ["b"]], spans=[span("d", 0, 1)]),
        Question(id="docs", text="C?", relevant_docs={"d": 1}),
    ]
    assert QuestionSet(name="n", format="jsonl", questions=questions).ids_without_spans() == ["none"]


def test_relevant_passages_are_span_ground_truth_only_where_the_answer_has_no_span():
    passage = {"doc_id": "d", "start": 100, "end": 400}
    free = Question.model_validate({"id": "q", "text": "Why?", "relevant_docs": {"d": 1.0},
                                    "answers": ["A summary in other words."], "passages": [passage]})
    assert free.span_groups() == [[]]
    assert [[(s.doc_id, s.start, s.end) for s in group] for group in free.scored_span_groups()] == [[("d", 100, 400)]]
    spanned = free.model_copy(update={"spans": [AnswerSpan(doc_id="d", start=120, end=130)]})
    assert spanned.scored_span_groups() == spanned.span_groups()
    without = free.model_copy(update={"passages": []})
    assert "passages" not in without.key_dump() and "passages" in free.key_dump()
    with pytest.raises(ValueError, match="passages point into documents not among relevant_docs"):
        Question.model_validate({"id": "q", "text": "Why?", "answers": ["x"], "passages": [passage]})

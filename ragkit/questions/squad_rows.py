"""A question set as the SQuAD-style JSONL rows ragkit reads (for imports written back to disk).

A question whose answer has exactly one span per part becomes a squad row (``answer_parts`` for
several parts), an unanswerable one a row with ``answerable: false``. A set holding any answerable
question without such spans (its answer was not found in its context, or it only has relevance
judgements) is written in the plain ``jsonl`` layout instead, whole: relevant_doc_ids with grades
and the answers; experiments then find the spans again (first occurrence in a relevant document).
Either layout carries a question's relevant passages as ``passages`` ({doc_id, start, end}).
"""

from __future__ import annotations

from typing import Any

from ragkit.questions.model import Question, QuestionSet


def _one_span_per_part(question: Question) -> bool:
    groups = question.span_groups()
    return bool(groups) and all(len(group) == 1 for group in groups)


def question_rows(question_set: QuestionSet) -> list[dict[str, Any]]:
    questions = question_set.questions
    if all(not q.answerable or _one_span_per_part(q) for q in questions):
        rows = [_squad_row(q) for q in questions]
    else:
        rows = [_plain_row(q) for q in questions]
    return [_with_passages(row, q) for row, q in zip(rows, questions, strict=True)]


def _with_passages(row: dict[str, Any], question: Question) -> dict[str, Any]:
    if not question.passages:
        return row
    return {**row, "passages": [{"doc_id": p.doc_id, "start": p.start, "end": p.end} for p in question.passages]}


def _squad_row(question: Question) -> dict[str, Any]:
    row: dict[str, Any] = {"id": question.id, "question": question.text}
    if question.question_type:
        row["type"] = question.question_type
    if not question.answerable:
        return {**row, "doc_id": question.source_document, "answer": None, "answer_start": None,
                "answer_end": None, "answerable": False}
    parts = [{"doc_id": group[0].doc_id, "answer": _answer(question, index), "answer_start": group[0].start,
              "answer_end": group[0].end} for index, group in enumerate(question.span_groups())]
    row.update(parts[0])
    if len(parts) > 1:
        row["answer_parts"] = parts
    return row


def _answer(question: Question, group: int) -> str:
    return question.answer_parts[group][0] if question.answer_parts else question.answers[0]


def _plain_row(question: Question) -> dict[str, Any]:
    row: dict[str, Any] = {"id": question.id, "question": question.text}
    if question.relevant_docs:
        row["relevant_doc_ids"] = dict(question.relevant_docs)
    if question.answer_parts:
        row["answer_parts"] = question.answer_parts
    elif question.answers:
        row["answer"] = question.answers
    if not question.answerable:
        row["answerable"] = False
    return row

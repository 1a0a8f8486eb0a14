"""The ``jsonl`` and ``csv`` question-set formats: questions written by hand.

One question per JSONL object or CSV row: ``id`` (optional, default: the 1-based row number),
``question``, and at least one of ``relevant_doc_ids`` (a list, a {doc_id: score} object, or a
';'-separated string) and an answer, given as either

- ``answer``: one text, or in JSONL a list of alternative texts (any one answers the question);
  blank texts are left out; or
- ``answer_parts``: a multi-part answer, all parts needed. In JSONL a list whose items are a
  string or a list of alternative strings, e.g. ``["Pfizer", ["Moderna", "mRNA-1273"]]``; in CSV
  (or as a JSONL string) the parts separated by ``||``, e.g. ``Pfizer || Moderna``, one text per
  part. Part i becomes span group i; texts are stripped and a part must have a non-blank text.

Spans are not read from these formats: ``resolve_answer_spans`` finds them in the corpus.

Follow-ups and routing (all optional): ``history``, the conversation before the question (in
JSONL a list of ``{role, content}`` objects or of strings alternating user / assistant, starting
with the user; in CSV the same as a JSON string); ``expected_route`` (documents, conversational or
web), scored as routing accuracy; ``answerable`` (default true; false for a question the
documents cannot answer, which then needs no relevant documents or answer); ``graded_spans`` (JSONL
only), graded ground truth from labelling (``ragkit labels ground-truth``): a list of
``{doc_id, start, end, grade (0-2), source (human | judge)}``; ``passages`` (JSONL only), relevant
passages (an import's located contexts): a list of ``{doc_id, start, end}``.

A question asked about a document the user chose (optional): ``document``, its doc id (in JSONL
also a list of ids; a ';'-separated string in CSV). A retriever with ``scope: named_doc`` searches
only those documents; it is the user's choice, not ground truth, so no metric reads it.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from ragkit.errors import ConfigError
from ragkit.json_input import JsonInputError, parse_json
from ragkit.questions.model import Question
from ragkit.questions.rows import RowModel, jsonl_rows, parse_row
from ragkit.quoting import clipped

PART_SEPARATOR = "||"


class _PlainRow(RowModel):
    id: str | None = None
    question: str
    relevant_doc_ids: list[str] | dict[str, float] | str | None = None
    answer: list[str] | str | None = None
    answer_parts: list[str | list[str]] | str | None = None
    history: list[dict[str, Any] | str] | str | None = None
    expected_route: str | None = None
    answerable: bool | None = None
    graded_spans: list[dict[str, Any]] | None = None
    passages: list[dict[str, Any]] | None = None
    document: list[str] | str | None = None


def load_plain_jsonl(path: Path) -> list[Question]:
    rows = [(line_no, number, obj) for number, (line_no, obj) in enumerate(jsonl_rows(path), start=1)]
    return _plain_questions(path, rows)


def load_csv(path: Path) -> list[Question]:
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        try:
            rows = _csv_rows(path, reader)
        except csv.Error as error:  # e.g. a cell over csv.field_size_limit(), an unclosed quote at the end
            raise ConfigError(f"{path}, line {reader.line_num}: malformed CSV: {clipped(str(error))}") from None
    return _plain_questions(path, rows)


def _csv_rows(path: Path, reader: csv.DictReader[str]) -> list[tuple[int, int, dict[str, Any]]]:
    """(line, row number, cells) of every record, after checking the header names a question and its truth."""
    columns = {(column or "").strip() for column in reader.fieldnames or []}
    if "question" not in columns or not columns & {"relevant_doc_ids", "answer", "answer_parts"}:
        raise ConfigError(
            f"{path}: needs a 'question' column and 'relevant_doc_ids' and/or 'answer' or 'answer_parts' "
            f"(optional 'id'); found columns: {clipped(', '.join(sorted(columns))) or 'none'}"
        )
    rows = []
    record_start = reader.line_num + 1
    for number, record in enumerate(reader, start=1):
        # Empty cells count as missing; cells beyond the header (key None, list value) are ignored.
        cells = {key.strip(): value.strip() or None for key, value in record.items() if isinstance(value, str)}
        rows.append((record_start, number, cells))
        record_start = reader.line_num + 1
    return rows


def _plain_questions(path: Path, rows: list[tuple[int, int, dict[str, Any]]]) -> list[Question]:
    questions = []
    for line_no, number, obj in rows:
        where = f"{path}, line {line_no}"
        row = parse_row(_PlainRow, obj, where)
        relevant = row.relevant_doc_ids
        if isinstance(relevant, str):
            relevant = _doc_ids(relevant)
        if isinstance(relevant, list):
            relevant = dict.fromkeys(relevant, 1.0)
        fields: dict[str, Any] = {
            "id": row.id if row.id is not None else str(number),
            "text": row.question,
            "relevant_docs": relevant or {},
        }
        parts = _answer_parts(row.answer_parts)
        if parts and row.answer is not None:
            raise ConfigError(f"{where}: give either answer or answer_parts, not both")
        if parts:
            fields["answer_parts"] = parts
        else:
            answers = [row.answer] if isinstance(row.answer, str) else row.answer or []
            fields["answers"] = [answer for answer in answers if answer.strip()]
        if row.history is not None:
            fields["history"] = _history(row.history, where)
        if row.expected_route is not None:
            fields["expected_route"] = row.expected_route
        if row.answerable is not None:
            fields["answerable"] = row.answerable
        if row.graded_spans:
            fields["graded_spans"] = row.graded_spans
        if row.passages:
            fields["passages"] = row.passages
        if row.document is not None:
            fields["documents"] = _doc_ids(row.document)
        questions.append(parse_row(Question, fields, where))
    return questions


def _doc_ids(raw: list[str] | str) -> list[str]:
    """Doc ids from a list or a ';'-separated string, stripped, blanks left out, each once."""
    items = raw.split(";") if isinstance(raw, str) else raw
    return list(dict.fromkeys(doc.strip() for doc in items if doc.strip()))


def _history(raw: list[dict[str, Any] | str] | str, where: str) -> list[dict[str, Any]]:
    """Turns as ``{role, content}``: a JSON string is parsed first; plain strings alternate
    user / assistant, starting with the user."""
    if isinstance(raw, str):
        try:
            raw = parse_json(raw)
        except JsonInputError as error:
            raise ConfigError(f"{where}: 'history' is not valid JSON ({error.detail})") from None
        if not isinstance(raw, list):
            raise ConfigError(f"{where}: 'history' must be a list of turns, got {type(raw).__name__}")
    roles = ("user", "assistant")
    return [{"role": roles[number % 2], "content": turn} if isinstance(turn, str) else turn
            for number, turn in enumerate(raw)]


def _answer_parts(raw: list[str | list[str]] | str | None) -> list[list[str]]:
    """Alternatives per part; a part with no non-blank text stays as an empty list (an error)."""
    items = raw.split(PART_SEPARATOR) if isinstance(raw, str) else raw or []
    parts = []
    for item in items:
        alternatives = [item] if isinstance(item, str) else item
        parts.append([text.strip() for text in alternatives if text.strip()])
    return parts

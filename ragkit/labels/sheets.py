"""Labelling without the dashboard: a pool as a CSV sheet to fill in, and a filled sheet as labels.

The sheet lists each question's chunks then its answers in the pool's shuffled order, with the
text to judge and empty grade columns; it never names a run. A chunk row carries its span
(``doc_id``, ``start_char``, ``end_char``: character offsets in the document, end exclusive), so
a sheet can be filled from anything that knows the documents (answer spans, another tool). A
person fills ``relevance`` (relevant / partly / not, or 2 / 1 / 0) for chunks, ``correct``
(correct / partly / wrong, or 2 / 1 / 0) and ``grounded`` (yes / no) for answers; rows left blank
are not labels. ``correct`` and ``grounded`` belong to answer rows: a pool of runs without a
generator has no answer rows, so those columns stay blank, and an answer row may fill one of
the two (the blank one is no label, not a 0).

A text that a spreadsheet would run as a formula (starting with ``=``, ``+``, ``-``, ``@``, a tab
or a CR: corpus text can be steered) gets a leading ``'``, as in ``ragkit export``; ``read_sheet``
drops it again. One row is one physical line: a text's line breaks, tabs and backslashes are written escaped
(``\\n``, ``\\r``, ``\\t``, ``\\\\``), so a line-based tool (``wc -l``, ``grep``, a diff) counts
rows; ``read_sheet`` undoes the escapes. Reading a sheet back, a row is found by ``item_id``, or
by question and span when the id is blank; a span that disagrees with the pool's item is refused.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ragkit.analysis.export import FORMULA_PREFIXES, spreadsheet_text
from ragkit.errors import ConfigError
from ragkit.labels.pooling import Pool, chunk_item_id
from ragkit.labels.store import CORRECT_NAMES, HUMAN, RELEVANCE_NAMES

SHEET_COLUMNS = ("pool_id", "question_id", "question", "item_kind", "item_id", "doc_id", "start_char", "end_char",
                 "text", "relevance", "correct", "grounded")
_YES, _NO = ("yes", "y", "true", "1"), ("no", "n", "false", "0")
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}


def escape_cell(text: str) -> str:
    """``text`` on one line (backslash, newline, carriage return and tab written as escapes), a
    would-be formula quoted."""
    return spreadsheet_text("".join(_ESCAPES.get(char, char) for char in text))


def unescape_cell(text: str) -> str:
    """``escape_cell`` undone (a backslash before any other character is kept as written)."""
    if text.startswith("'") and text[1:].startswith(FORMULA_PREFIXES):
        text = text[1:]
    out, chars = [], iter(text)
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            out.append(_UNESCAPES.get(following, char + following))
        else:
            out.append(char)
    return "".join(out)


def pool_sheet(pool: Pool) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(SHEET_COLUMNS)
    for question in pool.questions:
        asked = escape_cell(question.text)
        for chunk in question.chunks:
            text = chunk.text if chunk.text is not None else f"{chunk.doc_id} [{chunk.start_char}, {chunk.end_char})"
            writer.writerow([pool.pool_id, question.question_id, asked, "chunk", chunk.item_id, chunk.doc_id,
                             chunk.start_char, chunk.end_char, escape_cell(text), "", "", ""])
        for answer in question.answers:
            writer.writerow([pool.pool_id, question.question_id, asked, "answer", answer.item_id, "", "", "",
                             escape_cell(answer.answer), "", "", ""])
    return out.getvalue()


def read_sheet(path: Path) -> list[dict[str, str]]:
    """A sheet's rows as written by ``pool_sheet`` (texts unescaped, every value a string)."""
    with open(path, encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        for column in ("question", "text"):
            if row.get(column):
                row[column] = unescape_cell(row[column])
    return rows


def grade_from_text(text: str, names: tuple[str, ...], field: str, where: str) -> int | None:
    """A grade written as its name or its number; blank is None."""
    value = text.strip().lower()
    if not value:
        return None
    if value in names:
        return names.index(value)
    if value.isdigit() and int(value) < len(names):
        return int(value)
    choices = ", ".join(f"{name} ({grade})" for grade, name in enumerate(names))
    raise ConfigError(f"{where}: {field} '{text}' is not a grade. Valid: {choices}")


def _grounded(text: str, where: str) -> bool | None:
    value = text.strip().lower()
    if not value:
        return None
    if value in _YES or value in _NO:
        return value in _YES
    raise ConfigError(f"{where}: grounded '{text}' is not yes or no")


def _offset(text: str | None, column: str, where: str) -> int | None:
    value = (text or "").strip()
    if not value:
        return None
    if not value.isdigit():
        raise ConfigError(f"{where}: {column} '{value}' is not a character offset (a whole number >= 0)")
    return int(value)


def _find_item(record: dict, items: dict, pool: Pool, where: str) -> str:
    """The pool item a sheet row names: by item_id, or by question and span when the id is blank.
    A span that disagrees with the item's is refused."""
    item_id = (record.get("item_id") or "").strip()
    doc_id = (record.get("doc_id") or "").strip()
    start = _offset(record.get("start_char"), "start_char", where)
    end = _offset(record.get("end_char"), "end_char", where)
    if not item_id and doc_id and start is not None and end is not None:
        item_id = chunk_item_id((record.get("question_id") or "").strip(), doc_id, start, end)
        if item_id not in items:
            raise ConfigError(f"{where}: no chunk of question '{record.get('question_id')}' spans {doc_id} "
                              f"[{start}, {end}) in pool {pool.pool_id}")
    if item_id not in items:
        raise ConfigError(f"{where}: item '{item_id}' is not in pool {pool.pool_id}")
    _, item = items[item_id]
    given = (doc_id or None, start, end)
    if item["item_kind"] == "chunk" and any(value is not None for value in given):
        expected = (item["doc_id"], item["start_char"], item["end_char"])
        if given != expected:
            raise ConfigError(f"{where}: item {item_id} is {expected[0]} [{expected[1]}, {expected[2]}) in pool "
                              f"{pool.pool_id}, the sheet says {given[0]} [{given[1]}, {given[2]})")
    return item_id


def sheet_labels(path: Path, pool: Pool, annotator: str) -> list[dict]:
    """The labels a filled sheet holds, as LabelStore rows (items not in ``pool`` are refused)."""
    items = {}
    for question in pool.questions:
        for chunk in question.chunks:
            items[chunk.item_id] = (question, {"item_kind": "chunk", "doc_id": chunk.doc_id,
                                               "start_char": chunk.start_char, "end_char": chunk.end_char})
        for answer in question.answers:
            items[answer.item_id] = (question, {"item_kind": "answer", "run_id": answer.run_id})
    rows = []
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in ("item_id", "relevance", "correct", "grounded") if c not in (reader.fieldnames or [])]
        if missing:
            raise ConfigError(f"{path}: not a label sheet, missing column(s) {', '.join(missing)}")
        for record in reader:
            where = f"{path}, line {reader.line_num}"
            relevance = grade_from_text(record.get("relevance") or "", RELEVANCE_NAMES, "relevance", where)
            correct = grade_from_text(record.get("correct") or "", CORRECT_NAMES, "correct", where)
            grounded = _grounded(record.get("grounded") or "", where)
            if relevance is None and correct is None and grounded is None:
                continue
            item_id = _find_item(record, items, pool, where)
            question, item = items[item_id]
            if item["item_kind"] == "chunk" and (correct is not None or grounded is not None):
                raise ConfigError(f"{where}: a chunk takes relevance only; correct and grounded are for answers")
            if item["item_kind"] == "answer" and relevance is not None:
                raise ConfigError(f"{where}: an answer takes correct and grounded; relevance is for chunks")
            rows.append({"annotator": annotator, "source": HUMAN, "pool_id": pool.pool_id,
                         "question_id": question.question_id, "document": question.document, "item_id": item_id,
                         **item, "relevance": relevance, "correct": correct, "grounded": grounded})
    return rows


def person_labels(pool: Pool, question_id: str, annotator: str, relevance: dict[str, int | None],
                  answers: dict[str, tuple[int | None, bool | None]]) -> list[dict]:
    """LabelStore rows of what a person marked for one question on the labelling page: chunk item
    id -> grade (None: not marked), answer item id -> (correct grade, grounded)."""
    if not annotator.strip():
        raise ConfigError("give the annotator's name before saving labels")
    question = next((q for q in pool.questions if q.question_id == question_id), None)
    if question is None:
        raise ConfigError(f"question '{question_id}' is not in pool {pool.pool_id}")
    base = {"annotator": annotator.strip(), "source": HUMAN, "pool_id": pool.pool_id,
            "question_id": question.question_id, "document": question.document}
    rows = [{**base, "item_kind": "chunk", "item_id": chunk.item_id, "doc_id": chunk.doc_id,
             "start_char": chunk.start_char, "end_char": chunk.end_char, "relevance": relevance[chunk.item_id]}
            for chunk in question.chunks if relevance.get(chunk.item_id) is not None]
    for answer in question.answers:
        correct, grounded = answers.get(answer.item_id, (None, None))
        if correct is not None or grounded is not None:
            rows.append({**base, "item_kind": "answer", "item_id": answer.item_id, "run_id": answer.run_id,
                         "correct": correct, "grounded": grounded})
    return rows

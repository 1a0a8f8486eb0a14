"""Labelling without the dashboard: a pool as a CSV sheet to fill in, and a filled sheet as labels.

The sheet lists each question's chunks then its answers in the pool's shuffled order, with the
text to judge and empty grade columns; it never names a run. A person fills ``relevance``
(relevant / partly / not, or 2 / 1 / 0) for chunks, ``correct`` (correct / partly / wrong, or
2 / 1 / 0) and ``grounded`` (yes / no) for answers; rows left blank are not labels.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ragkit.errors import ConfigError
from ragkit.labels.pooling import Pool
from ragkit.labels.store import CORRECT_NAMES, HUMAN, RELEVANCE_NAMES

SHEET_COLUMNS = ("pool_id", "question_id", "question", "item_kind", "item_id", "text", "relevance", "correct",
                 "grounded")
_YES, _NO = ("yes", "y", "true", "1"), ("no", "n", "false", "0")


def pool_sheet(pool: Pool) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(SHEET_COLUMNS)
    for question in pool.questions:
        for chunk in question.chunks:
            writer.writerow([pool.pool_id, question.question_id, question.text, "chunk", chunk.item_id,
                             chunk.text if chunk.text is not None else f"{chunk.doc_id} [{chunk.start_char}, "
                                                                       f"{chunk.end_char})", "", "", ""])
        for answer in question.answers:
            writer.writerow([pool.pool_id, question.question_id, question.text, "answer", answer.item_id,
                             answer.answer, "", "", ""])
    return out.getvalue()


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
            item_id = (record.get("item_id") or "").strip()
            if item_id not in items:
                raise ConfigError(f"{where}: item '{item_id}' is not in pool {pool.pool_id}")
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

"""Labels into a question set as graded ground truth: each question's graded spans, a new field.

The set's JSONL rows are copied as they are, with ``graded_spans`` (a list of ``{doc_id, start,
end, grade, source}``) added to the rows of labelled questions, so every other field (and
formats' own fields ragkit does not read) stays; readers that do not know the field ignore it
(ragkit's row models ignore unknown fields). Only JSONL sets (squad or jsonl) take the field:
BEIR, CSV and SQuAD JSON have no place for it, and the command says so.

Adding grades changes a question's content key (its ground truth changed), so runs answer
those questions again when run on the new set, as for any edited question.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ragkit.errors import ConfigError
from ragkit.labels.grades import GradeSource
from ragkit.labels.pooling import Pool
from ragkit.labels.qrels import graded_items
from ragkit.questions import detect_format
from ragkit.questions.rows import file_in, jsonl_rows

JSONL_FORMATS = ("squad", "jsonl")


def graded_spans_by_question(pool: Pool, labels: pd.DataFrame, grades: GradeSource) -> dict[str, list[dict]]:
    items = graded_items(pool, labels, grades).sort_values(["question_id", "doc_id", "start_char", "end_char"])
    found: dict[str, list[dict]] = {}
    for row in items.itertuples(index=False):
        found.setdefault(str(row.question_id), []).append({
            "doc_id": row.doc_id, "start": int(row.start_char), "end": int(row.end_char),
            "grade": int(row.relevance), "source": row.grade_source})
    return found


def add_graded_spans(question_set: Path, out: Path, pool: Pool, labels: pd.DataFrame,
                     grades: GradeSource = "human") -> tuple[int, int]:
    """Write ``question_set`` to ``out`` with graded spans; (questions given spans, spans written)."""
    question_set = Path(question_set)
    if not question_set.exists():
        raise ConfigError(f"question set not found: {question_set}")
    fmt = detect_format(question_set)
    source = file_in(question_set, "questions.jsonl")
    if fmt not in JSONL_FORMATS or source.suffix.lower() != ".jsonl":
        raise ConfigError(f"{question_set} is a {fmt} question set: graded ground truth is added to JSONL sets "
                          f"({', '.join(JSONL_FORMATS)}); convert it to JSONL first")
    if out.resolve() == source.resolve():
        raise ConfigError(f"--out {out} is the question set itself: write the graded set to a new file")
    spans = graded_spans_by_question(pool, labels, grades)
    lines, given, written = [], 0, 0
    for number, (_, row) in enumerate(jsonl_rows(source), start=1):
        question_id = str(row["id"]) if row.get("id") is not None else str(number)
        if question_id in spans:
            row = {**row, "graded_spans": spans[question_id]}
            given += 1
            written += len(spans[question_id])
        lines.append(json.dumps(row, ensure_ascii=False))
    target = out / "questions.jsonl" if out.suffix.lower() != ".jsonl" else out
    if question_set.is_dir() and (question_set / "corpus.jsonl").is_file() and target.parent != question_set:
        # A dataset folder ships its corpus: the graded copy keeps it, so it runs as the original.
        target.parent.mkdir(parents=True, exist_ok=True)
        (target.parent / "corpus.jsonl").write_bytes((question_set / "corpus.jsonl").read_bytes())
    from ragkit.storage.atomic import write_bytes_atomic

    write_bytes_atomic(target, ("\n".join(lines) + "\n").encode("utf-8"))
    return given, written

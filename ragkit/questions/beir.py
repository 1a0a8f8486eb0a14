"""The ``beir`` question-set format: relevance judgements only, no answer spans.

A folder with ``queries.jsonl`` ({"_id", "text"}) and ``qrels/<split>.tsv`` (query-id, corpus-id,
score; header optional). Only queries judged in the split are kept, in the order they first appear
in the qrels file. Scores are kept as floats (graded relevance); a row with score <= 0 marks a
document as not relevant and is left out, and a query left with no relevant document is dropped.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ragkit.errors import ConfigError
from ragkit.questions.model import Question
from ragkit.questions.rows import RowModel, file_in, jsonl_rows, numbered_lines, parse_row
from ragkit.quoting import clipped


class _QueryRow(RowModel):
    id: str = Field(alias="_id")
    text: str


def load_beir(folder: Path, split: str) -> list[Question]:
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        available = ", ".join(sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))) or "none"
        raise ConfigError(f"beir split '{clipped(split)}' not found: expected {qrels_path} "
                          f"(available splits: {available})")
    judged, first_line = _read_qrels(qrels_path)

    queries_path = file_in(folder, "queries.jsonl")
    texts = {}
    for line_no, obj in jsonl_rows(queries_path):
        row = parse_row(_QueryRow, obj, f"{queries_path}, line {line_no}")
        texts[row.id] = row.text
    questions = []
    for query_id, docs in judged.items():
        if not docs:
            continue
        where = f"{qrels_path}, line {first_line[query_id]}"
        if query_id not in texts:
            raise ConfigError(f"{where}: query '{clipped(query_id)}' is not in {queries_path}")
        questions.append(parse_row(Question, {"id": query_id, "text": texts[query_id], "relevant_docs": docs}, where))
    return questions


def _read_qrels(qrels_path: Path) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """(query id -> {relevant doc id: score}, query id -> line it first appears on)."""
    judged: dict[str, dict[str, float]] = {}
    first_line: dict[str, int] = {}
    for line_no, line in numbered_lines(qrels_path):
        fields = [field.strip() for field in line.split("\t")]
        if len(fields) != 3:
            raise ConfigError(f"{qrels_path}, line {line_no}: expected query-id, corpus-id, score separated by tabs")
        query_id, doc_id, raw_score = fields
        try:
            score = float(raw_score)
        except ValueError:
            if line_no == 1:  # the BEIR header row
                continue
            raise ConfigError(f"{qrels_path}, line {line_no}: score '{clipped(raw_score)}' is not a number") from None
        first_line.setdefault(query_id, line_no)
        docs = judged.setdefault(query_id, {})
        if score > 0:
            docs[doc_id] = score
        else:
            docs.pop(doc_id, None)
    return judged, first_line

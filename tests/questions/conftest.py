"""Shared question-set fixtures: a tiny BEIR folder and COVID-QA-style squad rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SQUAD_ROWS = [
    {"id": "s1", "question": "What do bats host?", "answer": "coronaviruses", "doc_id": "d1",
     "answer_start": 15, "answer_end": 28},
    {"id": "s2", "question": "What reduces spread?", "answer": "Masks", "doc_id": "d2", "answer_start": 0},
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def beir_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    write_jsonl(
        folder / "corpus.jsonl",
        [
            {"_id": "d1", "title": "Bats", "text": "Bats host many coronaviruses."},
            {"_id": "d2", "title": "", "text": "Masks reduce spread."},
            {"_id": "d3", "title": "Soap", "text": "Soap breaks lipid envelopes."},
        ],
    )
    write_jsonl(
        folder / "queries.jsonl",
        [
            {"_id": "q1", "text": "Which animals host coronaviruses?", "metadata": {}},
            {"_id": "q2", "text": "Do masks work?", "metadata": {}},
            {"_id": "q3", "text": "Only judged not relevant", "metadata": {}},
            {"_id": "q4", "text": "A training query", "metadata": {}},
        ],
    )
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        "q2\td2\t1\n"
        "q1\td1\t2\n"
        "q1\td3\t1\n"
        "q1\td2\t0\n"
        "q3\td1\t0\n",
        encoding="utf-8",
    )
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq4\td3\t1\n", encoding="utf-8")
    return folder

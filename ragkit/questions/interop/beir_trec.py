"""BEIR folders and TREC qrels: relevance judgements by document, no answers, no spans.

BEIR export writes ``queries.jsonl``, ``qrels/<split>.tsv`` (with the header row) and, given the
documents, ``corpus.jsonl``; ragkit reads it back with its ``beir`` reader. TREC qrels are lines
``query-id 0 doc-id grade``. What neither holds: answers, spans, types, and questions without a
relevant document (unanswerable ones), which are left out, and counted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragkit.errors import ConfigError
from ragkit.questions.model import QuestionSet
from ragkit.questions.rows import numbered_lines


def _grade(score: float) -> str:
    return str(int(score)) if float(score).is_integer() else repr(float(score))


def write_beir(question_set: QuestionSet, folder: Path, documents: Mapping[str, Any] | None = None,
               split: str = "test") -> int:
    """Write the set as a BEIR folder; returns how many questions were left out (no relevant doc)."""
    judged = [q for q in question_set.questions if q.relevant_docs]
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q.id, "text": q.text}, ensure_ascii=False) + "\n" for q in judged),
        encoding="utf-8")
    (folder / "qrels" / f"{split}.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q.id}\t{doc}\t{_grade(score)}\n" for q in judged
                                                 for doc, score in q.relevant_docs.items()), encoding="utf-8")
    if documents is not None:
        rows = []
        for doc_id, document in documents.items():
            row = {"_id": doc_id, "text": document.text}
            title = (getattr(document, "metadata", None) or {}).get("title")
            if title:
                row["title"] = title
            rows.append(json.dumps(row, ensure_ascii=False) + "\n")
        (folder / "corpus.jsonl").write_text("".join(rows), encoding="utf-8")
    return len(question_set.questions) - len(judged)


def write_trec_qrels(question_set: QuestionSet, path: Path) -> int:
    """Write TREC qrels; returns how many questions were left out (no relevant doc)."""
    lines = [f"{q.id} 0 {doc} {_grade(score)}\n"
             for q in question_set.questions for doc, score in q.relevant_docs.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    return sum(not q.relevant_docs for q in question_set.questions)


def read_trec_qrels(path: Path) -> dict[str, dict[str, float]]:
    """query id -> {doc id: grade > 0}, in file order; grades <= 0 are judged not relevant."""
    judged: dict[str, dict[str, float]] = {}
    for line_no, line in numbered_lines(path):
        fields = line.split()
        if len(fields) != 4:
            raise ConfigError(f"{path}, line {line_no}: expected 'query-id iteration doc-id grade'")
        try:
            grade = float(fields[3])
        except ValueError:
            raise ConfigError(f"{path}, line {line_no}: grade '{fields[3]}' is not a number") from None
        docs = judged.setdefault(fields[0], {})
        if grade > 0:
            docs[fields[2]] = grade
    return judged

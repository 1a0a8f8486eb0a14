"""ragas test sets: rows of user_input, reference, reference_contexts (and reference_context_ids).

Export writes the rows ``ragas.EvaluationDataset.from_list`` reads (JSONL, or a JSON list for a
``.json`` file), adding ``id`` (ragas ignores it, ragkit reads it back) and the documents of the
contexts as ``reference_context_ids``. Import reads those rows, a ragas ``Testset`` JSONL (rows
nested under ``eval_sample``) or a JSON list; spans come back by finding each context in the
corpus and the reference in its context (``contexts``). What ragas cannot hold: relevance grades
(every context's document is relevance 1), the question type, and an unanswerable question's
source document; a multi-part reference is one line per part.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragkit.errors import ConfigError
from ragkit.json_input import load_json
from ragkit.qa.interop.contexts import question_contexts, question_fields, reference_text
from ragkit.qa.model import Question, QuestionSet
from ragkit.qa.rows import jsonl_rows, parse_row, read_bytes


def ragas_rows(question_set: QuestionSet, texts: Mapping[str, str]) -> list[dict[str, Any]]:
    rows = []
    for question in question_set.questions:
        contexts = question_contexts(question, texts)
        rows.append({"id": question.id, "user_input": question.text, "reference": reference_text(question),
                     "reference_contexts": [context.text for context in contexts],
                     "reference_context_ids": [context.doc_id for context in contexts]})
    return rows


def write_ragas(question_set: QuestionSet, texts: Mapping[str, str], path: Path) -> Path:
    rows = ragas_rows(question_set, texts)
    if path.suffix.lower() == ".json":
        text = json.dumps(rows, ensure_ascii=False, indent=1)
    else:
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def read_ragas(path: Path, texts: Mapping[str, str], name: str | None = None) -> QuestionSet:
    if path.suffix.lower() == ".json":
        loaded = load_json(read_bytes(path), str(path))
        if not isinstance(loaded, list):
            raise ConfigError(f"{path}: expected a JSON list of ragas samples")
        rows = list(enumerate(loaded, start=1))
    else:
        rows = list(jsonl_rows(path))
    questions: list[Question] = []
    for number, row in rows:
        where = f"{path}, {'item' if path.suffix.lower() == '.json' else 'line'} {number}"
        sample = row.get("eval_sample", row) if isinstance(row, dict) else row
        if not isinstance(sample, dict) or not isinstance(sample.get("user_input"), str):
            raise ConfigError(f"{where}: expected a ragas sample with a 'user_input' string")
        contexts = [str(c) for c in sample.get("reference_contexts") or []]
        ids = sample.get("reference_context_ids")
        fields = question_fields(str(row.get("id") or sample.get("id") or number), sample["user_input"],
                                 str(sample.get("reference") or ""), contexts,
                                 [str(i) for i in ids] if isinstance(ids, list) and len(ids) == len(contexts)
                                 else None, texts)
        questions.append(parse_row(Question, fields, where))
    return QuestionSet(name=name or path.stem, format="ragas", questions=questions)

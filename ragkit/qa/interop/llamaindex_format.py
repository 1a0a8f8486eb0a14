"""LlamaIndex labelled RAG datasets (``LabelledRagDataset``'s ``rag_dataset.json``).

The JSON is ``{"examples": [{"query", "query_by", "reference_contexts", "reference_answer",
"reference_answer_by"}]}``, ``*_by`` being ``{"model_name", "type": "ai" | "human"}``. Written by
hand: the ``llama_dataset`` module left llama-index-core in 0.14 and this format is five fields.
Spans go through the contexts as for ragas (``contexts``). What it cannot hold: question ids
(read back as 1..N in order), relevance grades, types and an unanswerable question's source
document; a multi-part reference answer is one line per part.
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
from ragkit.qa.rows import parse_row, read_bytes


def write_llamaindex(question_set: QuestionSet, texts: Mapping[str, str], path: Path,
                     created_by: dict[str, Any] | None = None) -> Path:
    by = created_by or {"model_name": "", "type": "human"}
    examples = [
        {"query": question.text, "query_by": by,
         "reference_contexts": [context.text for context in question_contexts(question, texts)],
         "reference_answer": reference_text(question), "reference_answer_by": by}
        for question in question_set.questions
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"examples": examples}, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def read_llamaindex(path: Path, texts: Mapping[str, str], name: str | None = None) -> QuestionSet:
    data = load_json(read_bytes(path), str(path))
    if not isinstance(data, dict) or not isinstance(data.get("examples"), list):
        raise ConfigError(f"{path}: expected a LabelledRagDataset JSON object with an 'examples' list")
    questions: list[Question] = []
    for number, example in enumerate(data["examples"], start=1):
        where = f"{path}, examples[{number - 1}]"
        if not isinstance(example, dict) or not isinstance(example.get("query"), str):
            raise ConfigError(f"{where}: expected an example with a 'query' string")
        contexts = [str(c) for c in example.get("reference_contexts") or []]
        fields = question_fields(str(number), example["query"], str(example.get("reference_answer") or ""),
                                 contexts, None, texts)
        questions.append(parse_row(Question, fields, where))
    return QuestionSet(name=name or path.stem, format="llamaindex", questions=questions)

"""LlamaIndex labelled RAG datasets (``LabelledRagDataset``'s ``rag_dataset.json``).

The JSON is ``{"examples": [{"query", "query_by", "reference_contexts", "reference_answer",
"reference_answer_by"}]}``, ``*_by`` being ``{"model_name", "type": "ai" | "human"}``: what
``llama_index.core.llama_dataset.LabelledRagDataset.from_json`` reads and ``save_json`` writes.
Each context is located in the corpus as text and the reference answer found inside it where it
reads there (``contexts``). What it cannot hold: question ids
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
from ragkit.questions.interop.contexts import Sample, question_contexts, reference_text
from ragkit.questions.model import QuestionSet
from ragkit.questions.rows import read_bytes


def write_llamaindex(question_set: QuestionSet, texts: Mapping[str, str], path: Path,
                     created_by: dict[str, Any] | None = None) -> Path:
    by = created_by or {"model_name": "ragkit", "type": "human"}
    examples = [
        {"query": question.text, "query_by": by,
         "reference_contexts": [context.text for context in question_contexts(question, texts)],
         "reference_answer": reference_text(question), "reference_answer_by": by}
        for question in question_set.questions
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"examples": examples}, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def llamaindex_samples(path: Path) -> list[Sample]:
    """The samples of a ``LabelledRagDataset`` JSON file (``query_by`` and ``reference_answer_by``
    are read past: who wrote a question is not ground truth)."""
    data = load_json(read_bytes(path), str(path))
    if not isinstance(data, dict) or not isinstance(data.get("examples"), list):
        raise ConfigError(f"{path}: expected a LabelledRagDataset JSON object with an 'examples' list")
    samples = []
    for number, example in enumerate(data["examples"], start=1):
        where = f"{path}, examples[{number - 1}]"
        if not isinstance(example, dict) or not isinstance(example.get("query"), str):
            raise ConfigError(f"{where}: expected an example with a 'query' string")
        contexts = example.get("reference_contexts") or []
        if not isinstance(contexts, list):
            raise ConfigError(f"{where}: 'reference_contexts' must be a list of texts")
        samples.append(Sample(where, str(number), example["query"], str(example.get("reference_answer") or ""),
                              [str(c) for c in contexts]))
    return samples

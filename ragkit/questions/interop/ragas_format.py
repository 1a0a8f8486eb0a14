"""ragas test sets: rows of a question, its reference answer and its reference contexts.

Read as ragas 0.1 to 0.4 write them: JSONL (``EvaluationDataset.to_jsonl``, or a ``Testset``'s
rows nested under ``eval_sample``), a JSON list, CSV (``to_pandas().to_csv()``: list cells as
Python or JSON lists), Parquet, and the Hugging Face dataset layout (the folder
``datasets.Dataset.save_to_disk`` writes, its Arrow files, or a ``DatasetDict``'s splits in
order). Columns, either generation's name: the question ``user_input`` (0.2+) or ``question``
(0.1); the contexts ``reference_contexts`` or ``contexts`` (0.1 testsets); the reference
``reference`` or ``ground_truth`` (``ground_truths``, a list, the first); optional
``reference_context_ids`` (the documents the contexts came from, searched first) and ``id``.
Each context is located in the corpus as text (``contexts``).

Export writes the rows ``ragas.EvaluationDataset`` reads (``from_jsonl``, or ``from_list`` of a
``.json`` file's list), adding ``id`` (ragas ignores it, ragkit reads it back) and the contexts'
documents as ``reference_context_ids``. What ragas cannot hold: relevance grades (every located
context's document is relevance 1), the question type, and an unanswerable question's source
document; a multi-part reference is one line per part.
"""

from __future__ import annotations

import ast
import csv
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragkit.errors import ConfigError
from ragkit.json_input import JsonInputError, load_json, parse_json
from ragkit.questions.interop.contexts import Sample, question_contexts, reference_text
from ragkit.questions.model import QuestionSet
from ragkit.questions.rows import jsonl_rows, read_bytes
from ragkit.quoting import clipped

QUESTION_COLUMNS = ("user_input", "question")
CONTEXT_COLUMNS = ("reference_contexts", "contexts")
REFERENCE_COLUMNS = ("reference", "ground_truth", "ground_truths")
LIST_COLUMNS = (*CONTEXT_COLUMNS, "ground_truths", "reference_context_ids")


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
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    if suffix == ".json":
        text = json.dumps(rows, ensure_ascii=False, indent=1)
    else:
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    path.write_text(text, encoding="utf-8")
    return path


def ragas_samples(path: Path) -> list[Sample]:
    """The samples of a ragas test set in any layout the module names."""
    if path.is_dir():
        rows = [(f"{path}, row {number}", row) for number, row in enumerate(_dataset_rows(path), start=1)]
    elif path.suffix.lower() == ".parquet":
        rows = [(f"{path}, row {number}", row) for number, row in enumerate(_parquet_rows([path]), start=1)]
    elif path.suffix.lower() == ".csv":
        rows = _csv_rows(path)
    elif path.suffix.lower() == ".json":
        loaded = load_json(read_bytes(path), str(path))
        if not isinstance(loaded, list):
            raise ConfigError(f"{path}: expected a JSON list of ragas samples")
        rows = [(f"{path}, item {number}", row) for number, row in enumerate(loaded, start=1)]
    else:
        rows = [(f"{path}, line {number}", row) for number, row in jsonl_rows(path)]
    return [_sample(row, where, number) for number, (where, row) in enumerate(rows, start=1)]


def _first(sample: Mapping[str, Any], columns: tuple[str, ...]) -> Any:
    return next((sample[column] for column in columns if sample.get(column) is not None), None)


def _sample(row: Any, where: str, number: int) -> Sample:
    sample = row.get("eval_sample", row) if isinstance(row, dict) else row
    text = _first(sample, QUESTION_COLUMNS) if isinstance(sample, dict) else None
    if not isinstance(text, str):
        raise ConfigError(f"{where}: expected a ragas sample with a question ('user_input' or 'question')")
    contexts = _first(sample, CONTEXT_COLUMNS) or []
    if isinstance(contexts, str):
        contexts = [contexts]
    if not isinstance(contexts, list):
        raise ConfigError(f"{where}: reference contexts must be a list of texts, got {clipped(repr(contexts))}")
    reference = _first(sample, REFERENCE_COLUMNS)
    if isinstance(reference, list):
        reference = reference[0] if reference else ""
    ids = sample.get("reference_context_ids")
    named = [str(i) for i in ids] if isinstance(ids, list) and len(ids) == len(contexts) else None
    own_id = row.get("id") if isinstance(row, dict) and row.get("id") is not None else sample.get("id")
    return Sample(where, str(own_id if own_id is not None else number), text, str(reference or ""),
                  [str(context) for context in contexts], named)


def _csv_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        try:
            cells = list(reader)
        except csv.Error as error:
            raise ConfigError(f"{path}, line {reader.line_num}: malformed CSV: {clipped(str(error))}") from None
    rows = []
    for number, row in enumerate(cells, start=2):
        where = f"{path}, line {number}"
        rows.append((where, {key: _list_cell(value, where, key) if key in LIST_COLUMNS else value
                             for key, value in row.items() if key}))
    return rows


def _list_cell(value: str | None, where: str, column: str) -> Any:
    """A CSV cell holding a list: JSON, or the Python repr pandas writes; a plain text is one item."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if not text.startswith("["):
        return [value]
    try:
        return parse_json(text)
    except JsonInputError:
        pass  # not JSON within bounds: the Python form, whose parser refuses deep nesting itself
    try:
        parsed = ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        raise ConfigError(f"{where}: column '{column}' is not a list: {clipped(text)}") from None
    if not isinstance(parsed, list):
        raise ConfigError(f"{where}: column '{column}' is not a list: {clipped(text)}")
    return parsed


def _dataset_rows(folder: Path) -> list[dict[str, Any]]:
    """The rows of a Hugging Face dataset folder: ``save_to_disk``'s Arrow files (a DatasetDict's
    splits in its order), else the folder's Parquet files in name order."""
    import pyarrow as pa

    splits = folder / "dataset_dict.json"
    if splits.is_file():
        names = _json_object(splits).get("splits") or []
        return [row for name in names for row in _dataset_rows(folder / str(name))]
    state = folder / "state.json"
    if state.is_file():
        listed = _json_object(state).get("_data_files") or []
        files = [folder / str(item.get("filename")) for item in listed if isinstance(item, dict)]
        rows: list[dict[str, Any]] = []
        for file in files:
            with pa.memory_map(str(file)) as source:
                rows += pa.ipc.open_stream(source).read_all().to_pylist()
        return rows
    parquet = sorted(folder.rglob("*.parquet"))
    if parquet:
        return _parquet_rows(parquet)
    raise ConfigError(f"{folder}: not a Hugging Face dataset folder (no state.json, dataset_dict.json or "
                      ".parquet files)")


def _json_object(path: Path) -> dict[str, Any]:
    loaded = load_json(read_bytes(path), str(path))
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return loaded


def _parquet_rows(files: list[Path]) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for file in files:
        rows += pq.read_table(file).to_pylist()
    return rows

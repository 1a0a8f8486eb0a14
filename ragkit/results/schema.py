"""What a results folder holds: its tables, their columns and dtypes, and the names of its folders.

Every per-question row carries ``question_key``, the content key of the question it answers
(``Question.content_key``): results are keyed per (run, question content), so a run's rows are
those of the questions in its current question set, at their current content. It is null on
run-level rows and in results written before it existed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# The folder's layout: a part table's parts are ``<table>/<part>.parquet``, committed by
# ``COMMITS/<part>.json`` (ragkit.results.parts).
COMMITS = "_commits"
# A compacted part is named <run id>-all<key>: "l" is not a hex digit, so no shard part looks like one.
COMPACTED = "all"
# Merged read copies (ragkit.results.copies) and damaged parts set aside (ragkit.results.integrity).
MERGED = "_merged"
DAMAGED = "_damaged"
BASELINES_FILE = "baselines.json"
# The commit marker's key holding {table: digest} of the parts it commits.
FILES_KEY = "files"
# A commit marker's flag: its part carries the run's run-level rows (absent in older markers).
RUN_ROWS_KEY = "run_rows"

PART_TABLES = ("scores", "retrievals", "stages", "judgements", "answers")
TABLES = ("runs", *PART_TABLES, "questions")

SCHEMAS: dict[str, dict[str, str]] = {
    "scores": {"run_id": "string", "question_id": "string", "metric": "string", "value": "float64", "error": "string",
               "question_key": "string"},
    "retrievals": {
        "run_id": "string", "question_id": "string", "rank": "int64", "chunk_id": "string", "doc_id": "string",
        "start_char": "int64", "end_char": "int64", "score": "float64",
        # cl100k tokens of the chunk's text (ragkit.metrics.final_context); null in older results.
        "tokens": "int64", "question_key": "string",
    },
    "stages": {
        # seconds: what the stage costs the configuration; a reused index counts its build time and
        # a cached LLM reply the time it took to generate.
        "run_id": "string", "question_id": "string", "stage": "string", "seconds": "float64", "cached": "bool",
        # LLM usage of the stage's calls: what the replies cost when produced (also on a cache hit),
        # and backend_calls, the calls this run actually sent. invalid_replies counts replies that
        # failed the JSON schema ragkit asked for; ragas parses its own replies, so an evaluation
        # judge's unparseable reply shows as the metric's NaN + error in scores instead.
        "llm_calls": "int64", "backend_calls": "int64", "invalid_replies": "int64",
        "prompt_tokens": "int64", "completion_tokens": "int64", "question_key": "string",
    },
    # Every judge decision; question_id is empty for per-document (chunking) decisions.
    "judgements": {
        "run_id": "string", "question_id": "string", "judge": "string", "input_summary": "string",
        "decision": "string", "raw_reply": "string", "valid": "bool", "error": "string", "fell_back": "bool",
        "seconds": "float64", "cache_hit": "bool", "question_key": "string",
    },
    "answers": {
        "run_id": "string", "question_id": "string", "answer": "string", "citations": "string",
        "contexts": "string", "prompt": "string", "valid": "bool", "error": "string", "question_key": "string",
    },
    # One row per question, whatever the run: document is the question's source document (the
    # cluster statistics resample), or the question's own id when it has none.
    "questions": {
        "question_id": "string", "text": "string", "document": "string", "n_relevant_docs": "int64",
        "n_answer_groups": "int64", "question_key": "string",
    },
}
# The stages columns that count LLM usage, summed per stage and per run.
USAGE_FIELDS = ("llm_calls", "backend_calls", "invalid_replies", "prompt_tokens", "completion_tokens")
# Evaluation stages: "eval:<metric>" (the evaluation's LLM calls) and "eval" (its other work). They
# measure the answer after the fact, so latency and pipeline cost leave them out.
EVAL_STAGE = "eval"
# Score rows a metric judged r >= 2 times adds: the judge's own spread and its invalid share.
JUDGE_SD_SUFFIX = ".judge_sd"
INVALID_SHARE_SUFFIX = ".invalid_share"

_ARROW_TYPES = {"string": "string", "float64": "float64", "int64": "int64", "bool": "bool_"}


def run_of_part(part: str) -> str:
    """The run id a part belongs to: parts are named ``<run id>-<shard key>``."""
    return part.rsplit("-", 1)[0]


def is_evaluation_stage(stage: pd.Series) -> pd.Series:
    """True for the rows of ``stage`` that are ``eval`` or ``eval:<metric>``."""
    if isinstance(stage.dtype, pd.CategoricalDtype):  # decided once per category, not per row
        per_category = is_evaluation_stage(pd.Series(stage.cat.categories)).to_numpy()
        # A missing stage (code -1) picks the appended False.
        return pd.Series(np.append(per_category, False)[stage.cat.codes.to_numpy()], index=stage.index)
    # A table has a handful of distinct stages and up to millions of rows: decide per distinct one.
    codes, distinct = pd.factorize(stage.astype("string"), use_na_sentinel=True)
    names = pd.Series(distinct, dtype="string")
    per_value = ((names == EVAL_STAGE) | names.str.startswith(EVAL_STAGE + ":")).fillna(False).to_numpy(dtype=bool)
    return pd.Series(np.append(per_value, False)[codes], index=stage.index)


def empty_table(name: str) -> pd.DataFrame:
    return pd.DataFrame({col: pd.Series(dtype=dtype) for col, dtype in SCHEMAS[name].items()})


def conform(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """Exactly the table's columns in its dtypes; a column the writer did not fill is null (0 for counts)."""
    schema = SCHEMAS[name]
    frame = frame.copy()
    for column, dtype in schema.items():
        if column not in frame.columns:
            frame[column] = 0 if dtype == "int64" else (False if dtype == "bool" else None)
    frame = frame[list(schema)]
    fills = {c: 0 for c, d in schema.items() if d == "int64"} | {c: False for c, d in schema.items() if d == "bool"}
    return frame.fillna(fills).astype(schema)


def arrow_schema(name: str):
    import pyarrow as pa

    return pa.schema([(column, getattr(pa, _ARROW_TYPES[dtype])()) for column, dtype in SCHEMAS[name].items()])


def read_schema(name: str, categorical: tuple[str, ...]):
    """A part table's Arrow schema as read: given, not inferred, so parts written before a
    column existed read as nulls; ``categorical`` columns as dictionaries."""
    import pyarrow as pa

    return pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), pa.string())) if f.name in categorical else f
                      for f in arrow_schema(name)])

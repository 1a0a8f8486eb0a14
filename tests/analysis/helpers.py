"""Small builders of results tables for the analysis tests."""

from __future__ import annotations

import pandas as pd

from ragkit.analysis.loading import Results


def score_rows(rows: list[tuple]) -> pd.DataFrame:
    """rows of (run_id, question_id, metric, value[, error])."""
    records = [dict(zip(("run_id", "question_id", "metric", "value", "error"), row + (None,) * (5 - len(row))))
               for row in rows]
    return pd.DataFrame.from_records(records, columns=["run_id", "question_id", "metric", "value", "error"]).astype(
        {"run_id": "string", "question_id": "string", "metric": "string", "value": "float64", "error": "string"})


def run_row(run_id: str, chunker: str = "token", retriever: str = "bm25", top_k: int = 5, **params) -> dict:
    row = {"run_id": run_id, "experiment": "t", "corpus": "c", "corpus_id": "c1", "questions_key": "q1",
           "chunkset_id": f"cs-{chunker}", "index_id": f"ix-{chunker}-{retriever}", "chunker": chunker,
           "embedder": None, "retriever": retriever, "top_k": top_k, "retriever.top_k": top_k}
    row.update(params)
    return row


def judge_run(run_id: str, mode: str, **params) -> dict:
    """A run with the rerank judge in `mode`; parameters and the LLM only when it is on."""
    row = run_row(run_id, **{"judge.rerank": mode, "generator": False})
    if mode != "off":
        row["judge.rerank.top_n"] = params.get("top_n", 5)
    if mode == "llm":
        row["llm.rerank"] = params.get("llm", "local:smollm2")
    return row


def results_of(runs: list[dict], scores: pd.DataFrame, documents: dict[str, str] | None = None,
               stages: pd.DataFrame | None = None) -> Results:
    """Results from in-memory tables; ``documents`` maps question id -> source document."""
    runs_frame = pd.DataFrame(runs)
    runs_frame["label"] = runs_frame["run_id"]
    questions = pd.DataFrame({"question_id": list(documents or {}), "document": list((documents or {}).values())})
    tables = {"questions": questions}
    if stages is not None:
        tables["stages"] = stages
    return Results(runs_frame, scores, **tables)

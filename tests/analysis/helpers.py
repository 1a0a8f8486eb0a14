"""Small builders of results tables for the analysis tests."""

from __future__ import annotations

import numpy as np
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


def cr2_by_matrices(y: np.ndarray, x: np.ndarray, clusters: np.ndarray, contrast: np.ndarray,
                    working: np.ndarray | None = None):
    """(estimate, CR2 standard error, Satterthwaite df) of contrast' beta in the OLS fit of y on x,
    straight from the definitions (Bell and McCaffrey 2002; Imbens and Kolesar 2016): full
    leverage blocks H_gg, A_g = (I - H_gg)^(-1/2) by an eigendecomposition,
    V = M sum_g X_g' A_g e_g e_g' A_g X_g M, which is sum_g (p_g' e)^2 for
    p_g = (I - H)_g' A_g X_g M c; under errors of covariance ``working`` (N x N; the identity when
    None) its Satterthwaite df is 2 E[V]^2 / Var[V] = tr(P W P')^2 / tr((P W P')^2), P's rows p_g."""
    m = np.linalg.inv(x.T @ x)
    beta = m @ x.T @ y
    hat = x @ m @ x.T
    residual = y - x @ beta
    identity = np.eye(len(y))
    meat = np.zeros((x.shape[1], x.shape[1]))
    shares = []
    for cluster in np.unique(clusters):
        rows = np.flatnonzero(clusters == cluster)
        values, vectors = np.linalg.eigh(identity[np.ix_(rows, rows)] - hat[np.ix_(rows, rows)])
        adjust = vectors @ np.diag(values ** -0.5) @ vectors.T
        score = x[rows].T @ adjust @ residual[rows]
        meat += np.outer(score, score)
        shares.append((identity - hat)[rows].T @ adjust @ x[rows] @ m @ contrast)
    variance = contrast @ m @ meat @ m @ contrast
    p = np.array(shares)
    gram = p @ (identity if working is None else working) @ p.T
    return contrast @ beta, np.sqrt(variance), np.trace(gram) ** 2 / np.sum(gram ** 2)


def random_effects_working_model(y: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """Imbens and Kolesar's working covariance for a mean: (1 - rho) I + rho within clusters, rho
    the OLS residuals' mean product over pairs of distinct questions of one cluster divided by
    their mean square, clipped to [0, 1] (pair by pair here, with Python loops)."""
    residual = y - y.mean()
    products, pairs = 0.0, 0
    for i in range(len(y)):
        for j in range(len(y)):
            if i != j and clusters[i] == clusters[j]:
                products += residual[i] * residual[j]
                pairs += 1
    rho = min(max(products / pairs / np.mean(residual ** 2), 0.0), 1.0) if pairs else 0.0
    same = clusters[:, None] == clusters[None, :]
    return (1 - rho) * np.eye(len(y)) + rho * same

"""The run summary: one row per run, mean of the headline metrics, latency and error counts."""

from __future__ import annotations

import pandas as pd

from ragkit.results import ResultStore

HEADLINE_METRICS = (
    "recall@5", "recall@10", "ndcg@10", "mrr", "span_recall@5", "span_recall@10", "span_mrr", "groundedness",
)


COMPONENT_KINDS = ("chunker", "embedder", "retriever")


def run_labels(runs: pd.DataFrame) -> pd.Series:
    """Short readable names, e.g. "token(chunk_size=256) · minilm · bm25 · k=5".

    Only parameters that differ between runs of the same component type are shown, so labels
    stay short yet tell every run apart.
    """
    varying: dict[tuple[str, str], list[str]] = {}
    for kind in COMPONENT_KINDS:
        columns = [c for c in runs.columns if c.startswith(f"{kind}.") and c != f"{kind}.top_k"]
        for component, group in runs.groupby(kind, dropna=False):
            varying[(kind, component)] = [
                c for c in columns if group[c].astype("string").nunique(dropna=False) > 1
            ]

    def label(row: pd.Series) -> str:
        parts = []
        for kind in COMPONENT_KINDS:
            component = row[kind]
            if pd.isna(component):
                parts.append("-")
                continue
            shown = [f"{c.split('.', 1)[1]}={row[c]}" for c in varying.get((kind, component), [])]
            parts.append(f"{component}({', '.join(shown)})" if shown else str(component))
        parts.append(f"k={row['top_k']}")
        # Judges that are off are left out, so a judge-free run reads as plain retrieval.
        parts += [f"+{c.split('.', 1)[1]}({row[c]})" for c in judge_columns
                  if pd.notna(row[c]) and row[c] != "off"]
        if bool(row.get("generator", False)) is True:
            parts.append("+answers")
        return " · ".join(parts)

    judge_columns = sorted(c for c in runs.columns if c.startswith("judge.") and c.count(".") == 1)

    return runs.apply(label, axis=1) if not runs.empty else pd.Series(dtype="string")


def summary_frame(
    runs: pd.DataFrame, scores: pd.DataFrame, stages: pd.DataFrame, metrics: tuple[str, ...] = HEADLINE_METRICS,
    judgements: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per run: label, headline metric means, question and error counts, retrieve ms;
    with LLM stages, LLM calls and tokens per question and the share of invalid replies per judge."""
    if runs.empty:
        return pd.DataFrame()
    labels = runs["label"] if "label" in runs.columns else run_labels(runs)
    table = runs.assign(label=labels).set_index("run_id")[["label"]].copy()
    valid = scores[scores["error"].isna() & scores["value"].notna()]
    means = valid.pivot_table(index="run_id", columns="metric", values="value", aggfunc="mean", observed=True)
    for metric in metrics:
        if metric in means.columns:
            table[metric] = means[metric]
    table["questions"] = scores.groupby("run_id", observed=True)["question_id"].nunique()
    table["errors"] = scores[scores["error"].notna()].groupby("run_id", observed=True)["question_id"].nunique()
    table["retrieve_ms"] = stages[stages["stage"] == "retrieve"].groupby("run_id", observed=True)["seconds"].mean() * 1000
    table = table.fillna({"questions": 0, "errors": 0}).astype({"questions": int, "errors": int})
    _add_llm_columns(table, stages, judgements)
    return table.reset_index().sort_values("label", kind="stable").reset_index(drop=True)


def _add_llm_columns(table: pd.DataFrame, stages: pd.DataFrame, judgements: pd.DataFrame | None) -> None:
    """Per run: total ms per question, LLM calls and tokens per question, invalid-reply share per judge."""
    per_question = stages[stages["question_id"].notna()]
    if per_question.empty:
        return
    questions = per_question.groupby("run_id", observed=True)["question_id"].nunique()
    table["latency_ms"] = per_question.groupby("run_id", observed=True)["seconds"].sum() / questions * 1000
    if "llm_calls" in stages.columns and stages["llm_calls"].fillna(0).sum() > 0:
        totals = stages.groupby("run_id", observed=True)[["llm_calls", "backend_calls", "prompt_tokens",
                                                          "completion_tokens"]].sum()
        table["llm_calls/q"] = totals["llm_calls"] / questions
        table["tokens/q"] = (totals["prompt_tokens"] + totals["completion_tokens"]) / questions
        table["backend_calls"] = totals["backend_calls"].reindex(table.index).fillna(0).astype(int)
    if judgements is not None and not judgements.empty:
        invalid = (~judgements["valid"].astype(bool)).groupby([judgements["run_id"], judgements["judge"]],
                                                              observed=True).mean().unstack("judge")
        for judge in sorted(invalid.columns):
            table[f"invalid:{judge}"] = invalid[judge]


def summary_table(store: ResultStore, metrics: tuple[str, ...] = HEADLINE_METRICS) -> pd.DataFrame:
    return summary_frame(store.read("runs"), store.read("scores"), store.read("stages"), metrics,
                         store.read("judgements"))


def format_summary(table: pd.DataFrame) -> str:
    if table.empty:
        return "(no runs)"
    shown = table.drop(columns=["run_id"]).copy()
    return shown.to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-")

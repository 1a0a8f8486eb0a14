"""The run summary: one row per run, mean of the headline metrics, latency and error counts."""

from __future__ import annotations

import pandas as pd

from ragkit.results import ResultStore, is_evaluation_stage

HEADLINE_METRICS = (
    "recall@5", "recall@10", "ndcg@10", "mrr", "span_recall@5", "span_recall@10", "span_mrr", "groundedness",
    "faithfulness", "answer_relevancy", "embedding_groundedness",
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
    # Evaluation (eval, eval:<metric>) measures the answer; it is not part of answering.
    evaluating = is_evaluation_stage(per_question["stage"])
    pipeline = per_question[~evaluating]
    table["latency_ms"] = pipeline.groupby("run_id", observed=True)["seconds"].sum() / questions * 1000
    if evaluating.any():
        table["eval_ms"] = per_question[evaluating].groupby("run_id", observed=True)["seconds"].sum() / questions * 1000
    if "llm_calls" in stages.columns and stages["llm_calls"].fillna(0).sum() > 0:
        usage = ["llm_calls", "backend_calls", "prompt_tokens", "completion_tokens"]
        evaluating_all = is_evaluation_stage(stages["stage"])
        totals = stages[~evaluating_all].groupby("run_id", observed=True)[usage].sum()
        table["llm_calls/q"] = totals["llm_calls"] / questions
        table["tokens/q"] = (totals["prompt_tokens"] + totals["completion_tokens"]) / questions
        evaluation = stages[evaluating_all].groupby("run_id", observed=True)[usage].sum()
        if evaluation["llm_calls"].sum() > 0:
            table["eval_tokens/q"] = (evaluation["prompt_tokens"] + evaluation["completion_tokens"]) / questions
        sent = stages.groupby("run_id", observed=True)["backend_calls"].sum()
        table["backend_calls"] = sent.reindex(table.index).fillna(0).astype(int)
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


def metric_failures(scores: pd.DataFrame) -> pd.DataFrame:
    """Per metric that failed somewhere: questions scored, questions failed, the commonest reason.

    A failed metric is NaN with its reason in `error` (a timeout, an unparseable judge reply),
    never 0, so this is where those questions are accounted for."""
    columns = ["metric", "scored", "failed", "top_reason", "reasons"]
    failed = scores["error"].notna() | scores["value"].isna()
    if not failed.any():
        return pd.DataFrame(columns=columns)
    metrics = scores.loc[failed, "metric"].astype(str).unique()
    rows = []
    for metric in sorted(metrics):
        mine = scores[scores["metric"].astype(str) == metric]
        bad = mine[mine["error"].notna() | mine["value"].isna()]
        # Reasons quote the judge's reply; keep their first clause so equal causes count together.
        reasons = bad["error"].fillna("no value").astype(str).str.split(":").str[0].value_counts()
        rows.append({"metric": metric, "scored": int(len(mine) - len(bad)), "failed": int(len(bad)),
                     "top_reason": reasons.index[0], "reasons": int(len(reasons))})
    return pd.DataFrame(rows, columns=columns)


def format_failures(table: pd.DataFrame) -> str:
    if table.empty:
        return ""
    return "metrics not computed for some questions (NaN with a reason, never 0):\n" + table.to_string(index=False)

"""The run summary (`ragkit summary`, the end of `ragkit run`, the export's first sheet): one row
per run with the headline metric means, how many questions were asked and how many failed,
latency and LLM usage."""

from __future__ import annotations

import pandas as pd

from ragkit.analysis.means import metric_means, valid_mask
from ragkit.analysis.run_names import run_labels
from ragkit.metrics.names import GENERATION_METRICS, HEADLINE_METRICS
from ragkit.results import ResultStore
from ragkit.results.schema import is_evaluation_stage

SUMMARY_METRICS = tuple(dict.fromkeys((*HEADLINE_METRICS, *GENERATION_METRICS)))


def summary_frame(runs: pd.DataFrame, scores: pd.DataFrame, stages: pd.DataFrame,
                  metrics: tuple[str, ...] = SUMMARY_METRICS, judgements: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run: label, the mean of each metric scored (over the questions that scored it),
    questions asked, questions with a failed metric, retrieve ms; with LLM stages, LLM calls and
    tokens per question and the share of invalid replies per judge."""
    if runs.empty:
        return pd.DataFrame()
    labels = runs["label"] if "label" in runs.columns else run_labels(runs)
    table = runs.assign(label=labels).set_index("run_id")[["label"]].copy()
    scored = set(scores["metric"].astype(str))  # once: a set of every score row per metric took a second
    means = metric_means(scores, [m for m in metrics if m in scored])
    wide = means.pivot_table(index="run_id", columns="metric", values="mean", observed=True)
    for metric in metrics:
        if metric in wide.columns:
            table[metric] = wide[metric]
    table["questions"] = scores.groupby("run_id", observed=True)["question_id"].nunique()
    failed = scores[~valid_mask(scores) & scores["metric"].isin(HEADLINE_METRICS)]
    table["failed"] = failed.groupby("run_id", observed=True)["question_id"].nunique()
    table["errors"] = scores[scores["error"].notna()].groupby("run_id", observed=True)["question_id"].nunique()
    retrieve = stages[stages["stage"] == "retrieve"]
    table["retrieve_ms"] = retrieve.groupby("run_id", observed=True)["seconds"].mean() * 1000
    table = table.fillna({"questions": 0, "failed": 0, "errors": 0}).astype(
        {"questions": int, "failed": int, "errors": int})
    _add_llm_columns(table, stages, judgements)
    return table.reset_index().sort_values("label", kind="stable").reset_index(drop=True)


def _add_llm_columns(table: pd.DataFrame, stages: pd.DataFrame, judgements: pd.DataFrame | None) -> None:
    """Per run: total ms per question, LLM calls and tokens per question, invalid-reply share per judge."""
    per_question = stages[stages["question_id"].notna()]
    if per_question.empty:
        return
    questions = per_question.groupby("run_id", observed=True)["question_id"].nunique()
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


def summary_table(store: ResultStore, metrics: tuple[str, ...] = SUMMARY_METRICS) -> pd.DataFrame:
    return summary_frame(store.read("runs"), store.read("scores"), store.read("stages"), metrics,
                         store.read("judgements"))


def format_summary(table: pd.DataFrame) -> str:
    """The summary as text, each run's id beside its label: `--runs` of `ragkit labels pool` and
    `ragkit export` take either (or a unique prefix of the id)."""
    if table.empty:
        return "(no runs)"
    columns = ["label", "run_id", *[c for c in table.columns if c not in ("label", "run_id")]]
    return table[columns].to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-")

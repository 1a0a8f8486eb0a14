"""What answering costs: latency per stage, LLM calls and tokens, and what evaluation cost apart.

- Per-question stages (retrieve, judges, generate) are averaged over a run's questions. Run-level
  stages (question_id empty: chunk, embed, index) are one-off build costs shared by the runs that
  reuse a chunk set or index: reported as totals (`per_question` False), never amortised.
- Evaluation stages (``eval:<metric>``, the evaluation's LLM calls, and ``eval``, its other work)
  measure the answer after the fact: latency, the Pareto front and pipeline LLM usage leave them
  out; evaluation_cost shows them on their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ragkit.analysis.means import valid_mask
from ragkit.results import USAGE_FIELDS, is_evaluation_stage

if TYPE_CHECKING:
    from ragkit.analysis.loading import Results

LATENCY_METRIC = "ms/question"


def pipeline_stages(stages: pd.DataFrame) -> pd.DataFrame:
    """The stages a question costs when the pipeline serves it: every stage but ``eval`` and ``eval:*``."""
    return stages[~is_evaluation_stage(stages["stage"])]


def latency_by_stage(stages: pd.DataFrame) -> pd.DataFrame:
    """[run_id, stage, seconds, per_question]: per-question stages as a mean per question,
    run-level build stages (no question id) as their total seconds with per_question False.

    A stage's mean is its total over the run's questions divided by the number of questions the
    run answered, so a stage that runs twice in a question (a correction round) counts twice and
    one that only some questions need (a correction at all) is not inflated by the others."""
    per_question = stages["question_id"].notna()
    asked = stages[per_question]
    answered = asked.groupby("run_id", observed=True)["question_id"].nunique()
    totals = asked.groupby(["run_id", "stage"], observed=True)["seconds"].sum().reset_index()
    question_level = totals.assign(seconds=totals["seconds"] / totals["run_id"].map(answered).astype(float),
                                   per_question=True)
    build_level = (stages[~per_question].groupby(["run_id", "stage"], observed=True)["seconds"].sum()
                   .reset_index().assign(per_question=False))
    table = pd.concat([question_level, build_level], ignore_index=True)[["run_id", "stage", "seconds", "per_question"]]
    return table.astype({"run_id": object, "stage": object})  # plain labels for charts and tables


def run_latency(stages: pd.DataFrame) -> pd.Series:
    """Mean pipeline seconds per question per run: the sum of the per-question stage means of
    the pipeline's stages (a stage's mean over the questions the pipeline answered)."""
    return latency_per_run(latency_by_stage(pipeline_stages(stages)))


def shared_stage_latency(results: Results) -> pd.DataFrame:
    """``latency_by_stage`` of these runs' pipeline stages, computed once for every view of the
    same runs (``Results.derived``): the latency chart, and the per-run latency of the
    comparisons and the Pareto scatter (``latency_per_run``)."""
    return results.derived("stage_latency", lambda: latency_by_stage(pipeline_stages(results.stages)))


def latency_per_run(latency: pd.DataFrame) -> pd.Series:
    """``run_latency`` from the pipeline's ``latency_by_stage`` table."""
    return latency[latency["per_question"]].groupby("run_id", observed=True)["seconds"].sum()


def latency_scores(stages: pd.DataFrame) -> pd.DataFrame:
    """Each question's pipeline time in ms as score rows (metric ``ms/question``), so that
    metric_means gives latency an interval like any metric. Build stages are left out."""
    served = pipeline_stages(stages)
    served = served[served["question_id"].notna()]
    totals = served.groupby(["run_id", "question_id"], observed=True)["seconds"].sum() * 1000
    return totals.rename("value").reset_index().assign(metric=LATENCY_METRIC, error=pd.NA)


def llm_usage(stages: pd.DataFrame) -> pd.DataFrame:
    """Per run: the pipeline's LLM calls, invalid replies and tokens (evaluation left out); empty
    when the runs made no pipeline LLM call."""
    usage = pipeline_stages(stages)[["run_id", *USAGE_FIELDS]].fillna(dict.fromkeys(USAGE_FIELDS, 0))
    if not usage[list(USAGE_FIELDS)].to_numpy().any():
        return pd.DataFrame()
    return usage.groupby("run_id", observed=True).sum().astype("int64").reset_index().astype({"run_id": object})


def evaluation_cost(stages: pd.DataFrame) -> pd.DataFrame:
    """Per run and evaluation stage: seconds, LLM calls, invalid replies and tokens; empty when
    these runs were not evaluated."""
    columns = ["seconds", *USAGE_FIELDS]
    evaluated = stages[is_evaluation_stage(stages["stage"])].fillna(dict.fromkeys(columns, 0))
    if evaluated.empty:
        return pd.DataFrame()
    cost = evaluated.astype({"stage": "string"}).groupby(["run_id", "stage"], observed=True)[columns].sum()
    return cost.astype(dict.fromkeys(USAGE_FIELDS, "int64")).reset_index().astype({"run_id": object})


def llm_tokens_per_question(stages: pd.DataFrame) -> pd.Series:
    """Per run: prompt + completion tokens of the pipeline's per-question stages, per question."""
    served = pipeline_stages(stages)
    served = served[served["question_id"].notna()]
    tokens = served["prompt_tokens"].fillna(0) + served["completion_tokens"].fillna(0)
    per_run = served.assign(tokens=tokens).groupby("run_id", observed=True)
    return per_run["tokens"].sum() / per_run["question_id"].nunique()


def pareto_front(frame: pd.DataFrame, quality: str, cost: str) -> pd.Series:
    """True for rows no other row beats: at least as good on both quality (higher) and cost
    (lower) and strictly better on one. Rows with a missing value are never on the front."""
    q = frame[quality].to_numpy(dtype="float64")
    c = frame[cost].to_numpy(dtype="float64")
    known = ~(np.isnan(q) | np.isnan(c))
    at_least_as_good = (q[:, None] >= q[None, :]) & (c[:, None] <= c[None, :])
    strictly_better = (q[:, None] > q[None, :]) | (c[:, None] < c[None, :])
    dominates = at_least_as_good & strictly_better & known[:, None]
    dominated = dominates.any(axis=0)
    return pd.Series(known & ~dominated, index=frame.index, name="pareto")


def quality_vs_latency(scores: pd.DataFrame, stages: pd.DataFrame, metric: str) -> pd.DataFrame:
    """[run_id, quality, latency_ms, pareto] for the quality-vs-latency scatter."""
    valid = scores[valid_mask(scores) & (scores["metric"] == metric)]
    quality = valid.groupby("run_id", observed=True)["value"].mean()
    return quality_front(quality, run_latency(stages))


def quality_front(quality: pd.Series, latency_s: pd.Series) -> pd.DataFrame:
    """[run_id, quality, latency_ms, pareto] from per-run quality and pipeline seconds per question."""
    quality = quality.rename("quality").set_axis(quality.index.astype(str))
    latency = (latency_s * 1000).rename("latency_ms").set_axis(latency_s.index.astype(str))
    frame = pd.concat([quality, latency], axis=1).rename_axis("run_id").reset_index()
    frame["pareto"] = pareto_front(frame, "quality", "latency_ms")
    return frame

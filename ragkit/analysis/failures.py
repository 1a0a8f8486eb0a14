"""Where the failed questions are: per metric, how many were scored and failed and why.

A failed metric is NaN with its reason in `error` (the pipeline raised, a timeout, an
unparseable judge reply), never 0; these tables account for every such row. Reasons are grouped
by the text before their first colon ("LLM call failed", "timeout after 60 s"), since the rest
often quotes the judge's reply.
"""

from __future__ import annotations

import pandas as pd

from ragkit.analysis.means import valid_mask
from ragkit.metrics.names import GENERATION_METRICS
from ragkit.results.schema import JUDGE_SD_SUFFIX

NO_REASON = "no value"
# Reasons shown per metric on the Compare page.
TOP_REASONS = 3


def _reason(messages: pd.Series) -> pd.Series:
    return messages.astype("string").fillna(NO_REASON).str.split(":", n=1).str[0]


def metric_failures(scores: pd.DataFrame) -> pd.DataFrame:
    """Per metric that failed somewhere: questions scored, questions failed, the commonest reason."""
    columns = ["metric", "scored", "failed", "top_reason", "reasons"]
    failed = ~valid_mask(scores)
    if not failed.any():
        return pd.DataFrame(columns=columns)
    rows = []
    metric = scores["metric"].astype(str)
    for name in sorted(metric[failed].unique()):
        mine = scores[metric == name]
        bad = mine[~valid_mask(mine)]
        reasons = _reason(bad["error"]).value_counts()
        rows.append({"metric": name, "scored": int(len(mine) - len(bad)), "failed": len(bad),
                     "top_reason": reasons.index[0], "reasons": len(reasons)})
    return pd.DataFrame(rows, columns=columns)


def format_failures(table: pd.DataFrame) -> str:
    if table.empty:
        return ""
    return "metrics not computed for some questions (NaN with a reason, never 0):\n" + table.to_string(index=False)


def scored_and_failed(scores: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Per metric, in the order given: how many runs scored it, questions scored and failed summed
    over those runs, the failed share and how many runs had a failure; and, when questions were
    judged r >= 2 times, the judge's mean standard deviation across repeats."""
    chosen = scores[scores["metric"].isin(metrics)]
    scored = valid_mask(chosen)
    per_run = chosen.assign(scored=scored, failed=~scored).groupby(["metric", "run_id"], observed=True)
    table = per_run[["scored", "failed"]].sum().groupby(level="metric", observed=True).agg(
        runs=("scored", "size"), scored=("scored", "sum"), failed=("failed", "sum"),
        runs_with_failures=("failed", lambda failed: int((failed > 0).sum())),
    )
    table = table.reindex([metric for metric in metrics if metric in table.index])
    table["failed_share"] = table["failed"] / (table["scored"] + table["failed"])
    spreads = scores[scores["metric"].isin([metric + JUDGE_SD_SUFFIX for metric in table.index])]
    spreads = spreads[valid_mask(spreads)]
    if not spreads.empty:
        base = spreads["metric"].astype("string").str.removesuffix(JUDGE_SD_SUFFIX)
        table["judge_sd"] = spreads.groupby(base.to_numpy())["value"].mean().reindex(table.index)
    return table.rename_axis("metric").reset_index()


def failure_reasons(scores: pd.DataFrame, metrics: list[str], top: int = TOP_REASONS) -> pd.DataFrame:
    """The most common reasons each metric failed: [metric, reason, count, example] (one full message)."""
    chosen = scores[scores["metric"].isin(metrics)]
    failed = chosen[~valid_mask(chosen)]
    if failed.empty:
        return pd.DataFrame(columns=["metric", "reason", "count", "example"])
    messages = failed["error"].astype("string").fillna(NO_REASON)
    frame = pd.DataFrame({"metric": failed["metric"].astype("string").to_numpy(),
                          "reason": _reason(failed["error"]).to_numpy(), "example": messages.to_numpy()})
    table = frame.groupby(["metric", "reason"], sort=False).agg(count=("example", "size"), example=("example", "first"))
    table = table.reset_index()
    order = {metric: position for position, metric in enumerate(metrics)}
    table = table.sort_values(["metric", "count"], key=lambda c: c.map(order) if c.name == "metric" else -c,
                              kind="stable")
    return table.groupby("metric", sort=False).head(top).reset_index(drop=True)


def question_verdicts(scores: pd.DataFrame) -> pd.DataFrame:
    """One run's generation-metric rows for one question as [metric, value, judge_sd, reason]:
    the value (NaN when it could not be computed), the judge's spread across repeats when it was
    repeated, and the reason (a failed metric's cause, or which repeats failed)."""
    metric = scores["metric"].astype("string")
    base = scores[metric.isin(GENERATION_METRICS)]
    if base.empty:
        return pd.DataFrame(columns=["metric", "value", "reason"])
    table = pd.DataFrame({"metric": base["metric"].astype("string").to_numpy(), "value": base["value"].to_numpy(),
                          "reason": base["error"].astype("string").to_numpy()})
    spreads = scores[metric.str.endswith(JUDGE_SD_SUFFIX).fillna(False)]
    if not spreads.empty:
        by_metric = dict(zip(spreads["metric"].astype("string").str.removesuffix(JUDGE_SD_SUFFIX), spreads["value"]))
        table.insert(2, "judge_sd", table["metric"].map(by_metric))
    order = {name: position for position, name in enumerate(GENERATION_METRICS)}
    return table.sort_values("metric", key=lambda c: c.map(order), kind="stable").reset_index(drop=True)

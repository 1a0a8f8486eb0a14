"""Answer quality as the Compare and drill-down pages show it: which scores are generation
metrics, why some could not be computed, judge on/off pairs, and what evaluation cost apart from
the pipeline.

Pure pandas over the results tables; dashboard/state.py caches what these return.

- Generation metrics follow the scores convention of ragkit.analysis: a row with an error or no
  value failed, and is counted, never averaged.
- Stages ``eval:<metric>`` (the evaluation's LLM calls: ragas judges) and ``eval`` (its other work:
  embeddings, string metrics) measure the answer, they are not part of answering: latency, the
  Pareto front and LLM usage leave them out; the evaluation cost is shown on its own.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from ragkit import analysis, charts
from ragkit.report import GENERATION_METRICS as CHARTED_METRICS
from ragkit.results import JUDGE_SD_SUFFIX, USAGE_FIELDS, is_evaluation_stage

# Every generation metric a run can score, in reading order: ragas' LLM-judged metrics, ragas'
# non-LLM forms, answer overlap, our embedding score (ragkit.metrics.generation.METRICS, named
# here because importing that module loads LlamaIndex), the pipeline's own groundedness judge.
GENERATION_METRICS = (
    "faithfulness", "answer_relevancy", "context_precision", "context_recall", "nonllm_context_precision",
    "nonllm_context_recall", "answer_overlap", "embedding_groundedness", "groundedness",
)
JUDGE_FACTOR_PREFIX = "judge."
# A runs column judge_effects adds: which group of judge-toggled runs a run belongs to.
LINKED_GROUP_COLUMN = "linked by judge toggles"
LATENCY_METRIC = "ms/question"
# As ragkit.summary.metric_failures names a failure without a reason.
NO_REASON = "no value"
# Reasons shown per metric on the Compare page.
TOP_REASONS = 3
JUDGE_EFFECT_COLUMNS = ["run_a", "run_b", "factor", "value_a", "value_b", "metric", "mean_diff", "ci_low", "ci_high",
                        "p_value", "p_holm", "n", "wins", "ties", "losses", "latency_ms_diff", "tokens_diff"]


def generation_metrics(metrics: Iterable[str], charted_only: bool = False) -> list[str]:
    """The generation metrics among ``metrics``, in reading order; with ``charted_only`` only the
    ones the Compare page charts by default (faithfulness beside its embedding and judge stand-ins)."""
    present = set(metrics)
    return [m for m in (CHARTED_METRICS if charted_only else GENERATION_METRICS) if m in present]


def pipeline_stages(stages: pd.DataFrame) -> pd.DataFrame:
    """The stages a question costs when the pipeline serves it: every stage but ``eval`` and ``eval:*``."""
    return stages[~is_evaluation_stage(stages["stage"])]


def latency_scores(stages: pd.DataFrame) -> pd.DataFrame:
    """Each question's pipeline time in ms as score rows (metric ``ms/question``), so that
    analysis.metric_means gives latency a bootstrap CI over questions like any metric. Run-level
    build stages (no question id) are left out, as in analysis.latency_by_stage."""
    served = pipeline_stages(stages)
    served = served[served["question_id"].notna()]
    totals = served.groupby(["run_id", "question_id"], observed=True)["seconds"].sum() * 1000
    return totals.rename("value").reset_index().assign(metric=LATENCY_METRIC, error=pd.NA)


def llm_usage(stages: pd.DataFrame) -> pd.DataFrame:
    """Per run: the pipeline's LLM calls, invalid replies and tokens (evaluation left out); empty
    when the runs made no pipeline LLM call."""
    usage = pipeline_stages(stages)[["run_id", *USAGE_FIELDS]].fillna(0)
    if not usage[list(USAGE_FIELDS)].to_numpy().any():
        return pd.DataFrame()
    return usage.groupby("run_id", observed=True).sum().astype("int64").reset_index()


def evaluation_cost(stages: pd.DataFrame) -> pd.DataFrame:
    """Per run and evaluation stage (``eval:<metric>``, and ``eval`` for the rest): seconds, LLM
    calls, invalid replies and tokens; empty when these runs were not evaluated."""
    columns = ["seconds", *USAGE_FIELDS]
    evaluated = stages[is_evaluation_stage(stages["stage"])].fillna({column: 0 for column in columns})
    if evaluated.empty:
        return pd.DataFrame()
    cost = evaluated.astype({"stage": "string"}).groupby(["run_id", "stage"], observed=True)[columns].sum()
    return cost.astype({field: "int64" for field in USAGE_FIELDS}).reset_index()


def llm_tokens_per_question(stages: pd.DataFrame) -> pd.Series:
    """Per run: prompt + completion tokens of the pipeline's per-question stages, per question."""
    served = pipeline_stages(stages)
    served = served[served["question_id"].notna()]
    tokens = served["prompt_tokens"].fillna(0) + served["completion_tokens"].fillna(0)
    per_run = served.assign(tokens=tokens).groupby("run_id", observed=True)
    return per_run["tokens"].sum() / per_run["question_id"].nunique()


def scored_and_failed(scores: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Per metric, in the order given: how many runs scored it, questions scored and failed summed
    over those runs, the failed share and how many runs had a failure; and, when questions were
    judged r >= 2 times, the judge's mean standard deviation across repeats."""
    chosen = scores[scores["metric"].isin(metrics)]
    scored = chosen["error"].isna() & chosen["value"].notna()  # as analysis.metric_means counts
    per_run = chosen.assign(scored=scored, failed=~scored).groupby(["metric", "run_id"], observed=True)
    table = per_run[["scored", "failed"]].sum().groupby(level="metric", observed=True).agg(
        runs=("scored", "size"), scored=("scored", "sum"), failed=("failed", "sum"),
        runs_with_failures=("failed", lambda failed: int((failed > 0).sum())),
    )
    table = table.reindex([metric for metric in metrics if metric in table.index])
    table["failed_share"] = table["failed"] / (table["scored"] + table["failed"])
    spreads = scores[scores["metric"].isin([metric + JUDGE_SD_SUFFIX for metric in table.index])]
    spreads = spreads[spreads["error"].isna() & spreads["value"].notna()]
    if not spreads.empty:
        base = spreads["metric"].astype("string").str.removesuffix(JUDGE_SD_SUFFIX)
        table["judge_sd"] = spreads.groupby(base.to_numpy())["value"].mean().reindex(table.index)
    return table.rename_axis("metric").reset_index()


def failure_reasons(scores: pd.DataFrame, metrics: list[str], top: int = TOP_REASONS) -> pd.DataFrame:
    """The most common reasons each metric failed: [metric, reason, count, example].

    Reasons are grouped by what comes before their first colon ("LLM call failed", "timeout after
    60 s"), as ragkit.summary.metric_failures groups them, since the rest often quotes the judge's
    reply; `example` is one full message.
    """
    chosen = scores[scores["metric"].isin(metrics)]
    failed = chosen[chosen["error"].notna() | chosen["value"].isna()]
    if failed.empty:
        return pd.DataFrame(columns=["metric", "reason", "count", "example"])
    messages = failed["error"].astype("string").fillna(NO_REASON)
    frame = pd.DataFrame({"metric": failed["metric"].astype("string").to_numpy(),
                          "reason": messages.str.split(":", n=1).str[0].to_numpy(), "example": messages.to_numpy()})
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


def judge_pairs(runs: pd.DataFrame) -> pd.DataFrame:
    """The single-factor pairs (analysis.single_factor_pairs) that toggle a judge's mode."""
    pairs = analysis.single_factor_pairs(runs)
    return pairs[pairs["factor"].str.startswith(JUDGE_FACTOR_PREFIX)].reset_index(drop=True)


def _linked_runs(pairs: pd.DataFrame) -> list[list[str]]:
    """The groups of runs that the pairs link, directly or through other runs."""
    groups: dict[str, set[str]] = {}
    for run_a, run_b in zip(pairs["run_a"], pairs["run_b"]):
        merged = groups.get(run_a, {run_a}) | groups.get(run_b, {run_b})
        groups.update(dict.fromkeys(merged, merged))
    return [sorted(group) for group in {id(group): group for group in groups.values()}.values()]


def judge_effects(scores: pd.DataFrame, stages: pd.DataFrame, runs: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Every judge on/off pair x metric: analysis.factor_effects' paired difference b - a with its
    95% CI, permutation p-value and wins/ties/losses; `p_holm` over exactly these rows; and what
    turning the judge on cost per question, in pipeline ms and LLM tokens (evaluation left out).
    Rows go judge by judge and pair by pair, metrics in the order given."""
    pairs = judge_pairs(runs)
    if pairs.empty or not metrics:
        return pd.DataFrame(columns=JUDGE_EFFECT_COLUMNS)
    served = pipeline_stages(stages)
    # Runs linked only by judge toggles share every other setting. Naming each such group in a
    # column of its own makes runs of different groups differ in two factors, so factor_effects
    # tests exactly the judge pairs, in one vectorised pass, rather than every single-factor pair
    # of the grid (several times more in a 50-run grid), and its Holm correction covers exactly
    # the rows returned.
    group_of = {run_id: number for number, group in enumerate(_linked_runs(pairs)) for run_id in group}
    linked = runs[runs["run_id"].isin(group_of)]
    effects = analysis.factor_effects(scores[scores["run_id"].isin(group_of)], served, linked.assign(
        **{LINKED_GROUP_COLUMN: linked["run_id"].map(group_of)}), metrics)
    order = {metric: position for position, metric in enumerate(metrics)}
    effects = effects.assign(metric_order=effects["metric"].map(order)).sort_values(
        ["factor", "run_a", "run_b", "metric_order"], kind="stable").reset_index(drop=True)
    tokens = llm_tokens_per_question(served)
    effects["tokens_diff"] = effects["run_b"].map(tokens) - effects["run_a"].map(tokens)
    return effects[JUDGE_EFFECT_COLUMNS]


def judge_table(effects: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """judge_effects as the Compare page lists it: the pair as the forest chart names it, the
    statistics, W/T/L in one column, the costs, then the two runs' labels."""
    labels = runs.set_index("run_id")["label"]
    return pd.DataFrame({
        "judge pair": charts.pair_names(effects), "metric": effects["metric"], "Δ mean": effects["mean_diff"],
        "CI low": effects["ci_low"], "CI high": effects["ci_high"], "p": effects["p_value"],
        "p (Holm)": effects["p_holm"],
        "W/T/L": [f"{w}/{t}/{l}" for w, t, l in zip(effects["wins"], effects["ties"], effects["losses"])],
        "n": effects["n"], "Δ ms/question": effects["latency_ms_diff"], "Δ LLM tokens/question": effects["tokens_diff"],
        "run a": effects["run_a"].map(labels), "run b": effects["run_b"].map(labels),
    })


def judge_table_note(rows: int) -> str:
    """What the judge table's columns mean, and how far Holm over ``rows`` comparisons can go."""
    note = ("Δ = b - a over the questions both runs scored, b in the judge's stronger mode (off < heuristic < llm); "
            "95% paired bootstrap CI. p: two-sided paired permutation test "
            f"({analysis.PERMUTATIONS} sign flips; every sign pattern up to 9 questions). p (Holm): corrected over "
            f"the {rows} rows shown here, so comparing more metrics or runs raises it. W/T/L: questions where b won, "
            "tied, lost. Costs: pipeline ms and LLM tokens per question, evaluation left out.")
    # A resampled two-sided p is at least 2 / (resamples + 1), and Holm multiplies the smallest by rows.
    if rows * 2 / (analysis.PERMUTATIONS + 1) >= 0.05:
        note += f" With {rows} rows no Holm p can fall below 0.05 at this resampling resolution: compare fewer metrics."
    return note

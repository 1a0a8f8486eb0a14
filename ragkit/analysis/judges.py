"""What each judge buys and costs: its on/off pairs through the comparison engine, with the
pipeline latency and LLM tokens it adds per question, and how often its replies were unusable."""

from __future__ import annotations

import pandas as pd

from ragkit.analysis.comparison import Comparer, family_adjustment, with_adjusted
from ragkit.analysis.latency import llm_tokens_per_question, pipeline_stages
from ragkit.analysis.loading import Results
from ragkit.analysis.pairing import JUDGE_PREFIX, single_factor_pairs
from ragkit.analysis.statistics import describe_method

# The judge table's families: per metric, every judge pair of the selected runs.
JUDGE_QUESTION = "judge pairs"


def judge_pairs(runs: pd.DataFrame, pairs: pd.DataFrame | None = None) -> pd.DataFrame:
    """The single-factor pairs that toggle a judge's mode (or change its parameters); ``pairs``:
    the runs' single-factor pairs when already known."""
    pairs = single_factor_pairs(runs) if pairs is None else pairs
    return pairs[pairs["factor"].str.startswith(JUDGE_PREFIX)].reset_index(drop=True)


def judge_effects(results: Results, metrics: list[str]) -> pd.DataFrame:
    """Every judge pair x metric: the engine's paired comparison (common depth, failures per side,
    strict difference, unit-clustered CI and p), p_adj per metric over the judge pairs
    (``JUDGE_QUESTION``), and the pipeline
    LLM tokens per question turning the judge on cost (`tokens_diff`). Judge by judge, pair by
    pair, metrics in the order given."""
    comparer = Comparer(results)
    pairs = judge_pairs(results.runs, comparer.pairs)
    effects = comparer.pair_comparisons(metrics, pairs)
    if effects.empty:
        return with_adjusted(effects, question=JUDGE_QUESTION).assign(tokens_diff=pd.Series(dtype="float64"))
    order = {metric: position for position, metric in enumerate(metrics)}
    effects = effects.assign(metric_order=effects["metric"].map(order)).sort_values(
        ["factor", "run_a", "run_b", "metric_order"], kind="stable").drop(columns="metric_order")
    tokens = llm_tokens_per_question(pipeline_stages(results.stages))
    effects["tokens_diff"] = effects["run_b"].map(tokens) - effects["run_a"].map(tokens)
    return with_adjusted(effects.reset_index(drop=True), question=JUDGE_QUESTION)


def judge_table(effects: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """judge_effects as the Compare page lists it: the pair as the forest chart names it, the
    statistics, failures and strict difference, W/T/L, the costs, then the two runs' labels."""
    from ragkit.analysis.charts import pair_names

    labels = runs.set_index("run_id")["label"]
    return pd.DataFrame({
        "judge pair": pair_names(effects), "metric": effects["metric"], "compared as": effects["metric_compared"],
        "Δ mean": effects["diff"], "CI low": effects["ci_low"], "CI high": effects["ci_high"],
        "sim. CI low": effects["sim_ci_low"], "sim. CI high": effects["sim_ci_high"], "p": effects["p"],
        "p (adj.)": effects["p_adj"], "strict Δ": effects["strict_diff"], "strict CI low": effects["strict_ci_low"],
        "strict CI high": effects["strict_ci_high"], "strict p (adj.)": effects["strict_p_adj"],
        "signs disagree": effects["signs_disagree"],
        "failed a/b": [f"{a}/{b}" for a, b in zip(effects["n_failed_a"], effects["n_failed_b"])],
        "W/T/L": [f"{w}/{t}/{lost}" for w, t, lost in zip(effects["wins"], effects["ties"], effects["losses"])],
        "n": effects["n"], "Δ ms/question": effects["latency_ms_diff"], "Δ LLM tokens/question": effects["tokens_diff"],
        "run a": effects["run_a"].map(labels), "run b": effects["run_b"].map(labels),
    })


def judge_table_note(effects: pd.DataFrame) -> str:
    """What the judge table's columns mean."""
    from ragkit.analysis.notes import adjustment_note, failure_note

    unit = effects["unit"].iloc[0] if len(effects) else "question"
    metrics = list(dict.fromkeys(effects["metric"].tolist())) if len(effects) else []
    return ("Δ = b - a over the questions both runs scored, b in the judge's stronger mode (off < heuristic < llm). "
            "When the judge changes how many chunks reach the generator, ranking metrics are compared at the "
            f"common depth ('compared as'). strict Δ: over every question both were asked, {failure_note(metrics)}; "
            f"failed a/b: questions each side could not score. {describe_method(unit)} "
            f"{adjustment_note(family_adjustment(effects))} "
            "W/T/L: questions where b won, tied, lost. Costs: pipeline ms and LLM tokens per question, "
            "evaluation left out.")


def judge_replies(judgements: pd.DataFrame) -> pd.DataFrame:
    """Per judge: decisions, share of invalid replies and of fallbacks, mean seconds."""
    if judgements.empty:
        return pd.DataFrame()
    table = judgements.assign(invalid=~judgements["valid"].astype(bool)).groupby("judge").agg(
        decisions=("judge", "size"), invalid_share=("invalid", "mean"), fell_back_share=("fell_back", "mean"),
        mean_seconds=("seconds", "mean"),
    )
    return table.reset_index()

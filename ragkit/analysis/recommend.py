"""`ragkit best`: which configuration to use, under a latency and cost budget, with its uncertainty.

The rules, in order:

1. **Eligible runs.** A run is eligible when it meets every constraint given: pipeline latency
   (ms per question, the evaluation left out, ``latency.latency_per_run``) at most
   ``max_latency_ms``, and cost at most ``max_cost``. Cost is the pipeline's LLM tokens (prompt +
   completion) per question (``latency.llm_tokens_per_question``), 0 for a run that calls no LLM:
   ragkit records tokens, not prices. A run whose latency or cost is unknown fails a constraint
   on it (it cannot be shown to meet it).
2. **The best** eligible run has the best mean of the metric over the questions it was asked that
   have the metric (a question with nothing to score it against, e.g. no relevant passage, has
   none; each mean states its count), a failed question counting as the metric's worst value
   (``names.failure_value``: 0, or 1 for a lower-is-better rate), so nothing wins by crashing.
   Runs with exactly the best mean are named as a tie (listed by label; no tie-break).
3. **Not significantly worse.** Every other eligible run is paired with the best per question
   by the comparison engine (``Comparer.pair_comparisons``: the questions both scored, at the
   common depth unless ``depth_rule="asked"``, the unit resampled named). The family is exactly
   these runners-up, two tests each: the engine's difference over the questions both scored, and
   the strict difference over every question both were asked (a failure as the worst value, as in
   rule 2; its own CI and p, cluster-robust over the same unit), one joint test over all of these tests
   (``families``: one test where the two are the same; a row identical on every question is not
   tested, and is not worse). A
   runner-up is *not significantly worse* unless one of its two differences from the best is in
   the worse direction with p (adj.) < ``alpha``.
4. **Pareto front** over quality (the mean of rule 2), latency and cost among the eligible runs
   (``latency.pareto_front`` with both costs): no other eligible run is at least as good on all
   three and strictly better on one.
5. **The factor that mattered most**: of the engine's factor rows on the metric (each level
   against its factor's comparison level, over every run), the factor whose levels' effects
   span the widest range, the comparison level counting as 0.
6. **The verdict states its evidence.** The best is named only when the runner-up (the second
   ranked eligible run) is significantly worse (rule 3). Otherwise, when no run is significantly
   worse, the verdict is "no configuration is distinguishable on N questions from G documents;
   about M questions would detect a difference of D": N and G those of the comparison with the
   runner-up, D the observed gap between the two (half the detectable difference when they tie),
   M planned from that comparison's variance (``power``); with one document nothing can be
   planned, and it says so. When some runs are significantly worse, it names the group that
   cannot be told apart (the best and its not-significantly-worse runs) as "no single best", with
   the same plan. Every verdict gives the smallest difference the comparison with the runner-up
   could detect (its ``mde``, 80% power, two-sided 5%).

**Default metric** (``default_metric``): the objective of the experiment's ``search:`` block when
it had one (kept in the results folder's ``search.json``), else ndcg@10.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from ragkit.analysis import power
from ragkit.analysis.comparison import DEPTH_RULES, MARGINAL, Comparer, DepthRule, run_depths, with_adjusted
from ragkit.analysis.json_rows import json_records
from ragkit.analysis.latency import llm_tokens_per_question, pareto_front
from ragkit.analysis.loading import Results
from ragkit.errors import ConfigError
from ragkit.metrics.names import better_direction, failure_value, parse_metric, sort_key

# Pairs of arbitrary runs: named so, not after a factor (the engine's depth rule treats every
# factor but top_k alike).
CONFIGURATION = "configuration"
# The family of rule 3, per metric.
RUNNERS_UP = "runners-up against the best"
FORMATS = ("text", "json")
DEFAULT_METRIC = "ndcg@10"
# Where a search experiment keeps its settings in the results folder (ragkit.experiments.search_run).
SEARCH_STATE = "search.json"


class BestParams(BaseModel):
    """What `ragkit best` is asked."""

    model_config = ConfigDict(extra="forbid")
    metric: str = Field(description="The metric the best configuration maximises (minimises for a lower-is-better "
                                    "rate).")
    max_latency_ms: float | None = Field(default=None, gt=0, description="Most pipeline ms per question.")
    max_cost: float | None = Field(default=None, ge=0, description="Most pipeline LLM tokens per question.")
    alpha: float = Field(default=0.05, gt=0, lt=1, description="Family-wise error rate of the not-worse tests.")
    depth_rule: DepthRule = Field(default="common", description="Compare at the common depth or as asked.")


@dataclass
class Recommendation:
    params: BestParams
    unit: str
    runs: pd.DataFrame  # per run: run_id, label, quality, latency_ms, cost, eligible, excluded_by, pareto
    best: str | None
    comparisons: pd.DataFrame  # the engine's rows, run_a = best, run_b = runner-up, p_adj over these
    not_worse: list[str] = field(default_factory=list)
    factor: dict | None = None  # the factor that mattered most: name, range, levels
    tied: list[str] = field(default_factory=list)  # eligible runs with exactly the best's mean
    questions_asked: int = 0  # questions of the results (the denominator's context)

    @property
    def runner_up(self) -> pd.Series | None:
        """The comparison of the best with the second-ranked eligible run."""
        return None if self.comparisons.empty else self.comparisons.iloc[0]

    @property
    def distinguishable(self) -> bool:
        """The best is significantly better than the runner-up (rule 6)."""
        runner = self.runner_up
        return runner is not None and str(runner["run_b"]) not in self.not_worse

    @property
    def contrast(self) -> pd.Series | None:
        """The comparison the verdict's evidence rests on: the runner-up's, or, when runs score
        exactly as the best on every question (named as ties), the first run that differs."""
        if self.comparisons.empty:
            return None
        differs = self.comparisons[self.comparisons["mde"].notna()]
        return differs.iloc[0] if not differs.empty else self.comparisons.iloc[0]

    def need(self) -> power.Need | None:
        """What a difference of the observed gap between the best and ``contrast`` needs (half the
        detectable difference when they tie)."""
        contrast = self.contrast
        if contrast is None:
            return None
        gap = abs(float(contrast["diff"])) if pd.notna(contrast["diff"]) else np.nan
        detect = gap if gap > 0 else float(contrast["mde"]) / 2
        if not np.isfinite(detect) or detect <= 0:
            return power.Need(0.0, None, None)
        return power.need(power.row_detectable(self.comparisons.loc[[contrast.name]]), 0, detect)

    def verdict(self) -> str:
        """Rule 6, one sentence."""
        metric = self.params.metric
        if self.best is None:
            return "no run meets the constraints"
        runner = self.runner_up
        if runner is None:
            return f"{self.label(self.best)} is the only eligible run: nothing to compare it with"
        units = int(runner["n_units"])
        evidence = f"{int(runner['n'])} questions from {units} {self.unit}{'' if units == 1 else 's'}"
        contrast = self.contrast
        if contrast is not None and pd.notna(contrast["mde"]):
            detectable = (f"the smallest difference these questions detect: {_number(contrast['mde'])} "
                          f"({power.POWER_RULE})")
        else:
            detectable = "no difference is detectable on these questions"
        if self.distinguishable:
            # The runner-up's row is runner-up - best; turned round so that "better by" is positive.
            sign = -(better_direction(metric) or 1)
            low, high = sorted((sign * runner["ci_low"], sign * runner["ci_high"]))
            return (f"best on {metric}: {self.label(self.best)}, better than the runner-up "
                    f"{self.label(str(runner['run_b']))} by {_number(sign * runner['diff'])} "
                    f"[{_number(low)}, {_number(high)}], p (adj.) {_number(runner['p_adj'])}; {detectable}")
        if units < 2:
            plan = (f"one {self.unit} gives no spread between {self.unit}s to test with: questions from more "
                    f"{self.unit}s are needed before any difference can be told")
        else:
            need = self.need()
            plan = power.describe_need(need) if need is not None else ""
        worse = len(self.comparisons) - len(self.not_worse)
        if not worse:
            return f"no configuration is distinguishable on {evidence}; {plan}; {detectable}"
        group = ", ".join(self.label(run) for run in [self.best, *self.not_worse])
        return (f"no single best on {evidence}: {group} cannot be told apart ({plan}; {detectable}); the other "
                f"{worse} {'is' if worse == 1 else 'are'} significantly worse")

    def mean_rule(self) -> str:
        """What each mean is over (its denominator), with the counts."""
        metric = self.params.metric
        counts = self.runs.loc[self.runs["eligible"], "n_asked"]
        if counts.empty:
            counts = self.runs["n_asked"]
        low, high = (int(counts.min()), int(counts.max())) if len(counts) else (0, 0)
        shown = f"{low}" if low == high else f"{low}-{high}"
        others = (f" of the {self.questions_asked} asked (the others have nothing to score it against)"
                  if self.questions_asked > high else "")
        return (f"mean over the {shown} questions with a {metric}{others}; a failed question counts as "
                f"{failure_value(metric):g}")

    @property
    def family(self) -> str:
        tests = int(self.comparisons["family_tests"].max()) if len(self.comparisons) else 0
        return (f"step-down minP joint test over the {tests} tests (difference over the questions both scored, "
                f"and strict difference, once where no question failed; rows identical on every question untested) "
                f"of the "
                f"{len(self.comparisons)} other eligible runs against the best on {self.params.metric}")

    def label(self, run_id: str) -> str:
        return str(self.runs.set_index("run_id").at[run_id, "label"])


def default_metric(results: Results) -> str:
    """The search objective of the experiment, when it had one, else ``DEFAULT_METRIC``."""
    if results.root is not None:
        from ragkit.storage.folders import open_folder

        files = open_folder(results.root)
        try:
            if files.exists(SEARCH_STATE):
                state = json.loads(files.read_bytes(SEARCH_STATE))
                metric = state.get("search", {}).get("objective", {}).get("metric")
                if isinstance(metric, str) and metric:
                    return metric
        except (OSError, ValueError, AttributeError):
            pass  # an unreadable search state names no objective: the default stands
    return DEFAULT_METRIC


def plan_questions(results: Results, metric: str, detect: float) -> power.Plan:
    """`ragkit questions plan`: what a difference of ``detect`` needs, planned from the comparisons
    of the best-ranked run on ``metric`` against every other run (no constraints)."""
    return power.plan(recommend(results, BestParams(metric=metric)), detect)


def check_metric(metric: str, results: Results) -> None:
    """A metric that is not scored, or only describes the context, is a one-line error."""
    scored = sorted(results.metric_names, key=sort_key)
    rankable = [m for m in scored if better_direction(m) != 0]
    if metric not in rankable:
        raise ConfigError(f"metric '{metric}' {'only describes the context' if metric in scored else 'is not scored'}"
                          f" in these results. Valid metrics: {', '.join(rankable) or '(none)'}")


def _run_table(comparer: Comparer, params: BestParams) -> pd.DataFrame:
    runs = comparer.runs
    matrices = comparer.matrices
    quality = pd.Series(matrices.run_means(params.metric, failure_value(params.metric)), index=matrices.run_ids)
    values, asked = matrices.get(params.metric)
    n_asked = pd.Series(asked.sum(axis=0), index=matrices.run_ids)
    n_failed = pd.Series((asked & np.isnan(values)).sum(axis=0), index=matrices.run_ids)
    ids = runs["run_id"].astype(str)
    table = pd.DataFrame({
        "run_id": ids.to_numpy(), "label": runs["label"].astype(str).to_numpy() if "label" in runs else ids.to_numpy(),
        "quality": quality.reindex(ids).to_numpy(),
        "n_asked": n_asked.reindex(ids).fillna(0).to_numpy(dtype="int64"),
        "n_failed": n_failed.reindex(ids).fillna(0).to_numpy(dtype="int64"),
        "latency_ms": comparer.latency_ms.reindex(ids).to_numpy(dtype="float64"),
        "cost": _cost(comparer.results).reindex(ids).to_numpy(dtype="float64"),
    })
    excluded = []
    depths = run_depths(runs)
    for run_id, latency, cost, quality_value in zip(ids, table["latency_ms"], table["cost"], table["quality"]):
        reasons = []
        if np.isnan(quality_value):
            depth = depths.get(run_id)
            cut = parse_metric(params.metric).k
            hint = (f": its final context holds {depth} chunks"
                    if depth is not None and cut is not None and depth < cut else "")
            reasons.append(f"not scored on {params.metric}{hint}")
        if params.max_latency_ms is not None and not latency <= params.max_latency_ms:
            reasons.append("latency unknown" if np.isnan(latency) else f"latency {latency:.1f} ms")
        if params.max_cost is not None and not cost <= params.max_cost:
            reasons.append("cost unknown" if np.isnan(cost) else f"cost {cost:.0f} tokens")
        excluded.append("; ".join(reasons))
    table["excluded_by"] = excluded
    table["eligible"] = table["excluded_by"] == ""
    table["pareto"] = False
    eligible = table[table["eligible"]]
    if not eligible.empty:
        oriented = eligible.assign(quality=eligible["quality"] * (better_direction(params.metric) or 1))
        table.loc[eligible.index, "pareto"] = pareto_front(oriented, "quality", ["latency_ms", "cost"])
    return table


def _cost(results: Results) -> pd.Series:
    """Pipeline LLM tokens per question per run: 0 for a run whose stages record no LLM call."""
    stages = results.stages
    if stages.empty:
        return pd.Series(dtype="float64")
    missing = {name: np.nan for name in ("prompt_tokens", "completion_tokens") if name not in stages.columns}
    return llm_tokens_per_question(stages.assign(**missing) if missing else stages).astype("float64")


def _ranked(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Eligible runs, best first (equal means: label order, named as a tie by ``recommend``)."""
    eligible = table[table["eligible"]]
    key = eligible["quality"] * -(better_direction(metric) or 1)
    return eligible.assign(_key=key).sort_values(["_key", "label"], kind="stable").drop(columns="_key")


def _most_important_factor(comparer: Comparer, metric: str) -> dict | None:
    rows = comparer.factor_effects([metric])
    rows = rows[(rows["kind"] == MARGINAL) & rows["diff"].notna()]
    if rows.empty:
        return None
    best: dict | None = None
    for factor, mine in rows.groupby("factor", sort=False):
        # Each row is a level (level_b) against the factor's reference (level_a), which counts as 0.
        diffs = np.append(mine["diff"].to_numpy(dtype="float64"), 0.0)
        spread = float(diffs.max() - diffs.min())
        if best is None or spread > best["range"]:
            best = {"factor": str(factor), "range": spread, "comparison_level": str(mine["level_a"].iloc[0]),
                    "levels": {str(level): float(diff) for level, diff in zip(mine["level_b"], mine["diff"])}}
    return best


def recommend(results: Results, params: BestParams) -> Recommendation:
    """The recommendation of the module docstring for ``results``' runs."""
    check_metric(params.metric, results)
    if params.depth_rule not in DEPTH_RULES:
        raise ConfigError(f"unknown depth rule '{params.depth_rule}'. Valid rules: {', '.join(DEPTH_RULES)}")
    comparer = Comparer(results, params.depth_rule)
    table = _run_table(comparer, params)
    ranked = _ranked(table, params.metric)
    asked = len(results.question_ids)
    if ranked.empty:
        nothing = with_adjusted(comparer.pair_comparisons([], pd.DataFrame()))
        return Recommendation(params, results.unit, table, None, nothing, questions_asked=asked)
    best = str(ranked["run_id"].iloc[0])
    others = ranked["run_id"].iloc[1:].astype(str).tolist()
    pairs = pd.DataFrame({"run_a": best, "run_b": others, "factor": CONFIGURATION,
                          "value_a": table.set_index("run_id").at[best, "label"],
                          "value_b": [table.set_index("run_id").at[run, "label"] for run in others]})
    # The engine gives each pair the strict difference's own CI and p (a failure as the worst value).
    comparisons = with_adjusted(comparer.pair_comparisons([params.metric], pairs), alpha=params.alpha,
                            question=RUNNERS_UP)
    direction = better_direction(params.metric)
    worse = (((comparisons["p_adj"] < params.alpha) & (comparisons["diff"] * direction < 0))
             | ((comparisons["strict_p_adj"] < params.alpha) & (comparisons["strict_diff"] * direction < 0)))
    not_worse = comparisons.loc[~worse.fillna(False).astype(bool), "run_b"].astype(str).tolist()
    top = ranked["quality"].iloc[0]
    tied = ranked.loc[ranked["quality"] == top, "run_id"].astype(str).tolist()[1:]
    return Recommendation(params, results.unit, table, best, comparisons, not_worse,
                          _most_important_factor(comparer, params.metric), tied, asked)


# --- text and JSON forms --------------------------------------------------------------------------


def to_json(rec: Recommendation) -> str:
    payload = {
        "metric": rec.params.metric, "constraints": {"max_latency_ms": rec.params.max_latency_ms,
                                                    "max_cost": rec.params.max_cost},
        "ranking_rule": rec.mean_rule(), "verdict": rec.verdict(),
        "distinguishable": rec.distinguishable, "tied_with_best": rec.tied,
        "power": power.POWER_RULE,
        "cost_unit": "pipeline LLM tokens per question", "unit": rec.unit, "alpha": rec.params.alpha,
        "best": rec.best, "best_label": rec.label(rec.best) if rec.best else None,
        "not_significantly_worse": rec.not_worse, "family": rec.family,
        "pareto_front": rec.runs.loc[rec.runs["pareto"], "run_id"].tolist(),
        "factor_that_mattered_most": rec.factor,
        "runs": json_records(rec.runs), "comparisons": json_records(rec.comparisons),
    }
    return json.dumps(payload, indent=1) + "\n"


def _number(value: float, digits: int = 3) -> str:
    return "-" if pd.isna(value) else f"{value:.{digits}f}"


def to_text(rec: Recommendation) -> str:
    metric = rec.params.metric
    lines = [f"ranked on {metric}: {rec.mean_rule()}"]
    if rec.best is None:
        excluded = rec.runs[~rec.runs["eligible"]]
        lines.append("  no run meets the constraints: " + "; ".join(
            f"{label} ({why})" for label, why in zip(excluded["label"], excluded["excluded_by"])))
        return "\n".join(lines) + "\n"
    row = rec.runs.set_index("run_id").loc[rec.best]
    lines.append(f"  first: {row['label']} [{rec.best}]: {_number(row['quality'])} over {int(row['n_asked'])} "
                 f"questions ({int(row['n_failed'])} failed), {_number(row['latency_ms'], 1)} ms/question, "
                 f"{_number(row['cost'], 0)} LLM tokens/question")
    if rec.tied:
        lines.append(f"  tie: {', '.join([rec.label(rec.best), *(rec.label(run) for run in rec.tied)])} have the "
                     f"same mean {_number(row['quality'])} (listed by label; no tie-break)")
    lines.append(f"verdict: {rec.verdict()}")
    lines.append(f"not significantly worse (p (adj.) >= {rec.params.alpha:g}; {rec.family}; unit: {rec.unit}; "
                 f"detectable: the smallest difference each comparison detects, {power.POWER_RULE}):")
    by_run = rec.comparisons.set_index("run_b")
    for run in rec.comparisons["run_b"].astype(str):
        comparison = by_run.loc[run]
        mark = "  " if run in rec.not_worse else "x "
        lines.append(f"  {mark}{rec.label(run)}: diff {_number(comparison['diff'])} "
                     f"[{_number(comparison['ci_low'])}, {_number(comparison['ci_high'])}], "
                     f"p (adj.) {_number(comparison['p_adj'])}, n {int(comparison['n'])}, detectable "
                     f"{_number(comparison['mde'])}; strict diff "
                     f"{_number(comparison['strict_diff'])} [{_number(comparison['strict_ci_low'])}, "
                     f"{_number(comparison['strict_ci_high'])}], p (adj.) {_number(comparison['strict_p_adj'])}, "
                     f"failed {int(comparison['n_failed_b'])} vs {int(comparison['n_failed_a'])}")
    if rec.comparisons.empty:
        lines.append("  (no other eligible run)")
    lines.append("  (x: significantly worse than the best)")
    front = rec.runs[rec.runs["pareto"]]
    lines.append("Pareto front over quality, latency and cost (eligible runs): "
                 + ", ".join(front["label"].astype(str)))
    if rec.factor is not None:
        reference = rec.factor["comparison_level"]
        levels = ", ".join(f"{level} - {reference} = {diff:+.3f}" for level, diff in rec.factor["levels"].items())
        lines.append(f"factor that mattered most: {rec.factor['factor']} (range {rec.factor['range']:.3f}; {levels})")
    excluded = rec.runs[~rec.runs["eligible"]]
    if not excluded.empty:
        lines.append("excluded: " + "; ".join(f"{label} ({why})" for label, why in
                                               zip(excluded["label"], excluded["excluded_by"])))
    return "\n".join(lines) + "\n"

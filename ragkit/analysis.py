"""Comparing runs: metric means with bootstrap CIs, curves over k, latency, Pareto fronts and
paired single-factor differences with permutation-test p-values (Holm-corrected when many are
shown). Pure pandas/numpy/scipy, vectorised over questions so a 50-run x 1,000-question
comparison stays interactive.

Conventions:
- A score row counts when its `error` is empty and its `value` is not NaN; every other row is a
  failure (counted in `n_failed`, never averaged as 0).
- Latency: per-question stages (retrieve, and later ones) are averaged over a run's questions.
  Run-level stages (question_id empty: chunk, embed, index) are one-off build costs, shared by
  the runs that reuse a chunk set or index; they are reported separately (`per_question` False,
  total seconds) and never amortised into per-question latency.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from ragkit.results import ResultStore, empty_table, is_evaluation_stage
from ragkit.summary import run_labels

# runs columns that identify or key a run rather than configure it
NON_CONFIG_COLUMNS = frozenset({"run_id", "label", "experiment"})
_METRIC_NAME = re.compile(r"^(?P<base>[a-z0-9_]+?)(?:@(?P<k>\d+))?$")
# Order of metric families in pickers and tables: headline metrics first.
_FAMILY_ORDER = ("recall", "precision", "f1", "hit", "ndcg", "map", "mrr")
# Bootstrap resamples drawn at once: bounds memory at about 8 * runs * questions * batch bytes.
_BOOTSTRAP_BATCH = 100
# Sign-flip resamples of the permutation test. A resampled two-sided p-value is never below
# 2 / (n + 1), so Holm over m comparisons never goes below 2m / (n + 1): raise it for big
# families. When 2^questions <= n (up to 9 questions at 999) every sign pattern is tested instead.
PERMUTATIONS = 999
# Differences the permutation test permutes at once; scipy holds about four float32 copies of
# them, so this bounds its memory near 64 MB whatever the number of pairs and questions.
_PERMUTATION_BATCH_VALUES = 4_000_000
# Modes a judge can run in, baseline first: a pair reads "off -> heuristic", "heuristic -> llm".
_MODE_ORDER = {"off": 0, "heuristic": 1, "llm": 2}


@dataclass(frozen=True)
class Results:
    """The tables of a results folder. `judgements` and `answers` are read on first use, only
    for the runs in `runs`: answers carry every prompt, so reading them up front would slow down
    every page that only compares scores. Without `root` both are empty."""

    runs: pd.DataFrame
    scores: pd.DataFrame
    retrievals: pd.DataFrame
    stages: pd.DataFrame
    root: Path | None = None

    @cached_property
    def judgements(self) -> pd.DataFrame:
        return self._read_for_runs("judgements")

    @cached_property
    def answers(self) -> pd.DataFrame:
        return self._read_for_runs("answers")

    def _read_for_runs(self, name: str) -> pd.DataFrame:
        if self.root is None:
            return empty_table(name)
        table = ResultStore(self.root).read(name)
        return table[table["run_id"].isin(self.runs["run_id"])].reset_index(drop=True)


def load_results(results_dir: str | Path) -> Results:
    """Every table of a results folder (judgements and answers on first use); `runs` gets a
    readable `label` column."""
    store = ResultStore(Path(results_dir))
    if not store.exists():
        raise FileNotFoundError(f"no results folder at {results_dir} (expected a 'runs' subfolder)")
    runs = store.read("runs")
    if not runs.empty:
        runs = runs.assign(label=run_labels(runs).astype("string"))
        runs = runs.sort_values("label", kind="stable").reset_index(drop=True)
    # Categories make the filters and group-bys over millions of score rows integer work.
    scores = store.read("scores", categorical=("run_id", "question_id", "metric"))
    return Results(runs=runs, scores=scores, retrievals=store.read("retrievals"), stages=store.read("stages"),
                   root=store.root)


def _valid_mask(scores: pd.DataFrame) -> pd.Series:
    return scores["error"].isna() & scores["value"].notna()


def _metric_sort_key(metric: str) -> tuple:
    match = _METRIC_NAME.match(metric)
    base, k = (match["base"], match["k"]) if match else (metric, None)
    level = 1 if base.startswith("span_") else 0
    family = base.removeprefix("span_")
    rank = _FAMILY_ORDER.index(family) if family in _FAMILY_ORDER else len(_FAMILY_ORDER)
    return (level, rank, family, int(k) if k else 0, metric)


def available_metrics(scores: pd.DataFrame) -> list[str]:
    """Metric names in reading order: document level then span level; by family; by k."""
    return sorted(scores["metric"].dropna().unique().tolist(), key=_metric_sort_key)


def _bootstrap_mean_ci(matrix: np.ndarray, confidence: float, n_resamples: int, seed: int) -> np.ndarray:
    """Percentile CIs of the row means of `matrix` (runs x questions), resampling questions."""
    if matrix.shape[1] == 1:
        return np.column_stack([matrix[:, 0], matrix[:, 0]])
    result = stats.bootstrap(
        (matrix,), lambda x, axis: x.mean(axis=axis), n_resamples=n_resamples, batch=_BOOTSTRAP_BATCH,
        vectorized=True, axis=-1, confidence_level=confidence, method="percentile",
        rng=np.random.default_rng(seed),
    )
    return np.column_stack([result.confidence_interval.low, result.confidence_interval.high])


def _sign_flip_pvalues(diffs: np.ndarray, n_permutations: int, seed: int) -> np.ndarray:
    """Two-sided paired permutation p-values of the row means of `diffs` (pairs x questions).

    With no effect, each question's difference b - a is as likely to have either sign, so the
    null distribution flips signs (scipy's `samples` permutation of a single sample). Every row
    sees the same sign patterns, so a row's p-value equals a call with that row alone.
    """
    if diffs.shape[1] == 1:
        # One question: both signs of its difference are as extreme as the one observed.
        return np.ones(diffs.shape[0])
    # float32 halves the copies scipy makes of every resample (about twice as fast); its 7
    # significant digits are far finer than the resampled p-value's resolution, and scipy's tie
    # tolerance follows the dtype.
    result = stats.permutation_test(
        (diffs.astype("float32"),), lambda d, axis: d.mean(axis=axis), permutation_type="samples", vectorized=True,
        n_resamples=n_permutations, batch=max(1, _PERMUTATION_BATCH_VALUES // diffs.size),
        alternative="two-sided", axis=-1, rng=np.random.default_rng(seed),
    )
    return np.atleast_1d(result.pvalue)


def _equal_size_groups(sizes: np.ndarray):
    """For consecutive groups of values (group g has sizes[g] of them), per distinct non-zero size:
    the positions of the groups of that size and the (groups x size) indices of their values."""
    offsets = np.concatenate([[0], np.cumsum(sizes)])[:-1].astype("int64")
    for size in np.unique(sizes[sizes > 0]):
        positions = np.flatnonzero(sizes == size)
        yield positions, offsets[positions][:, None] + np.arange(size)[None, :]


def _grouped_mean_cis(values: np.ndarray, sizes: np.ndarray, confidence: float, n_resamples: int,
                      seed: int) -> np.ndarray:
    """CIs of the mean of consecutive groups of `values` (group g has sizes[g] values); groups
    of equal size bootstrap together as one matrix. Empty groups get NaN."""
    bounds = np.full((len(sizes), 2), np.nan)
    for positions, rows in _equal_size_groups(sizes):
        bounds[positions] = _bootstrap_mean_ci(values[rows], confidence, n_resamples, seed)
    return bounds


def _grouped_pvalues(values: np.ndarray, sizes: np.ndarray, n_permutations: int, seed: int) -> np.ndarray:
    """Sign-flip p-values of consecutive groups of paired differences, laid out as for
    _grouped_mean_cis: groups of equal size go through one vectorised permutation test."""
    pvalues = np.full(len(sizes), np.nan)
    for positions, rows in _equal_size_groups(sizes):
        pvalues[positions] = _sign_flip_pvalues(values[rows], n_permutations, seed)
    return pvalues


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjustment of a family of p-values (controls the family-wise error rate).

    The i-th smallest of m p-values becomes max over j <= i of (m - j + 1) * p_(j), capped at 1.
    NaN p-values (comparisons with nothing to test) stay NaN and do not count in m.
    """
    p = np.asarray(p_values, dtype="float64")
    adjusted = np.full(p.shape, np.nan)
    known = np.flatnonzero(~np.isnan(p))
    order = known[np.argsort(p[known], kind="stable")]
    scaled = (len(order) - np.arange(len(order))) * p[order]
    adjusted[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return adjusted


def metric_means(
    scores: pd.DataFrame, metrics: list[str] | tuple[str, ...], confidence: float = 0.95,
    n_resamples: int = 1000, seed: int = 0,
) -> pd.DataFrame:
    """Per run and metric: mean over questions, a bootstrap CI, how many questions counted and failed."""
    columns = ["run_id", "metric", "mean", "ci_low", "ci_high", "n", "n_failed"]
    chosen = scores[scores["metric"].isin(list(metrics))]
    if chosen.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c not in ("run_id", "metric") else "string")
                             for c in columns})
    valid = _valid_mask(chosen)
    keys = ["run_id", "metric"]
    table = chosen.groupby(keys, observed=True).size().rename("rows").to_frame()
    table["n"] = chosen[valid].groupby(keys, observed=True).size().reindex(table.index, fill_value=0)
    table["n_failed"] = table["rows"] - table["n"]
    table["mean"] = chosen[valid].groupby(keys, observed=True)["value"].mean().reindex(table.index)
    table["ci_low"] = np.nan
    table["ci_high"] = np.nan
    ordered = chosen[valid].sort_values(keys, kind="stable")
    group_index = pd.MultiIndex.from_frame(ordered[keys].drop_duplicates())
    sizes = table.loc[group_index, "n"].to_numpy()
    bounds = _grouped_mean_cis(ordered["value"].to_numpy(dtype="float64"), sizes, confidence, n_resamples, seed)
    table.loc[group_index, ["ci_low", "ci_high"]] = bounds
    table = table.reset_index()
    table["n"] = table["n"].astype("int64")
    table["n_failed"] = table["n_failed"].astype("int64")
    return table[columns]


def metric_table(scores: pd.DataFrame, runs: pd.DataFrame, metrics: list[str] | None = None) -> pd.DataFrame:
    """Runs x metrics of plain means (no CIs), one row per run with its label: the sortable table."""
    metrics = metrics if metrics is not None else available_metrics(scores)
    valid = scores[_valid_mask(scores) & scores["metric"].isin(metrics)]
    wide = valid.pivot_table(index="run_id", columns="metric", values="value", aggfunc="mean", observed=True)
    wide = wide.reindex(columns=[m for m in metrics if m in wide.columns])
    labels = runs.set_index("run_id")["label"] if "label" in runs else run_labels(runs).set_axis(runs["run_id"])
    out = pd.DataFrame({"run_id": runs["run_id"].to_numpy(), "label": labels.reindex(runs["run_id"]).to_numpy()})
    return out.join(wide, on="run_id").reset_index(drop=True)


def curve(scores: pd.DataFrame, base_metric: str) -> pd.DataFrame:
    """Mean of `base_metric@k` per run for every k scored, e.g. base_metric "recall"."""
    pattern = re.compile(rf"^{re.escape(base_metric)}@(\d+)$")
    # Parse the few distinct names, not every row.
    ks = {name: int(match[1]) for name in scores["metric"].dropna().unique() if (match := pattern.match(str(name)))}
    chosen = scores[scores["metric"].isin(list(ks)) & _valid_mask(scores)]
    chosen = chosen.assign(k=chosen["metric"].astype("string").map(ks).astype("int64"))
    out = chosen.groupby(["run_id", "k"], observed=True)["value"].mean().rename("mean").reset_index()
    return out.sort_values(["run_id", "k"], kind="stable").reset_index(drop=True)


def latency_by_stage(stages: pd.DataFrame) -> pd.DataFrame:
    """[run_id, stage, seconds, per_question]: per-question stages as a mean per question,
    run-level build stages (no question id) as their total seconds with per_question False."""
    per_question = stages["question_id"].notna()
    question_level = (stages[per_question].groupby(["run_id", "stage"], observed=True)["seconds"].mean()
                      .reset_index().assign(per_question=True))
    build_level = (stages[~per_question].groupby(["run_id", "stage"], observed=True)["seconds"].sum()
                   .reset_index().assign(per_question=False))
    return pd.concat([question_level, build_level], ignore_index=True)[["run_id", "stage", "seconds", "per_question"]]


def run_latency(stages: pd.DataFrame) -> pd.Series:
    """Mean seconds per question per run: the sum of the per-question stage means. Evaluation
    stages (eval, eval:<metric>) measure the answer after the fact and are left out."""
    latency = latency_by_stage(stages)
    answering = latency["per_question"] & ~is_evaluation_stage(latency["stage"])
    return latency[answering].groupby("run_id")["seconds"].sum()


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
    valid = scores[_valid_mask(scores) & (scores["metric"] == metric)]
    quality = valid.groupby("run_id", observed=True)["value"].mean().rename("quality")
    latency = (run_latency(stages) * 1000).rename("latency_ms")
    frame = pd.concat([quality, latency], axis=1).rename_axis("run_id").reset_index()
    frame["pareto"] = pareto_front(frame, "quality", "latency_ms")
    return frame


def _factor_columns(runs: pd.DataFrame) -> dict[str, list[str]]:
    """Config columns grouped into factors.

    A dotted column belongs to the longest dotted prefix that is itself a column, so a
    component's type and its parameters form one factor (`retriever` with `retriever.rrf_k`).
    `<kind>.top_k` mirrors the `top_k` column and joins that factor. `llm.<role>` names the
    model behind a role and joins that role's factor (`judge.<role>`, or `<role>` such as
    `generator`): it is set exactly when the role calls an LLM, so switching a judge to llm mode
    still pairs as one factor. A dotted column with no such prefix (e.g.
    `judge.retrieval.enabled`) is a factor on its own.
    """
    config = [c for c in runs.columns
              if c not in NON_CONFIG_COLUMNS and not c.endswith("_id") and not c.endswith("_key")]
    names = set(config)
    factors: dict[str, list[str]] = {}
    for column in config:
        factor = column
        if column.endswith(".top_k") and "top_k" in names:
            factor = "top_k"
        elif column.startswith("llm."):
            role = column.removeprefix("llm.")
            factor = next((owner for owner in (f"judge.{role}", role) if owner in names), column)
        else:
            parts = column.split(".")
            for length in range(len(parts) - 1, 0, -1):
                prefix = ".".join(parts[:length])
                if prefix in names:
                    factor = prefix
                    break
        factors.setdefault(factor, []).append(column)
    return factors


def _format_value(value: object) -> str:
    # A parameter column holding NaN for some runs turns 60 into 60.0; show it as written.
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _param_name(column: str) -> str:
    return "llm" if column.startswith("llm.") else column.split(".")[-1]


def _describe(row: pd.Series, factor: str, columns: list[str], differing: list[str]) -> str:
    if len(columns) == 1:
        return _format_value(row[columns[0]])
    head = row[factor] if factor in columns else None
    shown = [c for c in differing if c != factor and not c.endswith(".top_k")]
    params = ", ".join(f"{_param_name(c)}={_format_value(row[c])}" for c in shown)
    if factor in differing or not params:
        return str(head)
    return f"{head}({params})"


def _sort_value(value: object) -> tuple:
    """Baseline first: missing (the component is absent), then False before True and smaller
    numbers first, then judge modes off < heuristic < llm, then other names alphabetically."""
    if not isinstance(value, str) and pd.isna(value):
        return (0, 0.0, "")
    if isinstance(value, (bool, np.bool_, int, float, np.integer, np.floating)):
        return (1, float(value), "")
    return (2, float(_MODE_ORDER.get(str(value), len(_MODE_ORDER))), str(value))


def single_factor_pairs(runs: pd.DataFrame) -> pd.DataFrame:
    """Pairs of runs whose configurations differ in exactly one factor (see _factor_columns).

    Missing values compare equal to each other. In each pair run_a is the baseline, so b - a
    reads as "turning it on": it holds the smaller value of the factor's main column (missing
    first, False before True, 5 before 10, judge modes off < heuristic < llm, other names
    alphabetically), and when that is the same, of its differing parameters in column order.
    """
    columns = ["run_a", "run_b", "factor", "value_a", "value_b"]
    if len(runs) < 2:
        return pd.DataFrame({c: pd.Series(dtype="string") for c in columns})
    runs = runs.reset_index(drop=True)
    factors = _factor_columns(runs)
    codes = np.column_stack([
        pd.MultiIndex.from_frame(runs[cols].astype("string").fillna("\x00")).factorize()[0]
        for cols in factors.values()
    ])
    differs = codes[:, None, :] != codes[None, :, :]
    first, second = np.nonzero(np.triu(differs.sum(axis=2) == 1, k=1))
    names = list(factors)
    records = []
    for i, j in zip(first, second):
        factor = names[int(np.argmax(differs[i, j]))]
        cols = factors[factor]
        differing = [c for c in cols if not (pd.isna(runs.at[i, c]) and pd.isna(runs.at[j, c]))
                     and (pd.isna(runs.at[i, c]) or pd.isna(runs.at[j, c]) or runs.at[i, c] != runs.at[j, c])]
        key_column = factor if factor in cols else cols[0]
        ordering = [key_column] + [c for c in differing if c != key_column]
        if [_sort_value(runs.at[j, c]) for c in ordering] < [_sort_value(runs.at[i, c]) for c in ordering]:
            i, j = j, i
        records.append({
            "run_a": runs.at[i, "run_id"], "run_b": runs.at[j, "run_id"], "factor": factor,
            "value_a": _describe(runs.loc[i], factor, cols, differing),
            "value_b": _describe(runs.loc[j], factor, cols, differing),
        })
    return pd.DataFrame.from_records(records, columns=columns)


def _paired_stats(a: np.ndarray, b: np.ndarray, confidence: float, seed: int, n_resamples: int,
                  n_permutations: int) -> dict:
    diff = b - a
    n = len(diff)
    result = {"mean_diff": float(diff.mean()) if n else float("nan"), "ci_low": float("nan"),
              "ci_high": float("nan"), "p_value": float("nan"), "n": n, "wins": int((diff > 0).sum()),
              "ties": int((diff == 0).sum()), "losses": int((diff < 0).sum())}
    if n:
        # Resampling the questions of the differences is the paired bootstrap, as in factor_effects.
        low, high = _bootstrap_mean_ci(diff[None, :], confidence, n_resamples, seed)[0]
        result["ci_low"], result["ci_high"] = float(low), float(high)
        result["p_value"] = float(_sign_flip_pvalues(diff[None, :], n_permutations, seed)[0])
    return result


def _question_matrix(scores: pd.DataFrame, metric: str, run_ids: list[str] | None = None) -> pd.DataFrame:
    """question_id x run_id of valid values of one metric."""
    chosen = scores[_valid_mask(scores) & (scores["metric"] == metric)]
    if run_ids is not None:
        chosen = chosen[chosen["run_id"].isin(run_ids)]
    return chosen.pivot_table(index="question_id", columns="run_id", values="value", aggfunc="mean", observed=True)


def paired_difference(
    scores: pd.DataFrame, run_a: str, run_b: str, metric: str, confidence: float = 0.95,
    seed: int = 0, n_resamples: int = 1000, n_permutations: int = PERMUTATIONS,
) -> dict:
    """Mean of (b - a) over the questions both runs scored, with a paired bootstrap CI, a
    two-sided paired permutation-test p-value (sign flips of the differences), and on how many
    questions b won, tied and lost."""
    wide = _question_matrix(scores, metric, [run_a, run_b])
    both = wide.reindex(columns=[run_a, run_b]).dropna()
    return _paired_stats(both[run_a].to_numpy(dtype="float64"), both[run_b].to_numpy(dtype="float64"),
                         confidence, seed, n_resamples, n_permutations)


def factor_effects(
    scores: pd.DataFrame, stages: pd.DataFrame, runs: pd.DataFrame, metrics: list[str],
    confidence: float = 0.95, seed: int = 0, n_resamples: int = 1000, n_permutations: int = PERMUTATIONS,
) -> pd.DataFrame:
    """The "factor on vs off" view: every single-factor pair x metric with its paired
    difference (b - a), paired bootstrap CI, permutation-test `p_value`, and the per-question
    latency it cost (b - a, in ms); equal to paired_difference pair by pair.

    `p_holm` is Holm-adjusted over every row of the returned table, the comparisons "shown at
    once": to show a subset of pairs or metrics, pass only those (runs, metrics) rather than
    filtering the result, or the correction covers comparisons nobody sees.
    """
    pairs = single_factor_pairs(runs)
    latency_ms = run_latency(stages) * 1000
    paired_runs = sorted(set(pairs["run_a"]) | set(pairs["run_b"]))
    records = []
    for metric in metrics:
        wide = _question_matrix(scores, metric, paired_runs).reindex(columns=paired_runs)
        column = {run_id: i for i, run_id in enumerate(wide.columns)}
        matrix = wide.to_numpy(dtype="float64")
        # One row of paired differences per pair; resampling a pair's questions is the paired bootstrap.
        diffs = (matrix[:, pairs["run_b"].map(column).to_numpy(dtype="int64")]
                 - matrix[:, pairs["run_a"].map(column).to_numpy(dtype="int64")]).T
        present = ~np.isnan(diffs)
        sizes = present.sum(axis=1)
        bounds = _grouped_mean_cis(diffs[present], sizes, confidence, n_resamples, seed)
        pvalues = _grouped_pvalues(diffs[present], sizes, n_permutations, seed)
        with np.errstate(invalid="ignore"):
            means = np.nansum(diffs, axis=1) / np.where(sizes > 0, sizes, np.nan)
        for index, pair in enumerate(pairs.itertuples(index=False)):
            records.append({
                **pair._asdict(), "metric": metric, "mean_diff": means[index], "ci_low": bounds[index, 0],
                "ci_high": bounds[index, 1], "p_value": pvalues[index], "n": int(sizes[index]),
                "wins": int((diffs[index] > 0).sum()), "ties": int((diffs[index] == 0).sum()),
                "losses": int((diffs[index] < 0).sum()),
                "latency_ms_diff": latency_ms.get(pair.run_b, np.nan) - latency_ms.get(pair.run_a, np.nan),
            })
    columns = list(pairs.columns) + ["metric", "mean_diff", "ci_low", "ci_high", "p_value", "p_holm", "n", "wins",
                                     "ties", "losses", "latency_ms_diff"]
    table = pd.DataFrame.from_records(records, columns=columns)
    table["p_holm"] = holm(table["p_value"])
    return table

"""The one comparison engine: paired differences between runs and each factor's marginal effect.

Report, summary, export and dashboard all call this module; what makes its numbers trustworthy
(ARCHITECTURE.md, "What makes a comparison trustworthy"):

- **Pairs differ in exactly one factor** (``pairing.single_factor_pairs``; a factor that does not
  apply to a run matches any value). ``b - a`` reads as "turning it on".
- **Same questions, same depth.** A pair is compared on the questions both runs scored. When the
  two runs pass on final contexts of different depths (a rerank judge keeping ``top_n``, a
  Retrieval Judge keeping ``max_chunks``; the runs table's ``depth``) and the factor is not
  ``top_k`` itself, a ranking metric is compared at the common depth by default
  (``recall@10`` -> ``recall@5``, ``mrr`` -> ``mrr@5``): ``metric_compared`` and ``depth`` say so.
  With ``depth_rule="asked"`` the metric is compared as asked.
- **Failures are data.** ``n_failed_a`` / ``n_failed_b`` count the questions each side was asked
  but could not score; ``diff`` is over the questions both scored, and ``strict_diff`` over every
  question both were asked, a failure scoring 0, so nothing gets better by crashing.
- **The unit is named.** Intervals and p-values treat the question's source document as the
  independent draw (``unit``), see ``statistics``.
- **One family.** ``p_holm`` is Holm over every row returned: ask for exactly the rows shown.
- **One answer per factor.** ``marginal`` rows compare each level of a factor with its best level
  (``level_b``, the level with the best mean, failures as the worst value; for descriptive metrics such as
  ``final_tokens``, the baseline level), paired over every matched setting of the other factors:
  a question's difference is its mean over the matched pairs, so each question counts once.
"""

from __future__ import annotations

import functools
from typing import Literal

import numpy as np
import pandas as pd

from ragkit.analysis import statistics
from ragkit.analysis.loading import Results
from ragkit.analysis.pairing import TOP_K, factor_levels, level_order, single_factor_pairs
from ragkit.metrics.names import better_direction, failure_value, parse_metric

DepthRule = Literal["common", "asked"]
DEPTH_RULES = ("common", "asked")
PAIR = "pair"
# Pairs whose per-question differences are computed together (memory: questions x PAIR_BLOCK floats).
PAIR_BLOCK = 512
MARGINAL = "factor"
COLUMNS = [
    "kind", "factor", "level_a", "level_b", "run_a", "run_b", "pairs", "metric", "metric_compared", "depth",
    "unit", "n", "n_units", "n_scored_a", "n_scored_b", "n_failed_a", "n_failed_b", "diff", "ci_low", "ci_high",
    "p", "p_holm", "strict_diff", "wins", "ties", "losses", "units_b_better", "units_b_worse", "latency_ms_diff",
]


class ScoreMatrices:
    """Per metric, questions x runs arrays of valid values (NaN otherwise) and of rows present
    (the question was asked), over one question order shared by every metric."""

    def __init__(self, results: Results, run_ids: list[str]) -> None:
        self.results = results
        self.run_ids = run_ids
        self.question_ids = results.question_ids
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._means: dict[tuple[str, float], np.ndarray] = {}

    def run_means(self, metric: str, failed: float) -> np.ndarray:
        """Per run, the mean over the questions it was asked, a failure counting as ``failed``;
        NaN for a run asked nothing. Computed once per metric for every run (a factor's levels
        are averaged from these for each of its pairs)."""
        key = (metric, failed)
        if key not in self._means:
            values, asked = self.get(metric)
            counts = asked.sum(axis=0)
            totals = np.where(asked, np.nan_to_num(values, nan=failed), 0.0).sum(axis=0)
            self._means[key] = np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)
        return self._means[key]

    def load(self, metrics: list[str]) -> None:
        """Read the rows of ``metrics`` in one pass (later ``get`` calls find them read)."""
        self.results.scores_of(metrics)

    def get(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        if metric not in self._cache:
            rows = self.results.scores_of([metric])
            r = positions(rows["run_id"], pd.Index(self.run_ids))
            rows = rows[r >= 0]
            r = r[r >= 0]
            q = positions(rows["question_id"], self.question_ids)
            if (q < 0).any():  # a question the questions table does not list: count it all the same
                self._grow(pd.Index(rows["question_id"][q < 0].astype("string").unique()))
                q = positions(rows["question_id"], self.question_ids)
            values = np.full((len(self.question_ids), len(self.run_ids)), np.nan)
            asked = np.zeros_like(values, dtype=bool)
            valid = (rows["error"].isna() & rows["value"].notna()).to_numpy()
            values[q[valid], r[valid]] = rows["value"].to_numpy(dtype="float64")[valid]
            asked[q, r] = True
            self._cache[metric] = (values, asked)
        return self._cache[metric]

    def _grow(self, question_ids: pd.Index) -> None:
        self.question_ids = self.question_ids.append(question_ids)
        extra = len(question_ids)
        for metric, (values, asked) in self._cache.items():
            self._cache[metric] = (np.vstack([values, np.full((extra, values.shape[1]), np.nan)]),
                                   np.vstack([asked, np.zeros((extra, asked.shape[1]), dtype=bool)]))


def positions(column: pd.Series, index: pd.Index) -> np.ndarray:
    """Each value's position in ``index`` (-1 when absent); a categorical column is looked up
    by its categories, not row by row."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        found = index.get_indexer(column.cat.categories.astype("string"))
        codes = column.cat.codes.to_numpy()
        return np.where(codes >= 0, found[codes], -1)
    return index.get_indexer(column.astype("string"))


@functools.lru_cache(maxsize=4096)  # called per pair: a thousand runs have tens of thousands
def compared_metric(metric: str, depth_a: int | None, depth_b: int | None, factor: str,
                    rule: DepthRule = "common") -> tuple[str, int | None]:
    """(metric to compare, its cut-off in chunks or None) for a pair whose final contexts hold at
    most ``depth_a`` and ``depth_b`` chunks (see the module docstring)."""
    parsed = parse_metric(metric)
    if (rule == "common" and parsed.depth_dependent and depth_a is not None and depth_b is not None
            and depth_a != depth_b and factor != TOP_K):
        common = int(min(depth_a, depth_b))
        if parsed.k is None or parsed.k > common:
            return parsed.at_depth(common), common
    return metric, parsed.k


def run_depths(runs: pd.DataFrame) -> dict[str, int | None]:
    """run_id -> most chunks its final context holds (the runs table's `depth`; results written
    before it existed fall back to top_k)."""
    depth = runs["depth"] if "depth" in runs.columns else pd.Series(np.nan, index=runs.index)
    depth = depth.fillna(runs[TOP_K]) if TOP_K in runs.columns else depth
    return {run_id: (None if pd.isna(value) else int(value)) for run_id, value in zip(runs["run_id"], depth)}


def _pair_differences(matrices: ScoreMatrices, pairs: pd.DataFrame, compared: list[str]) -> dict[str, np.ndarray]:
    """Per pair (columns, in order): per-question differences b - a over questions both scored
    (NaN elsewhere), strict differences over questions both were asked (a failure as the metric's
    worst value, ``names.failure_value``: 0, or 1 for a lower-is-better rate), and the
    counts of scored and failed questions per side."""
    n_questions, n_pairs = len(matrices.question_ids), len(pairs)
    out: dict[str, np.ndarray] = {name: np.full((n_questions, n_pairs), np.nan) for name in ("diff", "strict")}
    for name in ("n_scored_a", "n_scored_b", "n_failed_a", "n_failed_b"):
        out[name] = np.zeros(n_pairs, dtype="int64")
    run_index = pd.Index(matrices.run_ids)
    runs_a, runs_b = run_index.get_indexer(pairs["run_a"]), run_index.get_indexer(pairs["run_b"])
    compared_array = np.asarray(compared, dtype=object)
    for metric in dict.fromkeys(compared):
        columns = np.flatnonzero(compared_array == metric)
        values, asked = matrices.get(str(metric))
        a, b = runs_a[columns], runs_b[columns]
        value_a, value_b = values[:, a], values[:, b]
        both_asked = asked[:, a] & asked[:, b]
        scored_a, scored_b = ~np.isnan(value_a) & both_asked, ~np.isnan(value_b) & both_asked
        out["diff"][:, columns] = np.where(scored_a & scored_b, value_b - value_a, np.nan)
        failed = failure_value(str(metric))
        strict = np.nan_to_num(value_b, nan=failed) - np.nan_to_num(value_a, nan=failed)
        out["strict"][:, columns] = np.where(both_asked, strict, np.nan)
        out["n_scored_a"][columns], out["n_scored_b"][columns] = scored_a.sum(axis=0), scored_b.sum(axis=0)
        out["n_failed_a"][columns] = (both_asked & ~scored_a).sum(axis=0)
        out["n_failed_b"][columns] = (both_asked & ~scored_b).sum(axis=0)
    return out


def _nanmean_columns(matrix: np.ndarray) -> np.ndarray:
    counts = (~np.isnan(matrix)).sum(axis=0)
    with np.errstate(invalid="ignore"):
        return np.where(counts > 0, np.nansum(matrix, axis=0) / np.maximum(counts, 1), np.nan)


def _with_stats(rows: pd.DataFrame, diffs: np.ndarray, strict: np.ndarray, units: np.ndarray,
                unit: str) -> pd.DataFrame:
    column = statistics.column_stats(diffs, units)
    present = ~np.isnan(diffs)
    return rows.assign(
        unit=unit, n=column.n, n_units=column.n_units, diff=column.mean, ci_low=column.ci_low,
        ci_high=column.ci_high, p=column.p_value, strict_diff=_nanmean_columns(strict),
        wins=(present & (np.nan_to_num(diffs) > 0)).sum(axis=0), ties=(present & (diffs == 0)).sum(axis=0),
        losses=(present & (np.nan_to_num(diffs) < 0)).sum(axis=0),
        units_b_better=column.units_positive, units_b_worse=column.units_negative,
    )


class Comparer:
    """Comparisons over one Results; build once, ask for pairs and factor effects of any metrics."""

    def __init__(self, results: Results, depth_rule: DepthRule = "common") -> None:
        if depth_rule not in DEPTH_RULES:
            raise ValueError(f"unknown depth rule '{depth_rule}'. Valid rules: {', '.join(DEPTH_RULES)}")
        self.results = results
        self.depth_rule = depth_rule
        self.runs = results.runs.reset_index(drop=True)
        self.matrices = ScoreMatrices(results, self.runs["run_id"].astype(str).tolist())
        self.depths = run_depths(self.runs)
        self._pairs: pd.DataFrame | None = None
        self._latency: pd.Series | None = None

    @property
    def units(self) -> np.ndarray:
        """Each question's unit code, in the matrices' question order."""
        return statistics.unit_codes(self.matrices.question_ids, self.results.units)

    @property
    def pairs(self) -> pd.DataFrame:
        if self._pairs is None:
            # Shared by every view of the same runs (the factor and the pair view each build a Comparer).
            self._pairs = self.results.derived("single_factor_pairs", lambda: single_factor_pairs(self.runs))
        return self._pairs

    @property
    def latency_ms(self) -> pd.Series:
        if self._latency is None:
            from ragkit.analysis.latency import run_latency

            self._latency = run_latency(self.results.stages) * 1000
        return self._latency

    def _compared(self, pairs: pd.DataFrame, metric: str) -> tuple[list[str], list[int | None]]:
        chosen = [compared_metric(metric, self.depths.get(a), self.depths.get(b), factor, self.depth_rule)
                  for a, b, factor in zip(pairs["run_a"], pairs["run_b"], pairs["factor"])]
        return [name for name, _ in chosen], [depth for _, depth in chosen]

    def _latency_diff(self, pairs: pd.DataFrame) -> np.ndarray:
        latency = self.latency_ms
        return (pairs["run_b"].map(latency) - pairs["run_a"].map(latency)).to_numpy(dtype="float64")

    def pair_comparisons(self, metrics: list[str], pairs: pd.DataFrame | None = None) -> pd.DataFrame:
        """Every pair (default: every single-factor pair) x metric, without p_holm."""
        pairs = self.pairs if pairs is None else pairs.reset_index(drop=True)
        if pairs.empty:
            return _finish([])
        plans = {metric: self._compared(pairs, metric) for metric in metrics}
        self.matrices.load([name for compared, _ in plans.values() for name in compared])
        latency = self._latency_diff(pairs)
        units = self.units
        frames = []
        for metric in metrics:
            compared, depths = plans[metric]
            # A block of pairs at a time: a thousand runs have tens of thousands of pairs, and each
            # pair's per-question differences are a column of questions x pairs arrays.
            for start in range(0, len(pairs), PAIR_BLOCK):
                block = pairs.iloc[start:start + PAIR_BLOCK].reset_index(drop=True)
                end = start + len(block)
                differences = _pair_differences(self.matrices, block, compared[start:end])
                rows = pd.DataFrame({
                    "kind": PAIR, "factor": block["factor"], "level_a": block["value_a"], "level_b": block["value_b"],
                    "run_a": block["run_a"], "run_b": block["run_b"], "pairs": 1, "metric": metric,
                    "metric_compared": compared[start:end], "depth": pd.array(depths[start:end], dtype="Int64"),
                    **{name: differences[name] for name in ("n_scored_a", "n_scored_b", "n_failed_a", "n_failed_b")},
                    "latency_ms_diff": latency[start:end],
                })
                frames.append(_with_stats(rows, differences["diff"], differences["strict"], units, self.results.unit))
        return _finish(frames)

    def _level_means(self, factor_pairs: pd.DataFrame, compared: list[str], failed: float) -> dict[str, float]:
        """Mean of each level's runs in these pairs (failures as ``failed``), averaged over its runs."""
        means: dict[str, list[float]] = {}
        run_index, compared_array = pd.Index(self.matrices.run_ids), np.asarray(compared, dtype=object)
        for side in ("a", "b"):
            runs = run_index.get_indexer(factor_pairs[f"run_{side}"])
            side_means = np.empty(len(factor_pairs))
            for metric in dict.fromkeys(compared):  # one lookup per metric, not per pair
                columns = np.flatnonzero(compared_array == metric)
                side_means[columns] = self.matrices.run_means(metric, failed)[runs[columns]]
            for level, mean in zip(factor_pairs[f"value_{side}"], side_means.tolist()):
                if not np.isnan(mean):
                    means.setdefault(level, []).append(mean)
        return {level: float(np.mean(values)) for level, values in means.items()}

    def factor_effects(self, metrics: list[str], factors: list[str] | None = None) -> pd.DataFrame:
        """Per factor, metric and level: the level (a) against the factor's best level (b),
        paired over every matched setting of the other factors; without p_holm."""
        pairs = self.pairs
        if pairs.empty:
            return _finish([])
        levels = factor_levels(self.runs)
        self.matrices.load([name for metric in metrics for name in self._compared(pairs, metric)[0]])
        frames = []
        for factor in dict.fromkeys(pairs["factor"]):
            if factors is not None and factor not in factors:
                continue
            factor_pairs = pairs[pairs["factor"] == factor].reset_index(drop=True)
            order = level_order(self.runs, levels.reset_index(drop=True), factor)
            for metric in metrics:
                compared, depths = self._compared(factor_pairs, metric)
                means = self._level_means(factor_pairs, compared, failure_value(metric))
                if not means:
                    continue
                ranked = sorted(means, key=lambda level: order[level])
                direction = better_direction(metric)
                best = max(ranked, key=lambda level: direction * means[level]) if direction else ranked[0]
                frames.append(self._against(factor_pairs, compared, depths, factor, metric, best, ranked))
        return _finish(frames)

    def _against(self, factor_pairs: pd.DataFrame, compared: list[str], depths: list[int | None], factor: str,
                 metric: str, best: str, levels: list[str]) -> pd.DataFrame:
        """Rows "level vs best" for every other level that some pair matches with the best one."""
        # Orient every pair that involves the best level as (other level, best).
        involves = (factor_pairs["value_a"] == best) | (factor_pairs["value_b"] == best)
        chosen = factor_pairs[involves].reset_index(drop=True)
        compared = [name for name, keep in zip(compared, involves) if keep]
        depths = [depth for depth, keep in zip(depths, involves) if keep]
        flip = chosen["value_a"] == best
        oriented = chosen.assign(
            run_a=chosen["run_b"].where(flip, chosen["run_a"]), run_b=chosen["run_a"].where(flip, chosen["run_b"]),
            value_a=chosen["value_b"].where(flip, chosen["value_a"]), value_b=best,
        )
        latency = self._latency_diff(oriented)
        records, diff_columns, strict_columns = [], [], []
        for level in levels:
            mine = np.flatnonzero((oriented["value_a"] == level).to_numpy())
            if level == best or not len(mine):
                continue
            # One level's pairs at a time: only its questions x pairs differences are held.
            differences = _pair_differences(self.matrices, oriented.iloc[mine].reset_index(drop=True),
                                            [compared[i] for i in mine])
            shown_depths = {depths[i] for i in mine}
            records.append({
                "kind": MARGINAL, "factor": factor, "level_a": level, "level_b": best, "run_a": None, "run_b": None,
                "pairs": len(mine), "metric": metric,
                "metric_compared": ", ".join(dict.fromkeys(compared[i] for i in mine)),
                "depth": next(iter(shown_depths)) if len(shown_depths) == 1 else None,
                **{name: int(differences[name].sum())
                   for name in ("n_scored_a", "n_scored_b", "n_failed_a", "n_failed_b")},
                "latency_ms_diff": float(np.nanmean(latency[mine])) if np.isfinite(latency[mine]).any() else np.nan,
            })
            # A question's difference is its mean over the matched settings, so each counts once.
            diff_columns.append(_nanmean_rows(differences["diff"]))
            strict_columns.append(_nanmean_rows(differences["strict"]))
        if not records:
            return pd.DataFrame(columns=COLUMNS)
        rows = pd.DataFrame.from_records(records).astype({"depth": "Int64"})
        return _with_stats(rows, np.column_stack(diff_columns), np.column_stack(strict_columns), self.units,
                           self.results.unit)


def _nanmean_rows(matrix: np.ndarray) -> np.ndarray:
    return _nanmean_columns(matrix.T)


def _finish(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [frame for frame in frames if not frame.empty]
    if not frames:
        return pd.DataFrame({column: pd.Series(dtype="object") for column in COLUMNS})
    table = pd.concat(frames, ignore_index=True)
    table["p_holm"] = np.nan
    return table[COLUMNS]


def with_holm(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with p_holm over all its rows: the family is exactly what is shown."""
    return table.assign(p_holm=statistics.holm(table["p"].to_numpy(dtype="float64")) if len(table) else [])


def compare(results: Results, metrics: list[str], factor_rows: bool = True, pair_rows: bool = True,
            depth_rule: DepthRule = "common") -> pd.DataFrame:
    """Factor effects (each level vs the best) and/or every single-factor pair, for ``metrics``,
    Holm-corrected as one family over all rows returned."""
    comparer = Comparer(results, depth_rule)
    parts = []
    if factor_rows:
        parts.append(comparer.factor_effects(metrics))
    if pair_rows:
        parts.append(comparer.pair_comparisons(metrics))
    return with_holm(_finish(parts))

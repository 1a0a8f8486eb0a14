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
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from ragkit.analysis import matrices as score_matrices
from ragkit.analysis import statistics
from ragkit.analysis.loading import Results
from ragkit.analysis.matrices import ScoreMatrices, nanmean_columns
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


@dataclass(frozen=True)
class _Block:
    """The pairs compared on one metric (``columns`` of the pairs given), questions x pairs:
    each side's value, whether both were asked, whether each side scored, and the strict
    difference (a failure as the metric's worst value, ``names.failure_value``: 0, or 1 for a
    lower-is-better rate)."""

    columns: np.ndarray
    value_a: np.ndarray
    value_b: np.ndarray
    both_asked: np.ndarray
    scored_a: np.ndarray
    scored_b: np.ndarray
    strict: np.ndarray


def _blocks(matrices: ScoreMatrices, runs_a: np.ndarray, runs_b: np.ndarray, compared: np.ndarray):
    """One ``_Block`` per metric compared (``runs_a`` and ``runs_b`` are positions in the
    matrices' runs, ``compared`` each pair's metric)."""
    for metric in dict.fromkeys(compared.tolist()):
        columns = np.flatnonzero(compared == metric)
        values, asked = matrices.get(str(metric))
        a, b = runs_a[columns], runs_b[columns]
        value_a, value_b = values[:, a], values[:, b]
        both_asked = asked[:, a] & asked[:, b]
        scored_a, scored_b = ~np.isnan(value_a) & both_asked, ~np.isnan(value_b) & both_asked
        failed = failure_value(str(metric))
        strict = np.where(scored_b, value_b, failed) - np.where(scored_a, value_a, failed)
        yield _Block(columns, value_a, value_b, both_asked, scored_a, scored_b, strict)


def _pair_differences(matrices: ScoreMatrices, runs_a: np.ndarray, runs_b: np.ndarray,
                      compared: np.ndarray) -> dict[str, np.ndarray]:
    """Per pair (columns, in order): per-question differences b - a over questions both scored
    (NaN elsewhere), strict differences over questions both were asked, and the counts of
    scored and failed questions per side (``_blocks``)."""
    n_questions, n_pairs = len(matrices.question_ids), len(runs_a)
    out: dict[str, np.ndarray] = {name: np.full((n_questions, n_pairs), np.nan) for name in ("diff", "strict")}
    for name in ("n_scored_a", "n_scored_b", "n_failed_a", "n_failed_b"):
        out[name] = np.zeros(n_pairs, dtype="int64")
    for block in _blocks(matrices, runs_a, runs_b, compared):
        columns = block.columns
        out["diff"][:, columns] = np.where(block.scored_a & block.scored_b, block.value_b - block.value_a, np.nan)
        out["strict"][:, columns] = np.where(block.both_asked, block.strict, np.nan)
        out["n_scored_a"][columns], out["n_scored_b"][columns] = block.scored_a.sum(axis=0), block.scored_b.sum(axis=0)
        out["n_failed_a"][columns] = (block.both_asked & ~block.scored_a).sum(axis=0)
        out["n_failed_b"][columns] = (block.both_asked & ~block.scored_b).sum(axis=0)
    return out


def _question_means(matrices: ScoreMatrices, runs_a: np.ndarray, runs_b: np.ndarray,
                    compared: np.ndarray) -> dict[str, np.ndarray]:
    """What ``_pair_differences`` gives, reduced over the pairs as it goes: per question, the mean
    difference and strict difference over the pairs it counts in (NaN in none), and the
    totals of scored and failed questions per side. A level's effect needs no more, and its
    questions x pairs matrices, each written and then read again, were half its cost."""
    n_questions = len(matrices.question_ids)
    sums = {name: np.zeros(n_questions) for name in ("diff", "strict")}
    counts = {name: np.zeros(n_questions, dtype="int64") for name in ("diff", "strict")}
    totals = dict.fromkeys(("n_scored_a", "n_scored_b", "n_failed_a", "n_failed_b"), 0)
    for block in _blocks(matrices, runs_a, runs_b, compared):
        both_scored = block.scored_a & block.scored_b
        sums["diff"] += np.where(both_scored, block.value_b - block.value_a, 0.0).sum(axis=1)
        counts["diff"] += both_scored.sum(axis=1)
        sums["strict"] += np.where(block.both_asked, block.strict, 0.0).sum(axis=1)
        counts["strict"] += block.both_asked.sum(axis=1)
        n_scored_a, n_scored_b = int(block.scored_a.sum()), int(block.scored_b.sum())
        n_asked = int(block.both_asked.sum())
        totals["n_scored_a"] += n_scored_a
        totals["n_scored_b"] += n_scored_b
        totals["n_failed_a"] += n_asked - n_scored_a
        totals["n_failed_b"] += n_asked - n_scored_b
    with np.errstate(invalid="ignore", divide="ignore"):
        means = {name: np.where(counts[name] > 0, sums[name] / np.maximum(counts[name], 1), np.nan)
                 for name in sums}
    return {**means, **{name: np.array(total) for name, total in totals.items()}}


def _with_stats(rows: pd.DataFrame, diffs: np.ndarray, strict: np.ndarray, units: np.ndarray,
                unit: str) -> pd.DataFrame:
    column = statistics.column_stats(diffs, units)
    present = ~np.isnan(diffs)
    return rows.assign(
        unit=unit, n=column.n, n_units=column.n_units, diff=column.mean, ci_low=column.ci_low,
        ci_high=column.ci_high, p=column.p_value, strict_diff=nanmean_columns(strict),
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
        # Shared with every other view of these runs (means, curves, the runs table).
        self.matrices = score_matrices.for_results(results)
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
            from ragkit.analysis.latency import latency_per_run, shared_stage_latency

            self._latency = latency_per_run(shared_stage_latency(self.results)) * 1000
        return self._latency

    def _positions(self, run_ids: pd.Series) -> np.ndarray:
        return pd.Index(self.matrices.run_ids).get_indexer(run_ids.astype(str))

    def _compared(self, pairs: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """Per pair, the metric it is compared on and its cut-off (object arrays): decided once
        per distinct (depth a, depth b, factor), of which a grid has a handful, not per pair."""
        missing = -1  # a run without a known depth
        depth_a = pairs["run_a"].map(self.depths).fillna(missing).to_numpy(dtype="int64")
        depth_b = pairs["run_b"].map(self.depths).fillna(missing).to_numpy(dtype="int64")
        factor_codes, factor_names = pd.factorize(pairs["factor"].to_numpy(dtype=object))
        # One integer per (depth a, depth b, factor): depths are small, factors few.
        span = max(int(depth_a.max(initial=0)), int(depth_b.max(initial=0))) + 2
        combined = (factor_codes * span + depth_a + 1) * span + depth_b + 1
        distinct_keys, codes = np.unique(combined, return_inverse=True)
        distinct = [(int(key // span % span) - 1, int(key % span) - 1, factor_names[int(key // span // span)])
                    for key in distinct_keys]
        chosen = [compared_metric(metric, None if a == missing else a, None if b == missing else b, factor,
                                  self.depth_rule) for a, b, factor in distinct]
        names = np.asarray([name for name, _ in chosen] or [metric], dtype=object)
        depths = np.empty(max(len(chosen), 1), dtype=object)
        depths[:len(chosen)] = [depth for _, depth in chosen]
        return names[codes], depths[codes]

    def _latency_diff(self, runs_a: np.ndarray, runs_b: np.ndarray) -> np.ndarray:
        latency = self.latency_ms.reindex(self.matrices.run_ids).to_numpy(dtype="float64")
        return latency[runs_b] - latency[runs_a]

    def pair_comparisons(self, metrics: list[str], pairs: pd.DataFrame | None = None) -> pd.DataFrame:
        """Every pair (default: every single-factor pair) x metric, without p_holm."""
        pairs = self.pairs if pairs is None else pairs.reset_index(drop=True)
        if pairs.empty:
            return _finish([])
        plans = {metric: self._compared(pairs, metric) for metric in metrics}
        self.matrices.load([name for compared, _ in plans.values() for name in dict.fromkeys(compared.tolist())])
        runs_a, runs_b = self._positions(pairs["run_a"]), self._positions(pairs["run_b"])
        latency = self._latency_diff(runs_a, runs_b)
        units = self.units
        frames = []
        for metric in metrics:
            compared, depths = plans[metric]
            # A block of pairs at a time: a thousand runs have tens of thousands of pairs, and each
            # pair's per-question differences are a column of questions x pairs arrays.
            for start in range(0, len(pairs), PAIR_BLOCK):
                block = pairs.iloc[start:start + PAIR_BLOCK].reset_index(drop=True)
                end = start + len(block)
                differences = _pair_differences(self.matrices, runs_a[start:end], runs_b[start:end],
                                                compared[start:end])
                rows = pd.DataFrame({
                    "kind": PAIR, "factor": block["factor"], "level_a": block["value_a"], "level_b": block["value_b"],
                    "run_a": block["run_a"], "run_b": block["run_b"], "pairs": 1, "metric": metric,
                    "metric_compared": compared[start:end].tolist(),
                    "depth": pd.array(depths[start:end].tolist(), dtype="Int64"),
                    **{name: differences[name] for name in ("n_scored_a", "n_scored_b", "n_failed_a", "n_failed_b")},
                    "latency_ms_diff": latency[start:end],
                })
                frames.append(_with_stats(rows, differences["diff"], differences["strict"], units, self.results.unit))
        return _finish(frames)

    def _level_means(self, runs_a: np.ndarray, runs_b: np.ndarray, levels_a: np.ndarray, levels_b: np.ndarray,
                     compared: np.ndarray, failed: float) -> dict[str, float]:
        """Mean of each level's runs in these pairs (failures as ``failed``), averaged over its
        pairs: one lookup per compared metric and one weighted count per level, not per pair."""
        side_means = np.empty(2 * len(runs_a))
        runs = np.concatenate([runs_a, runs_b])
        both = np.concatenate([compared, compared])
        for metric in dict.fromkeys(compared.tolist()):
            columns = np.flatnonzero(both == metric)
            side_means[columns] = self.matrices.run_means(str(metric), failed)[runs[columns]]
        known = ~np.isnan(side_means)
        codes, levels = pd.factorize(np.concatenate([levels_a, levels_b])[known])
        sums = np.bincount(codes, weights=side_means[known], minlength=len(levels))
        counts = np.bincount(codes, minlength=len(levels))
        return {level: float(sums[i] / counts[i]) for i, level in enumerate(levels)}

    def factor_effects(self, metrics: list[str], factors: list[str] | None = None) -> pd.DataFrame:
        """Per factor, metric and level: the level (a) against the factor's best level (b),
        paired over every matched setting of the other factors; without p_holm."""
        pairs = self.pairs
        if pairs.empty:
            return _finish([])
        levels = factor_levels(self.runs)
        plans = {metric: self._compared(pairs, metric) for metric in metrics}
        self.matrices.load([name for compared, _ in plans.values() for name in dict.fromkeys(compared.tolist())])
        all_a, all_b = self._positions(pairs["run_a"]), self._positions(pairs["run_b"])
        factor_column = pairs["factor"].to_numpy(dtype=object)
        frames = []
        for factor in dict.fromkeys(factor_column.tolist()):
            if factors is not None and factor not in factors:
                continue
            mine = np.flatnonzero(factor_column == factor)
            runs_a, runs_b = all_a[mine], all_b[mine]
            levels_a = pairs["value_a"].to_numpy(dtype=object)[mine]
            levels_b = pairs["value_b"].to_numpy(dtype=object)[mine]
            order = level_order(self.runs, levels.reset_index(drop=True), factor)
            for metric in metrics:
                compared, depths = plans[metric][0][mine], plans[metric][1][mine]
                means = self._level_means(runs_a, runs_b, levels_a, levels_b, compared, failure_value(metric))
                if not means:
                    continue
                ranked = sorted(means, key=lambda level: order[level])
                direction = better_direction(metric)
                best = max(ranked, key=lambda level: direction * means[level]) if direction else ranked[0]
                frames.append(self._against(runs_a, runs_b, levels_a, levels_b, compared, depths, factor, metric,
                                            best, ranked))
        return _finish(frames)

    def _against(self, runs_a: np.ndarray, runs_b: np.ndarray, levels_a: np.ndarray, levels_b: np.ndarray,
                 compared: np.ndarray, depths: np.ndarray, factor: str, metric: str, best: str,
                 levels: list[str]) -> pd.DataFrame:
        """Rows "level vs best" for every other level that some pair matches with the best one."""
        # Orient every pair that involves the best level as (other level, best).
        involves = np.flatnonzero((levels_a == best) | (levels_b == best))
        flip = levels_a[involves] == best
        other = np.where(flip, levels_b[involves], levels_a[involves])
        oriented_a = np.where(flip, runs_b[involves], runs_a[involves])
        oriented_b = np.where(flip, runs_a[involves], runs_b[involves])
        compared, depths = compared[involves], depths[involves]
        latency = self._latency_diff(oriented_a, oriented_b)
        records, diff_columns, strict_columns = [], [], []
        for level in levels:
            mine = np.flatnonzero(other == level)
            if level == best or not len(mine):
                continue
            # A question's difference is its mean over the matched settings, so each counts once.
            differences = _question_means(self.matrices, oriented_a[mine], oriented_b[mine], compared[mine])
            shown_depths = set(depths[mine].tolist())
            records.append({
                "kind": MARGINAL, "factor": factor, "level_a": level, "level_b": best, "run_a": None, "run_b": None,
                "pairs": len(mine), "metric": metric,
                "metric_compared": ", ".join(dict.fromkeys(compared[mine].tolist())),
                "depth": next(iter(shown_depths)) if len(shown_depths) == 1 else None,
                **{name: int(differences[name].sum())
                   for name in ("n_scored_a", "n_scored_b", "n_failed_a", "n_failed_b")},
                "latency_ms_diff": float(np.nanmean(latency[mine])) if np.isfinite(latency[mine]).any() else np.nan,
            })
            diff_columns.append(differences["diff"])
            strict_columns.append(differences["strict"])
        if not records:
            return pd.DataFrame(columns=COLUMNS)
        rows = pd.DataFrame.from_records(records).astype({"depth": "Int64"})
        return _with_stats(rows, np.column_stack(diff_columns), np.column_stack(strict_columns), self.units,
                           self.results.unit)


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

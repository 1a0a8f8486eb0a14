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
  but could not score, ``n_only_a`` / ``n_only_b`` those asked of one side only; ``diff`` is over
  the questions both scored, and ``strict_diff`` over every question both were asked, a failure
  scoring the failure value, each with its own CI, p and adjusted p (``differences``), so nothing gets
  better by crashing; ``signs_disagree`` flags a row whose two differences point opposite ways.
- **The unit is named.** Intervals and p-values treat the question's source document as the
  independent draw (``unit``), see ``statistics``.
- **Families by the question asked** (``families``): per metric, the factor rows form one family
  and the pairs another; a row's ``p`` and ``strict_p`` are two tests of its family (one where
  they are the same test), adjusted together by the family's joint test (``p_adj``, ``strict_p_adj``), with a
  simultaneous interval beside the unadjusted one (``sim_ci_*``); ``family_adjustment`` describes it.
- **One answer per factor, against a reference fixed in advance.** ``factor`` rows compare each
  level (``level_b``) with the factor's *reference* (``level_a``): the baseline the experiment
  names (``baseline:`` in its YAML, or ``ragkit report --baseline``), else the factor's first
  level as the experiment lists it (both stored beside the results, ``baselines.json``), else (a
  folder without that file) the first in the order the pairs use (component absent first, off <
  heuristic < llm, smaller numbers first, other names alphabetically). Never the level that scored
  best: testing every level against the best one picks the comparison from the same data and inflates false positives
  (13% instead of 5% with 8 levels, tests/analysis/test_reference.py). The best level only orders
  the rows (best first). Each row is paired over every matched setting of the other factors
  (``settings``: those where either run has the metric); a question's difference is its mean over
  the matched pairs, so each question counts once (``n``), while the ``n_scored_*`` /
  ``n_failed_*`` / ``n_only_*`` of a factor row count (question, setting) cases.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from ragkit.analysis import families, statistics
from ragkit.analysis import matrices as score_matrices
from ragkit.analysis.differences import (
    CASE_COUNTS,
    INFLUENCE,
    pair_differences,
    question_means,
    sample_key,
    with_stats,
)
from ragkit.analysis.loading import Results
from ragkit.analysis.pairing import TOP_K, factor_levels, level_order, single_factor_pairs
from ragkit.errors import ConfigError
from ragkit.metrics.names import better_direction, failure_value, parse_metric

DepthRule = Literal["common", "asked"]
DEPTH_RULES = ("common", "asked")
PAIR = "pair"
# Pairs whose per-question differences are computed together (memory: questions x PAIR_BLOCK floats).
PAIR_BLOCK = 512
MARGINAL = "factor"
COLUMNS = [
    "kind", "factor", "level_a", "level_b", "run_a", "run_b", "settings", "metric", "metric_compared", "depth",
    "unit", "n", "n_units", *CASE_COUNTS, "diff", "se", "df", "ci_low", "ci_high", "sim_ci_low", "sim_ci_high", "p",
    "p_adj", "p_note", "n_strict", "strict_diff", "strict_se", "strict_df", "strict_ci_low", "strict_ci_high",
    "strict_sim_ci_low", "strict_sim_ci_high", "strict_p", "strict_p_adj", "strict_p_note", "family",
    "family_tests",
    "signs_disagree", "wins", "ties", "losses", "units_b_better", "units_b_worse", "latency_ms_diff", "mde",
]
# Why a factor's reference level is what it is (``Reference.source``).
NAMED = "named in the experiment"
NAMED_HERE = "named with --baseline"
FIRST_LISTED = "first level listed in the experiment, no baseline named"
FIRST_LEVEL = ("first level in the pairs' order (off first, smaller numbers first, names alphabetically), "
               "no baseline named")


@dataclass(frozen=True)
class Reference:
    """A factor's reference level and why it is the reference (fixed before any score is read)."""

    factor: str
    level: str
    source: str


def resolve_level(factor: str, named: object, levels: list[str]) -> str | None:
    """The level of ``levels`` (in order) that ``named`` names: the level itself, or the first level
    whose main value it is (``token`` names ``token(chunk_size=256)``); None when none matches."""
    text = str(named)
    if text in levels:
        return text
    return next((level for level in levels if level.split("(", 1)[0] == text), None)


def check_baselines(named: Mapping[str, object], runs: pd.DataFrame) -> None:
    """A ConfigError naming the first baseline whose factor or level these runs do not have."""
    levels = factor_levels(runs)
    for factor, level in named.items():
        if factor not in levels.columns:
            raise ConfigError(f"baseline: unknown factor '{factor}'. Valid factors: {', '.join(levels.columns)}")
        order = level_order(runs.reset_index(drop=True), levels.reset_index(drop=True), factor)
        choices = sorted(order, key=order.__getitem__)
        if resolve_level(factor, level, choices) is None:
            raise ConfigError(f"baseline: unknown level '{level}' of {factor}. Valid levels: {', '.join(choices)}")


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


class Comparer:
    """Comparisons over one Results; build once, ask for pairs and factor effects of any metrics."""

    def __init__(self, results: Results, depth_rule: DepthRule = "common",
                 baselines: Mapping[str, object] | None = None) -> None:
        """``baselines``: factor -> the level its others are tested against, named here (``ragkit
        report --baseline``); they take the place of those the experiment named (the results
        folder's ``baselines.json``) for the same factor."""
        if depth_rule not in DEPTH_RULES:
            raise ValueError(f"unknown depth rule '{depth_rule}'. Valid rules: {', '.join(DEPTH_RULES)}")
        self.results = results
        self.depth_rule = depth_rule
        stored = results.baselines
        self.baselines: dict[str, tuple[object, str]] = {
            **{factor: (level, FIRST_LISTED) for factor, level in stored.get("first_listed", {}).items()},
            **{factor: (level, NAMED) for factor, level in stored.get("named", {}).items()},
            **{factor: (level, NAMED_HERE) for factor, level in (baselines or {}).items()},
        }
        self.runs = results.runs.reset_index(drop=True)
        # Shared with every other view of these runs (means, curves, the runs table).
        self.matrices = score_matrices.for_results(results)
        self.depths = run_depths(self.runs)
        self._pairs: pd.DataFrame | None = None
        self._latency: pd.Series | None = None
        self._sample: str | None = None

    @property
    def units(self) -> np.ndarray:
        """Each question's unit code, in the matrices' question order."""
        return statistics.unit_codes(self.matrices.question_ids, self.results.units)

    @property
    def sample(self) -> str:
        """The key of these questions and units (``differences.sample_key``): rows compared on them
        are tested jointly within a family."""
        if self._sample is None:
            self._sample = sample_key(self.matrices.question_ids, self.units)
        return self._sample

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

    def references(self, factors: list[str] | None = None) -> list[Reference]:
        """Each factor's reference level (the factors some pair of runs varies, or ``factors``),
        decided from the runs' configurations and the named baselines alone, never from a score."""
        levels = factor_levels(self.runs)
        if factors is None:
            factors = list(dict.fromkeys(self.pairs["factor"].tolist())) if len(self.pairs) else []
        references = []
        for factor in factors:
            order = level_order(self.runs, levels.reset_index(drop=True), factor)
            ordered = sorted(order, key=order.__getitem__)
            if not ordered:
                continue
            named, source = self.baselines.get(factor, (None, FIRST_LEVEL))
            level = None if named is None else resolve_level(factor, named, ordered)
            if level is not None:
                references.append(Reference(factor, level, source))
            elif named is not None:  # e.g. a selection of runs without that level
                references.append(Reference(factor, ordered[0], f"{FIRST_LEVEL}: '{named}' ({source}) is not "
                                                                "among these runs"))
            else:
                references.append(Reference(factor, ordered[0], FIRST_LEVEL))
        return references

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
        """Every pair (default: every single-factor pair) x metric, without p_adj."""
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
                differences = pair_differences(self.matrices, runs_a[start:end], runs_b[start:end],
                                                compared[start:end])
                rows = pd.DataFrame({
                    "kind": PAIR, "factor": block["factor"], "level_a": block["value_a"], "level_b": block["value_b"],
                    "run_a": block["run_a"], "run_b": block["run_b"], "settings": 1, "metric": metric,
                    "metric_compared": compared[start:end].tolist(),
                    "depth": pd.array(depths[start:end].tolist(), dtype="Int64"),
                    **{name: differences[name] for name in CASE_COUNTS},
                    "latency_ms_diff": latency[start:end],
                })
                frames.append(with_stats(rows, differences["diff"], differences["strict"], units, self.results.unit,
                                         self.sample))
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
        """Per factor, metric and level: the level (b) against the factor's reference (a,
        ``references``), paired over every matched setting of the other factors; rows ordered
        best level first; without p_adj."""
        pairs = self.pairs
        if pairs.empty:
            return _finish([])
        plans = {metric: self._compared(pairs, metric) for metric in metrics}
        self.matrices.load([name for compared, _ in plans.values() for name in dict.fromkeys(compared.tolist())])
        all_a, all_b = self._positions(pairs["run_a"]), self._positions(pairs["run_b"])
        factor_column = pairs["factor"].to_numpy(dtype=object)
        present = [f for f in dict.fromkeys(factor_column.tolist()) if factors is None or f in factors]
        references = {reference.factor: reference.level for reference in self.references(present)}
        levels = factor_levels(self.runs).reset_index(drop=True)
        frames = []
        for factor in present:
            mine = np.flatnonzero(factor_column == factor)
            runs_a, runs_b = all_a[mine], all_b[mine]
            levels_a = pairs["value_a"].to_numpy(dtype=object)[mine]
            levels_b = pairs["value_b"].to_numpy(dtype=object)[mine]
            for metric in metrics:
                compared, depths = plans[metric][0][mine], plans[metric][1][mine]
                means = self._level_means(runs_a, runs_b, levels_a, levels_b, compared, failure_value(metric))
                if not means:
                    continue
                order = level_order(self.runs, levels, factor)
                ranked = sorted(means, key=lambda level: order[level])
                direction = better_direction(metric)
                # The best level orders the rows (best first); it does not choose what is tested.
                if direction:
                    ranked = sorted(ranked, key=lambda level: -direction * means[level])
                frames.append(self._against(runs_a, runs_b, levels_a, levels_b, compared, depths, factor, metric,
                                            references[factor], ranked))
        return _finish(frames)

    def _against(self, runs_a: np.ndarray, runs_b: np.ndarray, levels_a: np.ndarray, levels_b: np.ndarray,
                 compared: np.ndarray, depths: np.ndarray, factor: str, metric: str, reference: str,
                 levels: list[str]) -> pd.DataFrame:
        """Rows "level vs reference" for every other level that some pair matches with the reference."""
        # Orient every pair that involves the reference as (reference, other level).
        involves = np.flatnonzero((levels_a == reference) | (levels_b == reference))
        flip = levels_b[involves] == reference
        other = np.where(flip, levels_a[involves], levels_b[involves])
        oriented_a = np.where(flip, runs_b[involves], runs_a[involves])
        oriented_b = np.where(flip, runs_a[involves], runs_b[involves])
        compared, depths = compared[involves], depths[involves]
        latency = self._latency_diff(oriented_a, oriented_b)
        records, diff_columns, strict_columns = [], [], []
        for level in levels:
            mine = np.flatnonzero(other == level)
            if level == reference or not len(mine):
                continue
            # A question's difference is its mean over the matched settings, so each counts once.
            differences = question_means(self.matrices, oriented_a[mine], oriented_b[mine], compared[mine])
            if np.isnan(differences["strict"]).all():  # no question asked of both: nothing to compare
                continue
            shown_depths = set(depths[mine].tolist())
            records.append({
                "kind": MARGINAL, "factor": factor, "level_a": reference, "level_b": level, "run_a": None,
                "run_b": None, "settings": int(differences["settings"]), "metric": metric,
                "metric_compared": ", ".join(dict.fromkeys(compared[mine].tolist())),
                "depth": next(iter(shown_depths)) if len(shown_depths) == 1 else None,
                **{name: int(differences[name]) for name in CASE_COUNTS},
                "latency_ms_diff": float(np.nanmean(latency[mine])) if np.isfinite(latency[mine]).any() else np.nan,
            })
            diff_columns.append(differences["diff"])
            strict_columns.append(differences["strict"])
        if not records:
            return pd.DataFrame(columns=COLUMNS)
        rows = pd.DataFrame.from_records(records).astype({"depth": "Int64"})
        return with_stats(rows, np.column_stack(diff_columns), np.column_stack(strict_columns), self.units,
                          self.results.unit, self.sample)


def _finish(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [frame for frame in frames if not frame.empty]
    if not frames:
        return pd.DataFrame({column: pd.Series(dtype="object") for column in [*COLUMNS, INFLUENCE]})
    table = pd.concat(frames, ignore_index=True)
    for column in ("p_adj", "strict_p_adj", "sim_ci_low", "sim_ci_high", "strict_sim_ci_low",
                   "strict_sim_ci_high", "family_tests"):
        table[column] = np.nan
    table["family"] = None
    return table[[*COLUMNS, INFLUENCE]]


def with_adjusted(table: pd.DataFrame, alpha: float = families.ALPHA, question: str | None = None) -> pd.DataFrame:
    """``table`` with each row's family, adjusted p and simultaneous intervals (``families``): the
    family is decided by the row's kind and metric (or a view's own ``question`` and the metric),
    so a family's rows given here whole get the same numbers in any view."""
    return families.with_families(table, alpha, question)


def family_adjustment(table: pd.DataFrame) -> dict:
    """What the family adjustment of ``table`` (``with_adjusted``) ran over: per family its rows and
    tests (a row without a p is not a test), and the rule."""
    return families.describe(table)


def compare(results: Results, metrics: list[str], factor_rows: bool = True, pair_rows: bool = True,
            depth_rule: DepthRule = "common", baselines: Mapping[str, object] | None = None) -> pd.DataFrame:
    """Factor effects (each level vs its factor's reference) and/or every single-factor pair, for
    ``metrics``, adjusted within each family by its joint test (``families``: per kind and metric, the same
    whatever else is asked).

    One row per comparison: its kind, factor and levels, the paired difference with its CI and
    adjusted p, and the strict form in which a failure scores 0::

        >>> from ragkit.analysis.loading import load_results
        >>> table = compare(load_results("results/quickstart"), ["recall@5"])
        >>> table[["kind", "factor", "level_a", "level_b", "diff", "ci_low", "ci_high", "p_adj"]]
    """
    comparer = Comparer(results, depth_rule, baselines)
    parts = []
    if factor_rows:
        parts.append(comparer.factor_effects(metrics))
    if pair_rows:
        parts.append(comparer.pair_comparisons(metrics))
    return with_adjusted(_finish(parts))

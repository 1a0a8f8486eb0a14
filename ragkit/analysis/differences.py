"""Per-question differences between paired runs, and their statistics: the part of the comparison
engine that turns score matrices into the numbers of one comparison row.

Two differences per question, each with its own interval, p-value and (later) adjusted p:

- ``diff``: b - a over the questions both runs *scored* (a failure on either side drops it);
- ``strict``: b - a over every question both runs were *asked*, a failure scoring the metric's
  failure value (``names.failure_value``: 0, or 1 for a lower-is-better rate), so a run cannot
  look better by crashing on the hard questions.

A question asked of one side only (a run stopped part way, a metric one run does not compute) is
in neither difference; it is counted (``n_only_a`` / ``n_only_b``) so the overlap is never silent.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ragkit.analysis import statistics
from ragkit.analysis.matrices import ScoreMatrices
from ragkit.metrics.names import failure_value

# Counts per comparison: for a pair of runs they count questions; for a factor row (several matched
# settings) they count (question, setting) cases, which a pair's row shares as one setting.
CASE_COUNTS = ("n_scored_a", "n_scored_b", "n_failed_a", "n_failed_b", "n_only_a", "n_only_b")
# The column of each row's ``Influence``: read by the family's joint test (``families``), which drops it.
INFLUENCE = "unit_influence"


@dataclass(frozen=True, eq=False)
class Influence:
    """One comparison row's per-unit shares of its two means' errors (``statistics.unit_influence``):
    ``diff`` and ``strict`` over the units of ``sample``, a key of the questions and units they were
    computed on (rows of one sample are correlated through their shared units; rows of different
    samples are treated as independent)."""

    sample: str
    diff: np.ndarray
    strict: np.ndarray
    diff_share: np.ndarray  # each unit's share of the questions (``statistics.unit_shares``)
    strict_share: np.ndarray


def sample_key(question_ids, units: np.ndarray) -> str:
    """A key naming a sample's questions and their units (``Influence.sample``)."""
    digest = hashlib.sha256("\x1f".join(map(str, question_ids)).encode())
    digest.update(np.ascontiguousarray(units, dtype="int64").tobytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Block:
    """The pairs compared on one metric (``columns`` of the pairs given), questions x pairs:
    each side's value, whether both were asked, whether each side scored, what only one side was
    asked, and the strict difference."""

    columns: np.ndarray
    value_a: np.ndarray
    value_b: np.ndarray
    both_asked: np.ndarray
    scored_a: np.ndarray
    scored_b: np.ndarray
    only_a: np.ndarray
    only_b: np.ndarray
    strict: np.ndarray

    def counts(self) -> dict[str, np.ndarray]:
        """Per pair: questions scored and failed per side (among those both were asked), and
        questions asked of one side only."""
        return {
            "n_scored_a": self.scored_a.sum(axis=0), "n_scored_b": self.scored_b.sum(axis=0),
            "n_failed_a": (self.both_asked & ~self.scored_a).sum(axis=0),
            "n_failed_b": (self.both_asked & ~self.scored_b).sum(axis=0),
            "n_only_a": self.only_a.sum(axis=0), "n_only_b": self.only_b.sum(axis=0),
        }


def blocks(matrices: ScoreMatrices, runs_a: np.ndarray, runs_b: np.ndarray, compared: np.ndarray):
    """One ``Block`` per metric compared (``runs_a`` and ``runs_b`` are positions in the
    matrices' runs, ``compared`` each pair's metric)."""
    for metric in dict.fromkeys(compared.tolist()):
        columns = np.flatnonzero(compared == metric)
        values, asked = matrices.get(str(metric))
        a, b = runs_a[columns], runs_b[columns]
        value_a, value_b = values[:, a], values[:, b]
        asked_a, asked_b = asked[:, a], asked[:, b]
        both_asked = asked_a & asked_b
        scored_a, scored_b = ~np.isnan(value_a) & both_asked, ~np.isnan(value_b) & both_asked
        failed = failure_value(str(metric))
        strict = np.where(scored_b, value_b, failed) - np.where(scored_a, value_a, failed)
        yield Block(columns, value_a, value_b, both_asked, scored_a, scored_b, asked_a & ~asked_b,
                    asked_b & ~asked_a, strict)


def pair_differences(matrices: ScoreMatrices, runs_a: np.ndarray, runs_b: np.ndarray,
                     compared: np.ndarray) -> dict[str, np.ndarray]:
    """Per pair (columns, in order): per-question differences b - a over questions both scored
    (NaN elsewhere), strict differences over questions both were asked, and ``CASE_COUNTS``."""
    n_questions, n_pairs = len(matrices.question_ids), len(runs_a)
    out: dict[str, np.ndarray] = {name: np.full((n_questions, n_pairs), np.nan) for name in ("diff", "strict")}
    for name in CASE_COUNTS:
        out[name] = np.zeros(n_pairs, dtype="int64")
    for block in blocks(matrices, runs_a, runs_b, compared):
        columns = block.columns
        out["diff"][:, columns] = np.where(block.scored_a & block.scored_b, block.value_b - block.value_a, np.nan)
        out["strict"][:, columns] = np.where(block.both_asked, block.strict, np.nan)
        for name, counts in block.counts().items():
            out[name][columns] = counts
    return out


def question_means(matrices: ScoreMatrices, runs_a: np.ndarray, runs_b: np.ndarray,
                   compared: np.ndarray) -> dict[str, np.ndarray]:
    """What ``pair_differences`` gives, reduced over the pairs as it goes: per question, the mean
    difference and strict difference over the pairs it counts in (NaN in none); the totals of
    ``CASE_COUNTS`` over the pairs; and ``settings``, the pairs in which either run was asked the
    metric at all. A level's effect needs no more, and its questions x pairs matrices, each written
    and then read again, were half its cost."""
    n_questions = len(matrices.question_ids)
    sums = {name: np.zeros(n_questions) for name in ("diff", "strict")}
    counts = {name: np.zeros(n_questions, dtype="int64") for name in ("diff", "strict")}
    totals = dict.fromkeys((*CASE_COUNTS, "settings"), 0)
    for block in blocks(matrices, runs_a, runs_b, compared):
        both_scored = block.scored_a & block.scored_b
        sums["diff"] += np.where(both_scored, block.value_b - block.value_a, 0.0).sum(axis=1)
        counts["diff"] += both_scored.sum(axis=1)
        sums["strict"] += np.where(block.both_asked, block.strict, 0.0).sum(axis=1)
        counts["strict"] += block.both_asked.sum(axis=1)
        for name, per_pair in block.counts().items():
            totals[name] += int(per_pair.sum())
        totals["settings"] += int((block.both_asked | block.only_a | block.only_b).any(axis=0).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        means = {name: np.where(counts[name] > 0, sums[name] / np.maximum(counts[name], 1), np.nan)
                 for name in sums}
    return {**means, **{name: np.array(total) for name, total in totals.items()}}


def signs_disagree(diff: np.ndarray, strict: np.ndarray) -> np.ndarray:
    """True where the difference over scored questions and the strict one point opposite ways."""
    return np.sign(np.nan_to_num(diff)) * np.sign(np.nan_to_num(strict)) < 0


def with_stats(rows: pd.DataFrame, diffs: np.ndarray, strict: np.ndarray, units: np.ndarray,
               unit: str, sample: str | None = None) -> pd.DataFrame:
    """``rows`` with each comparison's statistics: for ``diffs`` (questions x rows, over scored
    questions) and ``strict`` (over asked questions, failures at the failure value) each its mean,
    standard error and degrees of freedom (CR2), CI, p and the reason a p is missing; questions
    won, tied and lost; units in favour of each side; whether the two differences disagree in sign;
    ``mde``, the smallest difference over scored questions the test detects at 80% power
    (``statistics.detectable_difference``); and ``INFLUENCE``, each row's ``Influence`` in
    ``sample`` (``sample_key``; by default a key of the unit codes alone)."""
    column = statistics.column_stats(diffs, units)
    detectable = statistics.detectable_difference(diffs, units, tested=column)
    strict_column = statistics.column_stats(strict, units)
    present = ~np.isnan(diffs)
    key = sample if sample is not None else sample_key([], units)
    influence_diff, influence_strict = statistics.unit_influence(diffs, units), statistics.unit_influence(strict, units)
    share_diff, share_strict = statistics.unit_shares(diffs, units), statistics.unit_shares(strict, units)
    influences = [Influence(key, influence_diff[:, i], influence_strict[:, i], share_diff[:, i], share_strict[:, i])
                  for i in range(len(rows))]
    return rows.assign(
        unit=unit, n=column.n, n_units=column.n_units, diff=column.mean, se=column.se, df=column.df,
        ci_low=column.ci_low, ci_high=column.ci_high, p=column.p_value, p_note=column.p_note,
        n_strict=strict_column.n, strict_diff=strict_column.mean, strict_se=strict_column.se,
        strict_df=strict_column.df, strict_ci_low=strict_column.ci_low,
        strict_ci_high=strict_column.ci_high, strict_p=strict_column.p_value, strict_p_note=strict_column.p_note,
        signs_disagree=signs_disagree(column.mean, strict_column.mean),
        wins=(present & (np.nan_to_num(diffs) > 0)).sum(axis=0), ties=(present & (diffs == 0)).sum(axis=0),
        losses=(present & (np.nan_to_num(diffs) < 0)).sum(axis=0),
        units_b_better=column.units_positive, units_b_worse=column.units_negative, mde=detectable.mde,
        **{INFLUENCE: influences},
    )

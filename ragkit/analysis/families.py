"""Families of tests: which comparisons are corrected together, named by the question they answer.

A comparison row's adjusted p depends on its family, so the family is fixed by the question asked,
never by what a view happens to show:

- **the factor table on one metric** (``kind == "factor"``): "which levels differ from their
  factor's reference on METRIC?", every level of every factor;
- **the single-factor pairs on one metric** (``kind == "pair"``): "which pairs of runs differ on
  METRIC?", every pair given;
- **a view's own question on one metric**: the judge table's "what does each judge do?" (its
  judge pairs), `ragkit best`'s "which runners-up are worse than the best?".

The same rows get the same adjusted p whether the report prints the pairs (``--no-detail``), a
page shows one tab or another, or other metrics are chosen beside this one (``FAMILY_RULE``).

Within a family, each row contributes its difference over scored questions and its strict
difference as two tests of **one** Holm family, so "either flags" keeps the family-wise error
rate; where the two are the same test (no question failed on either side: the same questions, the
same values), it counts once and both get the same adjusted p. A row with no p (nothing to test:
identical on every question, one unit, a zero standard error; ``statistics``) is not counted.

Beside each unadjusted interval sits a **simultaneous** one: the t interval at level
1 - alpha / m, m the family's tests (Bonferroni). The intervals of a family cover all their
differences at once with probability at least 1 - alpha, and one that excludes 0 always sits
beside p (Holm) < alpha (Holm rejects whatever Bonferroni rejects); Holm may reject a row whose
simultaneous interval still touches 0, never the other way round.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ragkit.analysis import statistics

ALPHA = 1 - statistics.CONFIDENCE
FAMILY_RULE = ("one family per question asked: per metric, the factor table's rows (every level against its "
               "factor's reference); per metric, the single-factor pairs; the difference over scored questions "
               "and the strict difference of a row are two tests of its family (one where they are the same "
               "test); rows without a p (identical on every question, one unit, zero standard error) are not "
               "counted; whatever a view shows, a row's family is the same")
KIND_NAMES = {"factor": "factor table", "pair": "pairs"}
FAMILY_COLUMNS = ["family", "family_tests", "p_holm", "strict_p_holm", "sim_ci_low", "sim_ci_high",
                  "strict_sim_ci_low", "strict_sim_ci_high"]


def family_names(table: pd.DataFrame, question: str | None = None) -> pd.Series:
    """Each row's family: "<factor table | pairs> on <metric>", or "<question> on <metric>" for a
    view that asks a question of its own (the judge table's judge pairs, `ragkit best`'s
    runners-up)."""
    kinds = table["kind"].astype(str).map(lambda kind: KIND_NAMES.get(kind, kind)) if question is None else question
    return kinds + " on " + table["metric"].astype(str)


def same_test(table: pd.DataFrame) -> np.ndarray:
    """Rows whose strict difference is the difference over scored questions (no failure on either
    side): the same questions, mean and p, so one test, not two."""
    return ((table["n_strict"].to_numpy() == table["n"].to_numpy())
            & (table["strict_diff"].to_numpy(dtype="float64") == table["diff"].to_numpy(dtype="float64"))
            & (table["strict_p"].to_numpy(dtype="float64") == table["p"].to_numpy(dtype="float64")))


def with_families(table: pd.DataFrame, alpha: float = ALPHA, question: str | None = None) -> pd.DataFrame:
    """``table`` (the engine's rows, with ``se``/``df`` and ``strict_se``/``strict_df``) with its
    ``FAMILY_COLUMNS``: each row's family (``family_names``), the family's number of tests, Holm p
    of both differences over the family, and simultaneous intervals at level 1 - alpha / tests."""
    out = table.copy()
    if not len(table):
        for column in FAMILY_COLUMNS:
            out[column] = pd.Series(dtype="object" if column == "family" else "float64")
        return out
    names = family_names(table, question).to_numpy(dtype=object)
    p = table["p"].to_numpy(dtype="float64")
    strict_p = table["strict_p"].to_numpy(dtype="float64")
    once = same_test(table)
    p_holm, strict_holm = np.full(len(table), np.nan), np.full(len(table), np.nan)
    tests = np.zeros(len(table), dtype="int64")
    for name in dict.fromkeys(names.tolist()):
        rows = np.flatnonzero(names == name)
        separate = rows[~once[rows]]
        adjusted = statistics.holm(np.concatenate([p[rows], strict_p[separate]]))
        p_holm[rows] = adjusted[:len(rows)]
        strict_holm[rows] = np.where(once[rows], p_holm[rows], np.nan)
        strict_holm[separate] = adjusted[len(rows):]
        tests[rows] = int((~np.isnan(p[rows])).sum() + (~np.isnan(strict_p[separate])).sum())
    level = 1 - alpha / np.maximum(tests, 1)
    out["family"] = names
    out["family_tests"] = tests
    out["p_holm"], out["strict_p_holm"] = p_holm, strict_holm
    for prefix in ("", "strict_"):
        low, high = statistics.interval(table[f"{prefix}diff"].to_numpy(dtype="float64"),
                                        table[f"{prefix}se"].to_numpy(dtype="float64"),
                                        table[f"{prefix}df"].to_numpy(dtype="float64"), level)
        # Where the row has no p the unadjusted interval says why ([0, 0] for identical rows, else none).
        tested = ~np.isnan(table[f"{prefix}p"].to_numpy(dtype="float64"))
        out[f"{prefix}sim_ci_low"] = np.where(tested, low, table[f"{prefix}ci_low"].to_numpy(dtype="float64"))
        out[f"{prefix}sim_ci_high"] = np.where(tested, high, table[f"{prefix}ci_high"].to_numpy(dtype="float64"))
    return out


def describe(table: pd.DataFrame) -> dict:
    """What the correction of ``table`` ran over: per family its rows and tests, and the rule."""
    families: list[dict] = []
    if len(table) and "family" in table.columns:
        for name, rows in table.groupby("family", sort=False):
            families.append({"family": str(name), "rows": len(rows), "tests": int(rows["family_tests"].iloc[0])})
    return {"rule": FAMILY_RULE, "alpha": ALPHA, "families": families,
            "tests": sum(int(family["tests"]) for family in families), "rows": len(table),
            "simultaneous_intervals": f"t interval at level 1 - {ALPHA:g} / tests of the row's family (Bonferroni)"}

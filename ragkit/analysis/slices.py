"""Slices: the means and comparisons of a results folder within each value of a question column.

A *slice* is the questions sharing one value of a column of the ``questions`` table (``document``,
``n_answer_groups``, or any column a question set records there); a question without a value is
in no slice. Within a slice, everything is what the engine computes on those questions alone:
per-run means with their cluster-robust CIs (``means.metric_means``), and the comparison rows
(``Comparer.factor_effects`` and ``pair_comparisons``) with theirs, the unit resampled named as
everywhere. Each factor is tested against the same reference as in the report (the baselines
the experiment named, stored with the results; ``Comparer.references``). **Families span the
slices** (``families``): per metric, the factor rows of every slice form one family and the pairs
of every slice another, so looking at many slices does not make a chance difference in one look
significant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ragkit.analysis.comparison import Comparer, with_adjusted
from ragkit.analysis.loading import Results
from ragkit.analysis.means import metric_means
from ragkit.errors import ConfigError

# Columns that identify a question rather than group questions.
NOT_SLICES = ("question_id", "text", "question_key")
MAX_SLICES = 50
SLICE = "slice"
FAMILIES_OVER_SLICES = "per metric, the factor rows of every slice; per metric, the pairs of every slice"


@dataclass
class Sliced:
    column: str
    means: pd.DataFrame  # metric_means rows with a `slice` column
    comparisons: pd.DataFrame  # the engine's rows with a `slice` column; p_adj over all of them
    sizes: pd.Series  # slice value -> questions in it


def slice_columns(results: Results) -> list[str]:
    return [c for c in results.questions.columns if c not in NOT_SLICES]


def _slice_of(results: Results, column: str) -> pd.Series:
    valid = slice_columns(results)
    if column not in valid:
        raise ConfigError(f"unknown slice column '{column}'. Valid question columns: {', '.join(valid) or '(none)'}")
    questions = results.questions.drop_duplicates("question_id")
    values = pd.Series(questions[column].to_numpy(), index=questions["question_id"].astype(str)).dropna()
    values = values.map(lambda value: str(int(value)) if isinstance(value, (float, np.floating))
                        and float(value).is_integer() else str(value))
    if values.nunique() > MAX_SLICES:
        raise ConfigError(f"slice column '{column}' has {values.nunique()} values; at most {MAX_SLICES} slices")
    return values


def _within(results: Results, question_ids: pd.Index) -> Results:
    """``results`` on these questions only (scores and questions; no other table is needed)."""
    scores = results.scores
    mine = scores[scores["question_id"].astype(str).isin(question_ids)].reset_index(drop=True)
    questions = results.questions[results.questions["question_id"].astype(str).isin(question_ids)]
    within = Results(results.runs, mine, questions=questions.reset_index(drop=True))
    # The experiment's reference levels, read from the folder: a slice tests against the same ones.
    within.__dict__["baselines"] = results.baselines
    return within


def sliced(results: Results, metrics: list[str], column: str, pairs: bool = True) -> Sliced:
    """Means and comparisons of ``metrics`` within each slice of ``column`` (module docstring)."""
    scored = set(results.metric_names)
    unknown = [m for m in metrics if m not in scored]
    if unknown:
        raise ConfigError(f"metric(s) not scored in these results: {', '.join(unknown)}. "
                          f"Valid metrics: {', '.join(sorted(scored))}")
    values = _slice_of(results, column)
    means, comparisons, sizes = [], [], {}
    for value in sorted(values.unique()):
        questions = pd.Index(values.index[values == value])
        within = _within(results, questions)
        sizes[value] = len(questions)
        means.append(metric_means(within.scores, metrics, within.units).assign(**{SLICE: value}))
        comparer = Comparer(within)
        parts = [comparer.factor_effects(metrics)] + ([comparer.pair_comparisons(metrics)] if pairs else [])
        comparisons += [part.assign(**{SLICE: value}) for part in parts if not part.empty]
    table = with_adjusted(pd.concat(comparisons, ignore_index=True)) if comparisons else with_adjusted(
        Comparer(results).pair_comparisons([], pd.DataFrame()).assign(**{SLICE: pd.Series(dtype="object")}))
    table = table[[SLICE, *[c for c in table.columns if c != SLICE]]]
    mean_table = pd.concat(means, ignore_index=True) if means else pd.DataFrame()
    if not mean_table.empty:
        labels = dict(zip(results.runs["run_id"].astype(str), results.runs.get("label", results.runs["run_id"])))
        mean_table.insert(0, "label", mean_table["run_id"].astype(str).map(labels))
        mean_table = mean_table[[SLICE, *[c for c in mean_table.columns if c != SLICE]]]
    return Sliced(column, mean_table, table, pd.Series(sizes, name="questions"))


def to_text(result: Sliced) -> str:
    lines = [f"slices by {result.column}: " + ", ".join(f"{value} ({n} questions)" for value, n in
                                                        result.sizes.items()),
             "", "means per slice (95% CI):", result.means.to_string(index=False) if not result.means.empty else "-",
             "", f"comparisons per slice; p_adj: the adjusted p of one joint test per family of every slice's rows "
             f"({FAMILIES_OVER_SLICES}):"]
    shown = ["slice", "kind", "factor", "level_a", "level_b", "metric", "n", "diff", "ci_low", "ci_high", "p",
             "p_adj", "strict_diff", "unit"]
    lines.append(result.comparisons[shown].to_string(index=False) if not result.comparisons.empty else "-")
    return "\n".join(lines) + "\n"

"""How much evidence a comparison has, and how much a difference of a given size needs.

Every comparison row of the engine carries ``mde``: the smallest true difference its test detects
with 80% power, two-sided at 5% (``statistics.detectable_difference``: ``(t(0.975, df) + t(0.8,
df)) * SE``, SE and df those of the row's own interval). This module plans from it:

- **Scaling rule (an assumption, said wherever a plan is shown):** the standard error of a
  difference falls as ``1 / sqrt(G)`` with the number of documents (units) ``G``, the questions
  per document staying what the pilot had, and the degrees of freedom grow in proportion to
  ``G - 1``. So a pilot row with ``SE`` and ``df`` on ``G`` documents gives, on ``G'`` documents,
  ``MDE(G') = (t(0.975, df') + t(0.8, df')) * SE * sqrt(G / G')`` with ``df' = df * (G' - 1) /
  (G - 1)``; the plan is the smallest whole ``G'`` (at least 2) whose MDE is at most the
  difference asked, and questions ``= ceil(G' * N / G)``.
- ``plan``: `ragkit questions plan RESULTS --detect D` (``recommend.plan_questions``): the
  comparisons of the best-ranked run on the metric against every other run (`ragkit best`'s, no
  constraints), each planned, the one against the runner-up leading (the comparison a verdict
  rests on).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ragkit.analysis import statistics
from ragkit.errors import ConfigError

SCALING_RULE = ("assumes the standard error falls as 1/sqrt(documents) at the pilot's questions per document, "
                "its degrees of freedom growing with the documents")
POWER_RULE = "80% power, two-sided test at 5%"
# Most documents a plan searches: beyond it the difference is out of reach of any question set.
MOST_UNITS = 10**9


@dataclass(frozen=True)
class Need:
    """What detecting ``detect`` needs, planned from one comparison: documents (units) and
    questions, or None for both when the comparison has no spread to plan from."""

    detect: float
    units: int | None
    questions: int | None


def row_detectable(rows: pd.DataFrame) -> statistics.Detectable:
    """The ``Detectable`` of engine rows: their ``mde`` with the SE and df it rests on."""
    return statistics.Detectable(mde=rows["mde"].to_numpy(dtype="float64"), se=rows["se"].to_numpy(dtype="float64"),
                                 df=rows["df"].to_numpy(dtype="float64"), n=rows["n"].to_numpy(dtype="int64"),
                                 n_units=rows["n_units"].to_numpy(dtype="int64"), power=statistics.POWER,
                                 alpha=1 - statistics.CONFIDENCE)


def units_needed(se: float, df: float, units: int, detect: float) -> int | None:
    """The fewest documents whose MDE under the scaling rule is at most ``detect``; None when
    the SE or df is unknown or not even ``MOST_UNITS`` documents would do."""
    if not (np.isfinite(se) and np.isfinite(df) and se > 0 and units >= 2 and detect > 0):
        return None

    def reaches(g: int) -> bool:
        df_g = max(df * (g - 1) / (units - 1), 1e-3)
        return float(statistics.mde_of(se * math.sqrt(units / g), df_g)) <= detect

    high = 2
    while not reaches(high):
        if high >= MOST_UNITS:
            return None
        high = min(high * 2, MOST_UNITS)
    low = max(high // 2, 1)  # reaches(low) is False unless low is 2 and it already reaches
    if low >= 2 and reaches(low):
        return low
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


def need(detectable: statistics.Detectable, position: int, detect: float) -> Need:
    """``Need`` for the ``position``-th column of ``detectable``."""
    units = int(detectable.n_units[position])
    found = units_needed(float(detectable.se[position]), float(detectable.df[position]), units, detect)
    if found is None:
        return Need(detect, None, None)
    per_unit = detectable.n[position] / units
    return Need(detect, found, math.ceil(found * per_unit - 1e-9))


def describe_need(result: Need) -> str:
    if result.questions is None:
        if not result.detect > 0:
            return "the runs score alike on every question: there is no spread to plan from"
        return f"the questions a difference of {result.detect:.3f} needs cannot be estimated (no spread to plan from)"
    return f"about {result.questions:,} questions would detect a difference of {result.detect:.3f}"


@dataclass
class Plan:
    metric: str
    detect: float
    unit: str
    best: str
    rows: pd.DataFrame  # per other run: label, n, n_units, diff, mde, units_needed, questions_needed

    @property
    def lead(self) -> pd.Series:
        return self.rows.iloc[0]


def plan(rec: Any, detect: float) -> Plan:
    """The module docstring's plan from a ``recommend.Recommendation`` (its comparisons of the
    best-ranked run against each other run); ``recommend.plan_questions`` makes both."""
    metric = rec.params.metric
    if not detect > 0:
        raise ConfigError(f"--detect must be a difference > 0, got {detect:g}")
    if rec.best is None or rec.comparisons.empty:
        raise ConfigError(f"a plan needs at least two runs scored on {metric}; these results have "
                          f"{int(rec.runs['eligible'].sum())}")
    comparisons = rec.comparisons.reset_index(drop=True)
    detectable = row_detectable(comparisons)
    needs = [need(detectable, i, detect) for i in range(len(comparisons))]
    rows = pd.DataFrame({
        "run": [rec.label(str(run)) for run in comparisons["run_b"]], "n": comparisons["n"].to_numpy(),
        "n_units": comparisons["n_units"].to_numpy(), "diff": comparisons["diff"].to_numpy(dtype="float64"),
        "mde": comparisons["mde"].to_numpy(dtype="float64"),
        "units_needed": pd.array([n.units for n in needs], dtype="Int64"),
        "questions_needed": pd.array([n.questions for n in needs], dtype="Int64"),
    })
    return Plan(metric, detect, rec.unit, rec.label(rec.best), rows)


def to_text(result: Plan) -> str:
    lead = result.lead
    units = f"{result.unit}s"
    lines = [f"plan on {result.metric}: to detect a difference of {result.detect:.3f} ({POWER_RULE}; {SCALING_RULE})"]
    if pd.isna(lead["questions_needed"]):
        lines.append(f"  {result.best} vs {lead['run']}: cannot be estimated (no spread between {units} to plan from)")
    else:
        lines.append(f"  about {int(lead['questions_needed']):,} questions from {int(lead['units_needed']):,} {units} "
                     f"(the pilot: {int(lead['n'])} questions from {int(lead['n_units'])} {units}, detectable "
                     f"difference {_number(lead['mde'])}; {result.best} vs {lead['run']}, the first two on "
                     f"{result.metric})")
    known = result.rows["questions_needed"].dropna()
    if len(result.rows) > 1 and len(known):
        lines.append(f"  over all {len(result.rows)} comparisons with {result.best}: median "
                     f"{int(np.median(known.to_numpy(dtype='int64'))):,} questions, most {int(known.max()):,}"
                     + (f" ({len(result.rows) - len(known)} cannot be estimated)" if len(known) < len(result.rows)
                        else ""))
    return "\n".join(lines) + "\n"


def to_json(result: Plan) -> str:
    from ragkit.analysis.json_rows import json_records

    return json.dumps({"metric": result.metric, "detect": result.detect, "unit": result.unit, "power": POWER_RULE,
                       "assumption": SCALING_RULE, "best": result.best,
                       "comparisons": json_records(result.rows)}, indent=1) + "\n"


def _number(value: float) -> str:
    return "-" if pd.isna(value) else f"{value:.3f}"

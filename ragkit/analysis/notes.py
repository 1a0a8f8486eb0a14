"""The words every view of a comparison shares: what each count counts, what a test's family is,
what a failure scores, and the header naming each factor's reference and the runs stopped short.
One place, so the report, the export and the Compare page say the same thing."""

from __future__ import annotations

import pandas as pd

from ragkit.analysis.comparison import Reference
from ragkit.metrics.names import failure_value

# What each count column of a comparison counts (JSON ``counts``; the tables' headers say it too).
COUNTS = {
    "n": "distinct questions both sides scored (each question once, whatever the settings)",
    "n_strict": "distinct questions both sides were asked (the strict difference's questions)",
    "n_units": "distinct units (documents, or questions without one) among the n questions",
    "settings": "matched settings of the other factors in which either side has the metric (a pair: 1)",
    "n_scored_a/b, n_failed_a/b": "(question, setting) cases both sides were asked that side a/b scored / failed; "
                                  "for a pair of runs, questions",
    "n_only_a/b": "(question, setting) cases asked of side a/b only (a stopped run, a metric one side lacks); "
                  "in neither difference",
}


def adjustment_note(family: dict) -> str:
    """The families in words (``families.describe``): which comparisons were corrected together,
    how many tests each, and what the simultaneous intervals are."""
    listed = "; ".join(f"{f['family']}: {f['tests']} tests over {f['rows']} rows" for f in family["families"]) or "none"
    return (f"p (adj.): one joint test per family ({listed}): step-down minP over the family's tests, their "
            "dependence (shared reference, shared documents) from a wild bootstrap over the documents, so a true "
            "null family is flagged about 5% of the time (Holm for a family of more than 1000 tests); each test "
            "enters with its sign-flip bootstrap p on 14 documents or more, else its t test's p; a family of one "
            "test: its wild cluster bootstrap p. Either can be below the t test's p (the p column). "
            "Families are fixed by the question asked, not by what is shown: per metric, the factor table's rows;"
            " per metric, the single-factor pairs. A row's difference and strict difference are two tests of its "
            "family (one when no question failed); rows without a p (e.g. identical on every question) are not "
            "tested. sim. CI: simultaneous 95% interval of the family (the joint test's single-step critical "
            "value: a sign-flip test's bootstrap-t interval, else the t interval; a test alone: its bootstrap-t "
            "interval): one that excludes 0 always has p (adj.) < 0.05; CI: the comparison's t interval alone, "
            "which can disagree with p (adj.) near the critical value.")


def reference_line(references) -> str:
    """Each factor's reference level and why, in one sentence (``references``: ``Reference``s, or
    rows with the same fields)."""
    return ("Reference levels (fixed before the data; the best level only orders the rows): "
            + "; ".join(f"{r.factor}: {r.level} ({r.source})" for r in references) + ".")


def header_lines(references: list[Reference], partial: pd.DataFrame) -> list[str]:
    """What a reader must know before any table: each factor's reference and why, and the runs
    not asked every question (``coverage.partial_runs``)."""
    lines = []
    if references:
        lines.append(reference_line(references))
    if len(partial):
        lines.append("Runs not asked every question (stopped or partial; compared only where both sides were asked, "
                     "the rest counted as one side only): "
                     + "; ".join(f"{row.label} ({row.run_id}): {row.asked} of {row.of}"
                                 for row in partial.itertuples()) + ".")
    return lines


def failure_note(metrics: list[str]) -> str:
    """How the strict difference scores a failed question for these metrics: the metric's worst
    value (``names.failure_value``), 0 for most and 1 for a lower-is-better rate."""
    values = {metric: failure_value(metric) for metric in metrics}
    if len(set(values.values())) <= 1:
        return f"each failure scored {next(iter(values.values()), 0.0):g} (the metric's worst value)"
    return "each failure scored the metric's worst value (" + ", ".join(
        f"{metric} {value:g}" for metric, value in values.items()) + ")"

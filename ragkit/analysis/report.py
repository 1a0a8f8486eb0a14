"""`ragkit report`: a results folder's comparisons as markdown, HTML or JSON, from one data model.

Three parts, in reading order:

1. **What each factor does**: one row per factor level and metric, the level against the best
   level of its factor, paired over every matched setting of the other factors (the engine's
   ``factor`` rows). It leads, and for a typical grid fits on one screen.
2. **Configurations**: each run's mean per metric with its interval and scored/failed counts.
3. **Single-factor pairs** (unless ``detail=False``): every pair of runs differing in one factor.

Every comparison shown is in one Holm family. JSON carries the same rows with every number
unformatted: per comparison factor, level_a, level_b, metric, depth, n_scored_a/b, n_failed_a/b,
diff, ci_low, ci_high, p, p_holm, strict_diff, unit (and the rest of the engine's columns).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ragkit.analysis.comparison import DEPTH_RULES, MARGINAL, PAIR, DepthRule, compare
from ragkit.analysis.latency import run_latency
from ragkit.analysis.loading import Results, load_results
from ragkit.analysis.means import available_metrics, metric_means
from ragkit.analysis.statistics import describe_method
from ragkit.folders import as_location, location_name
from ragkit.metrics.names import CHARTED_GENERATION_METRICS, HEADLINE_METRICS
from ragkit.registry import ConfigError
from ragkit.results import ResultStore

FORMATS = ("md", "html", "json")
# Said wherever a cut metric is shown: chunks are not documents.
CUT_RULE = ("Metrics @k read the first k chunks of the final context (k chunks, not k documents; a document "
            "level metric counts the distinct documents among them); @Ntok the first N cl100k tokens of it.")
_MISSING = "-"


@dataclass
class Report:
    title: str
    metrics: list[str]
    unit: str
    overview: str
    comparisons: pd.DataFrame  # the engine's rows, factor rows first, p_holm over all of them
    means: pd.DataFrame  # metric_means of every run
    runs: pd.DataFrame
    latency_ms: pd.Series = field(default_factory=lambda: pd.Series(dtype="float64"))
    depth_rule: str = "common"
    # Judges against people (ragkit.labels.tables), when the folder has labels: (title, table, note)
    labels: list[tuple[str, pd.DataFrame, str]] = field(default_factory=list)
    labels_json: dict = field(default_factory=dict)
    # Files of the folder the report could not read, one line each (ResultStore.unreadable).
    warnings: list[str] = field(default_factory=list)

    @property
    def factor_rows(self) -> pd.DataFrame:
        return self.comparisons[self.comparisons["kind"] == MARGINAL]

    @property
    def pair_rows(self) -> pd.DataFrame:
        return self.comparisons[self.comparisons["kind"] == PAIR]


def default_metrics(scores: pd.DataFrame) -> list[str]:
    """The headline retrieval metrics and charted generation metrics the runs scored; every scored
    metric when none of those were."""
    scored = set(available_metrics(scores))
    chosen = [m for m in dict.fromkeys((*HEADLINE_METRICS, *CHARTED_GENERATION_METRICS)) if m in scored]
    return chosen or available_metrics(scores)


def _check_metrics(metrics: list[str], scores: pd.DataFrame) -> None:
    scored = available_metrics(scores)
    unknown = [m for m in metrics if m not in set(scored)]
    if unknown:
        raise ConfigError(f"metric(s) not scored in these results: {', '.join(unknown)}. "
                          f"Valid metrics: {', '.join(scored) or '(none)'}")


def build_report(results: Results, metrics: list[str] | None = None, detail: bool = True,
                 depth_rule: DepthRule = "common", title: str = "ragkit report") -> Report:
    if depth_rule not in DEPTH_RULES:
        raise ConfigError(f"unknown depth rule '{depth_rule}'. Valid rules: {', '.join(DEPTH_RULES)}")
    if metrics is None:
        metrics = default_metrics(results.scores)
    else:
        _check_metrics(metrics, results.scores)
    comparisons = compare(results, metrics, pair_rows=detail, depth_rule=depth_rule)
    questions = results.scores["question_id"].nunique()
    units = results.units.reindex(pd.unique(results.scores["question_id"].astype("string"))).nunique()
    overview = (f"{len(results.runs)} runs, {questions} questions"
                + (f" from {units} documents" if results.unit == "document" else "")
                + f". Resampling unit: {results.unit}.")
    return Report(title=title, metrics=metrics, unit=results.unit, overview=overview, comparisons=comparisons,
                  means=metric_means(results.scores, metrics, results.units), runs=results.runs,
                  latency_ms=run_latency(results.stages) * 1000, depth_rule=depth_rule)


# --- text forms ---------------------------------------------------------------------------------


def _number(value: float, digits: int = 3, signed: bool = False) -> str:
    if pd.isna(value):
        return _MISSING
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _interval(low: float, high: float, signed: bool = False) -> str:
    if pd.isna(low) or pd.isna(high):
        return _MISSING
    return f"[{_number(low, signed=signed)}, {_number(high, signed=signed)}]"


def _p(value: float) -> str:
    if pd.isna(value):
        return _MISSING
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _metric_cell(row) -> str:
    """The metric as asked, and the cut it was compared at when the depth rule changed it."""
    if row.metric_compared and row.metric_compared != row.metric:
        return f"{row.metric} (at {row.metric_compared})"
    return str(row.metric)


def factor_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The factor rows as text: level vs best, diff = best - level."""
    return pd.DataFrame({
        "factor": rows["factor"],
        "level vs best": rows["level_a"] + " vs " + rows["level_b"],
        "metric": [_metric_cell(row) for row in rows.itertuples()],
        "Δ (best - level)": [f"{_number(d, signed=True)} {_interval(lo, hi, signed=True)}"
                             for d, lo, hi in zip(rows["diff"], rows["ci_low"], rows["ci_high"])],
        "p (Holm)": rows["p_holm"].map(_p),
        "units best ahead": [f"{b}/{n}" for b, n in zip(rows["units_b_better"], rows["n_units"])],
        "failed level/best": [f"{a}/{b}" for a, b in zip(rows["n_failed_a"], rows["n_failed_b"])],
        "strict Δ": rows["strict_diff"].map(lambda v: _number(v, signed=True)),
        "settings": rows["pairs"],
    }).reset_index(drop=True)


def configuration_table(report: Report) -> pd.DataFrame:
    """One row per run: per metric its mean [95% CI] (scored/failed), and ms per question."""
    means = report.means.set_index(["run_id", "metric"])
    rows = []
    for run in report.runs.itertuples(index=False):
        row = {"configuration": run.label, "run": run.run_id}
        for metric in report.metrics:
            if (run.run_id, metric) in means.index:
                mean = means.loc[(run.run_id, metric)]
                if pd.isna(mean["mean"]):
                    value = _MISSING
                else:
                    value = f"{_number(mean['mean'])} {_interval(mean['ci_low'], mean['ci_high'])}"
                row[metric] = f"{value} ({int(mean['n'])}/{int(mean['n_failed'])})"
            else:
                row[metric] = _MISSING
        row["ms/question"] = _number(report.latency_ms.get(run.run_id, np.nan), digits=1)
        rows.append(row)
    return pd.DataFrame(rows)


def pair_table(rows: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The single-factor pairs as text, a pair's metrics together."""
    return pd.DataFrame({
        "factor": rows["factor"],
        "a -> b": rows["level_a"] + " -> " + rows["level_b"],
        "runs": rows["run_a"] + " -> " + rows["run_b"],
        "metric": [_metric_cell(row) for row in rows.itertuples()],
        "Δ (b - a)": [f"{_number(d, signed=True)} {_interval(lo, hi, signed=True)}"
                      for d, lo, hi in zip(rows["diff"], rows["ci_low"], rows["ci_high"])],
        "p": rows["p"].map(_p),
        "p (Holm)": rows["p_holm"].map(_p),
        "strict Δ": rows["strict_diff"].map(lambda v: _number(v, signed=True)),
        "scored a/b": [f"{a}/{b}" for a, b in zip(rows["n_scored_a"], rows["n_scored_b"])],
        "failed a/b": [f"{a}/{b}" for a, b in zip(rows["n_failed_a"], rows["n_failed_b"])],
        "W/T/L": [f"{w}/{t}/{lost}" for w, t, lost in zip(rows["wins"], rows["ties"], rows["losses"])],
        "Δ ms/question": rows["latency_ms_diff"].map(lambda v: _number(v, digits=1, signed=True)),
    }).reset_index(drop=True)


def _notes(report: Report) -> dict[str, str]:
    family = len(report.comparisons)
    depth = ("When two runs pass on final contexts of different depth (a judge keeping fewer chunks) a ranking "
             "metric is compared at the common depth, shown as 'metric (at metric@depth)'."
             if report.depth_rule == "common"
             else "Metrics are compared as asked, whatever the depth of each run's context.")
    common = (f"{describe_method(report.unit)} p (Holm): corrected over all {family} comparisons in this report. "
              "A failed question (an error or no value) is never averaged: 'failed' counts them per side, and "
              f"strict Δ is the difference with each failure scored 0. {depth}")
    return {
        "factors": ("Each level against the best level of its factor (highest mean, failures as 0), paired over "
                    "every matched setting of the other factors (settings); a question's difference is its mean "
                    "over those settings. units best ahead: units whose mean difference favours the best level. "
                    + common),
        "configurations": ("Mean over the questions a run scored [95% CI] (scored/failed). ms/question: mean time "
                           "of the per-question pipeline stages (one-off builds and evaluation excluded). " + CUT_RULE),
        "pairs": "b - a over the questions both runs scored; W/T/L: questions where b won, tied, lost.",
    }


def _sections(report: Report) -> list[tuple[str, pd.DataFrame, str]]:
    if report.runs.empty:
        return []
    notes = _notes(report)
    sections = []
    factors = report.factor_rows
    no_factors = "No comparisons: no two runs differ in exactly one factor."
    sections.append(("What each factor does", factor_table(factors) if not factors.empty else pd.DataFrame(),
                     notes["factors"] if not factors.empty else no_factors))
    sections.append(("Configurations", configuration_table(report), notes["configurations"]))
    pairs = report.pair_rows
    if not pairs.empty:
        sections.append(("Single-factor pairs", pair_table(pairs, report.runs), notes["pairs"]))
    return sections + report.labels


def _markdown_table(table: pd.DataFrame) -> str:
    def line(cells) -> str:
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"

    return "\n".join([line(table.columns), "|" + "---|" * len(table.columns)]
                     + [line(row) for row in table.itertuples(index=False)])


def to_markdown(report: Report) -> str:
    parts = [f"# {report.title}", report.overview, *(f"> {line}" for line in report.warnings)]
    for title, table, note in _sections(report):
        parts.append(f"## {title}")
        if not table.empty:
            parts.append(_markdown_table(table))
        if note:
            parts.append(note)
    return "\n\n".join(parts) + "\n"


def to_html(report: Report) -> str:
    body = [f"<h1>{html.escape(report.title)}</h1>", f"<p>{html.escape(report.overview)}</p>",
            *(f'<p class="warning">{html.escape(line)}</p>' for line in report.warnings)]
    for title, table, note in _sections(report):
        body.append(f"<h2>{html.escape(title)}</h2>")
        if not table.empty:
            body.append(table.to_html(index=False, border=0, classes="table", escape=True))
        if note:
            body.append(f"<p>{html.escape(note)}</p>")
    content = "\n".join(body)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(report.title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table.table {{ border-collapse: collapse; font-size: 0.85em; }}
table.table th, table.table td {{ padding: 4px 8px; border-bottom: 1px solid #ddd; text-align: left; }}
</style></head><body>
{content}
</body></html>
"""


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as JSON-ready dicts: NaN and NA become null, numpy scalars plain numbers."""
    return json.loads(frame.to_json(orient="records"))


def to_json(report: Report) -> str:
    payload = {
        "title": report.title, "overview": report.overview, "unit": report.unit, "metrics": report.metrics,
        "depth_rule": report.depth_rule, "method": describe_method(report.unit), "notes": _notes(report),
        "warnings": report.warnings,
        "comparisons": _records(report.comparisons),
        "configurations": _records(report.means.merge(report.runs.reindex(columns=["run_id", "label"]), on="run_id",
                                                      how="left")),
    }
    if report.labels_json:
        payload["labels"] = report.labels_json
    return json.dumps(payload, indent=1) + "\n"


def _add_labels(report: Report, results_dir: str | Path) -> None:
    """The judges-against-people sections, when the folder has labels (ragkit.labels)."""
    from ragkit.labels.tables import label_sections, label_tables

    tables = label_tables(results_dir)
    if tables.empty:
        return
    report.labels = label_sections(tables)
    report.labels_json = {"agreement": [agreement.as_row() for agreement in tables.agreements],
                          "confusion": {agreement.decision: agreement.confusion.to_dict() for agreement in
                                        tables.agreements},
                          "prediction_powered": _records(tables.ppi) if not tables.ppi.empty else []}


def render_report(results_dir: str | Path, fmt: str = "md", metrics: list[str] | None = None, detail: bool = True,
                  depth_rule: DepthRule = "common") -> str:
    """The report of a results folder as markdown, HTML or JSON text."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown report format '{fmt}'. Valid formats: {', '.join(FORMATS)}")
    results = load_results(results_dir)
    title = f"ragkit report: {location_name(results_dir)}"
    if results.runs.empty:
        report = Report(title=title, metrics=[], unit=results.unit, overview="No runs in this results folder yet.",
                        comparisons=compare(results, []), means=metric_means(results.scores, []), runs=results.runs)
    else:
        report = build_report(results, metrics, detail, depth_rule, title)
        _add_labels(report, results_dir)
    # After every read the report made: what it could not read is named, not fatal.
    report.warnings = ResultStore(as_location(results_dir)).unreadable()
    return {"md": to_markdown, "html": to_html, "json": to_json}[fmt](report)

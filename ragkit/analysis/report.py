"""`ragkit report`: a results folder's comparisons as markdown, HTML or JSON, from one data model.

Three parts, in reading order:

1. **What each factor does**: one row per factor level and metric, the level against its factor's
   reference (named in the experiment or with ``--baseline``, else the first level; never the
   best-scoring one, which would pick the test from the data), paired over every matched setting
   of the other factors (the engine's ``factor`` rows), best level first. It leads, and for a
   typical grid fits on one screen.
2. **Configurations**: each run's mean per metric with its interval and scored/failed counts.
3. **Single-factor pairs** (unless ``detail=False``): every pair of runs differing in one factor.

Every comparison's adjusted p and simultaneous interval come from its family (``families``: per
metric, the factor rows; per metric, the pairs), described by ``family_adjustment``: the same numbers
with and without the pairs (``detail=False``) or other metrics beside it. Where any question
failed, the strict difference (a failure scoring the failure value) leads. JSON carries the
same rows with every number at full precision (no rounding): per comparison the engine's
columns (``comparison.COLUMNS``), with ``references`` (each factor's reference level and why),
``partial_runs`` (runs not asked every question), ``family_adjustment`` and ``counts`` (what each
count column counts).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ragkit.analysis.comparison import (
    DEPTH_RULES,
    MARGINAL,
    PAIR,
    Comparer,
    DepthRule,
    Reference,
    check_baselines,
    compare,
    family_adjustment,
)
from ragkit.analysis.coverage import partial_runs
from ragkit.analysis.json_rows import json_records
from ragkit.analysis.latency import run_latency
from ragkit.analysis.loading import Results, load_results
from ragkit.analysis.means import available_metrics, metric_means
from ragkit.analysis.notes import COUNTS, adjustment_note, failure_note, header_lines
from ragkit.analysis.power import POWER_RULE
from ragkit.analysis.statistics import describe_method
from ragkit.errors import ConfigError
from ragkit.metrics.names import CHARTED_GENERATION_METRICS, HEADLINE_METRICS
from ragkit.results import ResultStore
from ragkit.storage.folders import as_location, location_name

FORMATS = ("md", "html", "json")
# Said wherever a cut metric is shown: chunks are not documents.
CUT_RULE = ("Metrics @k read the first k chunks of the final context (k chunks, not k documents; a document "
            "level metric counts the distinct documents among them); @Ntok the first N cl100k tokens of it.")
_MISSING = "-"
DETECTABLE_NOTE = (f"detectable: the smallest true Δ over scored questions the row's test would find ({POWER_RULE}), "
                   "from its clustered variance and its units; a Δ smaller than it is not evidence either way.")


@dataclass
class Report:
    title: str
    metrics: list[str]
    unit: str
    overview: str
    comparisons: pd.DataFrame  # the engine's rows, factor rows first, p_adj over all of them
    means: pd.DataFrame  # metric_means of every run
    runs: pd.DataFrame
    latency_ms: pd.Series = field(default_factory=lambda: pd.Series(dtype="float64"))
    depth_rule: str = "common"
    references: list[Reference] = field(default_factory=list)
    partial: pd.DataFrame = field(default_factory=pd.DataFrame)  # coverage.partial_runs
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


def parse_baselines(texts: list[str] | None) -> dict[str, str]:
    """``--baseline factor=level`` options as a dict; a malformed one is a ConfigError."""
    baselines = {}
    for text in texts or []:
        factor, sep, level = text.partition("=")
        if not sep or not factor.strip() or not level.strip():
            raise ConfigError(f"--baseline '{text}': expected factor=level, e.g. chunker=token")
        baselines[factor.strip()] = level.strip()
    return baselines


def build_report(results: Results, metrics: list[str] | None = None, detail: bool = True,
                 depth_rule: DepthRule = "common", title: str = "ragkit report",
                 baselines: dict[str, str] | None = None) -> Report:
    """``baselines``: factor -> reference level named here, in place of the experiment's."""
    if depth_rule not in DEPTH_RULES:
        raise ConfigError(f"unknown depth rule '{depth_rule}'. Valid rules: {', '.join(DEPTH_RULES)}")
    if metrics is None:
        metrics = default_metrics(results.scores)
    else:
        _check_metrics(metrics, results.scores)
    if baselines:
        check_baselines(baselines, results.runs)
    comparisons = compare(results, metrics, pair_rows=detail, depth_rule=depth_rule, baselines=baselines)
    present = list(dict.fromkeys(comparisons.loc[comparisons["kind"] == MARGINAL, "factor"].tolist()))
    references = Comparer(results, depth_rule, baselines).references(present)
    questions = results.scores["question_id"].nunique()
    units = results.units.reindex(pd.unique(results.scores["question_id"].astype("string"))).nunique()
    overview = (f"{len(results.runs)} runs, {questions} questions"
                + (f" from {units} documents" if results.unit == "document" else "")
                + f". Resampling unit: {results.unit}.")
    return Report(title=title, metrics=metrics, unit=results.unit, overview=overview, comparisons=comparisons,
                  means=metric_means(results.scores, metrics, results.units), runs=results.runs,
                  latency_ms=run_latency(results.stages) * 1000, depth_rule=depth_rule, references=references,
                  partial=partial_runs(results, metrics))


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


def has_failures(rows: pd.DataFrame) -> bool:
    """Some question of these comparisons failed on a side: the strict difference then leads."""
    return bool(len(rows)) and int(rows["n_failed_a"].sum() + rows["n_failed_b"].sum()) > 0


def _differences(rows: pd.DataFrame, label: str, lead_strict: bool) -> dict[str, object]:
    """The strict and the over-scored difference, each with its interval alone (CI), its
    simultaneous interval over its family (sim. CI) and adjusted p, the strict one first when
    ``lead_strict``, and whether they disagree in sign."""
    def cells(prefix: str) -> list[str]:
        low, high = rows[f"{prefix}ci_low"], rows[f"{prefix}ci_high"]
        return [f"{_number(d, signed=True)} {_interval(lo, hi, signed=True)}"
                for d, lo, hi in zip(rows[f"{prefix}diff"], low, high)]

    def simultaneous(prefix: str) -> list[str]:
        return [_interval(lo, hi, signed=True) for lo, hi in zip(rows[f"{prefix}sim_ci_low"],
                                                                 rows[f"{prefix}sim_ci_high"])]

    strict = {f"strict Δ ({label}) [CI]": cells("strict_"), "strict sim. CI": simultaneous("strict_"),
              "strict p (adj.)": rows["strict_p_adj"].map(_p)}
    scored = {f"Δ over scored ({label}) [CI]": cells(""), "sim. CI": simultaneous(""),
              "p (adj.)": rows["p_adj"].map(_p)}
    ordered = {**strict, **scored} if lead_strict else {**scored, **strict}
    return {**ordered, "signs": np.where(rows["signs_disagree"].astype(bool), "DISAGREE", "")}


def factor_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The factor rows as text: level vs reference, Δ = level - reference."""
    return pd.DataFrame({
        "factor": rows["factor"],
        "level vs reference": rows["level_b"] + " vs " + rows["level_a"],
        "metric": [_metric_cell(row) for row in rows.itertuples()],
        **_differences(rows, "level - reference", has_failures(rows)),
        "detectable": rows["mde"].map(_number),
        "units level ahead": [f"{b}/{n}" for b, n in zip(rows["units_b_better"], rows["n_units"])],
        "questions": rows["n"],
        "failed ref/level (question x setting)": [f"{a}/{b}" for a, b in zip(rows["n_failed_a"], rows["n_failed_b"])],
        "one side only ref/level": [f"{a}/{b}" for a, b in zip(rows["n_only_a"], rows["n_only_b"])],
        "settings": rows["settings"],
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
        **_differences(rows, "b - a", has_failures(rows)),
        "p": rows["p"].map(_p),
        "detectable": rows["mde"].map(_number),
        "scored a/b": [f"{a}/{b}" for a, b in zip(rows["n_scored_a"], rows["n_scored_b"])],
        "failed a/b": [f"{a}/{b}" for a, b in zip(rows["n_failed_a"], rows["n_failed_b"])],
        "one side only a/b": [f"{a}/{b}" for a, b in zip(rows["n_only_a"], rows["n_only_b"])],
        "W/T/L": [f"{w}/{t}/{lost}" for w, t, lost in zip(rows["wins"], rows["ties"], rows["losses"])],
        "Δ ms/question": rows["latency_ms_diff"].map(lambda v: _number(v, digits=1, signed=True)),
    }).reset_index(drop=True)


def _notes(report: Report) -> dict[str, str]:
    depth = ("When two runs pass on final contexts of different depth (a judge keeping fewer chunks) a ranking "
             "metric is compared at the common depth, shown as 'metric (at metric@depth)'."
             if report.depth_rule == "common"
             else "Metrics are compared as asked, whatever the depth of each run's context.")
    adjustment = adjustment_note(family_adjustment(report.comparisons))
    common = (f"{describe_method(report.unit)} {adjustment} A failed question (an "
              "error or no value) is never averaged: 'failed' counts them per side, and strict Δ is the difference "
              f"over every question both sides were asked, {failure_note(report.metrics)}, with its own CI and p. "
              + "In a table where some question failed, the strict difference leads. signs DISAGREE: the two "
              f"differences point opposite ways. {DETECTABLE_NOTE} {depth}")
    return {
        "factors": ("Each level against its factor's reference level (see above), paired over every matched "
                    "setting of the other factors (settings); a question's difference is its mean over those "
                    "settings, so 'questions' counts each once while the failed and one-side-only counts are "
                    "(question, setting) cases. Rows ordered best level first. units level ahead: units whose mean "
                    "difference favours the level. " + common),
        "configurations": ("Mean over the questions a run scored [95% CI] (scored/failed). ms/question: mean time "
                           "of the per-question pipeline stages (one-off builds and evaluation excluded). " + CUT_RULE),
        "pairs": ("Δ over scored: b - a over the questions both runs scored; strict Δ: over every question both "
                  "were asked; W/T/L: questions where b won, tied, lost."),
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
    parts = [f"# {report.title}", report.overview, *header_lines(report.references, report.partial),
             *(f"> {line}" for line in report.warnings)]
    for title, table, note in _sections(report):
        parts.append(f"## {title}")
        if not table.empty:
            parts.append(_markdown_table(table))
        if note:
            parts.append(note)
    return "\n\n".join(parts) + "\n"


def to_html(report: Report) -> str:
    lines = [report.overview, *header_lines(report.references, report.partial)]
    body = [f"<h1>{html.escape(report.title)}</h1>", *(f"<p>{html.escape(line)}</p>" for line in lines),
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


def to_json(report: Report) -> str:
    payload = {
        "title": report.title, "overview": report.overview,
        "header": header_lines(report.references, report.partial), "unit": report.unit, "metrics": report.metrics,
        "depth_rule": report.depth_rule, "method": describe_method(report.unit),
        "notes": _notes(report), "warnings": report.warnings,
        "family_adjustment": family_adjustment(report.comparisons),
        "references": [{"factor": r.factor, "level": r.level, "source": r.source} for r in report.references],
        "partial_runs": json_records(report.partial), "counts": COUNTS,
        "strict_leads": has_failures(report.comparisons),
        "comparisons": json_records(report.comparisons),
        "configurations": json_records(report.means.merge(report.runs.reindex(columns=["run_id", "label"]),
                                                          on="run_id", how="left")),
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
                          "prediction_powered": json_records(tables.ppi) if not tables.ppi.empty else []}


def render_report(results_dir: str | Path, fmt: str = "md", metrics: list[str] | None = None, detail: bool = True,
                  depth_rule: DepthRule = "common", baselines: dict[str, str] | None = None) -> str:
    """The report of a results folder as markdown, HTML or JSON text."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown report format '{fmt}'. Valid formats: {', '.join(FORMATS)}")
    results = load_results(results_dir)
    title = f"ragkit report: {location_name(results_dir)}"
    if results.runs.empty:
        report = Report(title=title, metrics=[], unit=results.unit, overview="No runs in this results folder yet.",
                        comparisons=compare(results, []), means=metric_means(results.scores, []), runs=results.runs)
    else:
        report = build_report(results, metrics, detail, depth_rule, title, baselines)
        _add_labels(report, results_dir)
    # After every read the report made: what it could not read is named, not fatal.
    report.warnings = ResultStore(as_location(results_dir)).unreadable()
    return {"md": to_markdown, "html": to_html, "json": to_json}[fmt](report)

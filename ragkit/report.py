"""`ragkit report`: a results folder as markdown or HTML tables with honest statistics.

Two tables: one row per configuration (each metric's mean with a 95% bootstrap CI, how many
questions were scored and how many failed, latency per question), and every single-factor
comparison (paired difference b - a with a 95% paired-bootstrap CI, permutation-test p-value,
Holm-corrected p over the whole table, wins/ties/losses, latency cost), judge on/off pairs first.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ragkit.analysis import (PERMUTATIONS, Results, available_metrics, factor_effects, load_results,
                             metric_means, run_latency)
from ragkit.registry import ConfigError
from ragkit.summary import HEADLINE_METRICS

FORMATS = ("md", "html")
# Answer-quality metrics, shown after the retrieval headline metrics when a run scored them.
GENERATION_METRICS = ("faithfulness", "answer_relevancy", "embedding_groundedness", "groundedness")
_MISSING = "-"


@dataclass(frozen=True)
class Section:
    title: str
    table: pd.DataFrame  # every cell already formatted as text
    note: str = ""


def default_metrics(scores: pd.DataFrame) -> list[str]:
    """The headline retrieval metrics and the generation metrics the runs scored; every scored
    metric when none of those were."""
    scored = available_metrics(scores)
    # dict.fromkeys: a generation metric may also be a headline metric.
    chosen = [m for m in dict.fromkeys((*HEADLINE_METRICS, *GENERATION_METRICS)) if m in set(scored)]
    return chosen or scored


def _check_metrics(metrics: list[str], scores: pd.DataFrame) -> None:
    scored = available_metrics(scores)
    unknown = [m for m in metrics if m not in set(scored)]
    if unknown:
        raise ConfigError(f"metric(s) not scored in these results: {', '.join(unknown)}. "
                          f"Valid metrics: {', '.join(scored) or '(none)'}")


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


def configuration_table(results: Results, metrics: list[str]) -> pd.DataFrame:
    """One row per run: label and id, per metric the mean [95% CI] and scored/failed counts,
    and the mean latency per question."""
    means = metric_means(results.scores, metrics).set_index(["run_id", "metric"])
    latency_ms = run_latency(results.stages) * 1000
    rows = []
    for run in results.runs.itertuples(index=False):
        row = {"configuration": run.label, "run": run.run_id}
        for metric in metrics:
            if (run.run_id, metric) in means.index:
                mean = means.loc[(run.run_id, metric)]
                row[f"{metric} (95% CI)"] = (_MISSING if pd.isna(mean["mean"]) else
                                             f"{_number(mean['mean'])} {_interval(mean['ci_low'], mean['ci_high'])}")
                row[f"{metric} scored/failed"] = f"{int(mean['n'])}/{int(mean['n_failed'])}"
            else:
                row[f"{metric} (95% CI)"] = row[f"{metric} scored/failed"] = _MISSING
        row["ms/question"] = _number(latency_ms.get(run.run_id, np.nan), digits=1)
        rows.append(row)
    return pd.DataFrame(rows)


def comparison_table(effects: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """factor_effects as text, a pair's metrics together, judge on/off pairs first."""
    effects = effects.assign(
        judge_first=~effects["factor"].str.startswith("judge."),
        pair=effects.groupby(["run_a", "run_b"], sort=False).ngroup(),
        metric_order=effects["metric"].map({m: i for i, m in enumerate(metrics)}),
    ).sort_values(["judge_first", "pair", "metric_order"], kind="stable")
    return pd.DataFrame({
        "factor": effects["factor"],
        "a -> b": effects["value_a"] + " -> " + effects["value_b"],
        "runs": effects["run_a"] + " -> " + effects["run_b"],
        "metric": effects["metric"],
        "mean diff": effects["mean_diff"].map(lambda v: _number(v, signed=True)),
        "95% CI": [_interval(lo, hi, signed=True) for lo, hi in zip(effects["ci_low"], effects["ci_high"])],
        "p": effects["p_value"].map(_p),
        "p (Holm)": effects["p_holm"].map(_p),
        "wins/ties/losses": [f"{w}/{t}/{l}" for w, t, l in zip(effects["wins"], effects["ties"], effects["losses"])],
        "latency diff (ms)": effects["latency_ms_diff"].map(lambda v: _number(v, digits=1, signed=True)),
    }).reset_index(drop=True)


def _comparison_note(rows: int) -> str:
    note = (f"b - a over the questions both runs scored. 95% CI: paired bootstrap over questions. "
            f"p: two-sided paired permutation test (sign flips; {PERMUTATIONS} resamples, exact when "
            f"2^questions <= {PERMUTATIONS}). p (Holm): corrected over all {rows} rows of this table.")
    # A resampled two-sided p is at least 2 / (resamples + 1); Holm multiplies the smallest by m.
    if rows * 2 / (PERMUTATIONS + 1) >= 0.05:
        note += (f" With {rows} rows no Holm-corrected p can fall below 0.05 at this resampling "
                 f"resolution: report fewer metrics (--metrics) to test fewer comparisons.")
    return note


def build_sections(results: Results, metrics: list[str]) -> list[Section]:
    sections = [Section("Configurations", configuration_table(results, metrics),
                        "Mean over the questions a run scored, with a 95% bootstrap CI; failed questions "
                        "(an error or no value) are counted, never averaged as 0. ms/question: mean time per "
                        "question of the per-question stages (one-off build stages excluded).")]
    effects = factor_effects(results.scores, results.stages, results.runs, metrics)
    if effects.empty:
        reason = "no metric was scored" if not metrics else "no two runs differ in exactly one factor"
        sections.append(Section("Single-factor comparisons", pd.DataFrame(), f"No comparisons: {reason}."))
    else:
        sections.append(Section("Single-factor comparisons", comparison_table(effects, metrics),
                                _comparison_note(len(effects))))
    return sections


def _markdown_table(table: pd.DataFrame) -> str:
    def line(cells) -> str:
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"

    return "\n".join([line(table.columns), "|" + "---|" * len(table.columns)]
                     + [line(row) for row in table.itertuples(index=False)])


def to_markdown(sections: list[Section], title: str) -> str:
    parts = [f"# {title}"]
    for section in sections:
        parts.append(f"## {section.title}")
        if not section.table.empty:
            parts.append(_markdown_table(section.table))
        if section.note:
            parts.append(section.note)
    return "\n\n".join(parts) + "\n"


def to_html(sections: list[Section], title: str) -> str:
    body = [f"<h1>{html.escape(title)}</h1>"]
    for section in sections:
        body.append(f"<h2>{html.escape(section.title)}</h2>")
        if not section.table.empty:
            body.append(section.table.to_html(index=False, border=0, classes="table", escape=True))
        if section.note:
            body.append(f"<p>{html.escape(section.note)}</p>")
    content = "\n".join(body)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table.table {{ border-collapse: collapse; font-size: 0.85em; }}
table.table th, table.table td {{ padding: 4px 8px; border-bottom: 1px solid #ddd; text-align: left; }}
</style></head><body>
{content}
</body></html>
"""


def render_report(results_dir: str | Path, fmt: str = "md", metrics: list[str] | None = None) -> str:
    """The report of a results folder as markdown or HTML text; metrics default to default_metrics."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown report format '{fmt}'. Valid formats: {', '.join(FORMATS)}")
    results = load_results(results_dir)
    title = f"ragkit report: {Path(results_dir).resolve().name}"
    if results.runs.empty:
        sections = [Section("Configurations", pd.DataFrame(), "No runs in this results folder yet.")]
    else:
        if metrics is None:
            metrics = default_metrics(results.scores)
        else:
            _check_metrics(metrics, results.scores)
        sections = build_sections(results, metrics)
    return to_markdown(sections, title) if fmt == "md" else to_html(sections, title)

"""Exporting a results folder: CSV or Parquet (zipped, one file per table), Excel (one sheet per
table), JSON (one object of tables) or a self-contained, offline HTML report.

The spreadsheet formats (csv, xlsx) write a text cell that a spreadsheet would read as a formula
(one starting with =, +, -, @, tab or CR: answers and prompts can be steered by corpus text) with
a leading single quote, as OWASP's CSV-injection guidance says; numbers stay numbers. Parquet and
JSON are data formats, read by programs rather than spreadsheets: they keep every text exactly.
"""

from __future__ import annotations

import html
import io
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from ragkit.analysis import summary
from ragkit.analysis.comparison import compare
from ragkit.analysis.failure_classes import failure_classes
from ragkit.analysis.latency import latency_by_stage
from ragkit.analysis.loading import Results, load_results
from ragkit.analysis.means import curve, metric_means
from ragkit.analysis.report import default_metrics, json_records
from ragkit.errors import ConfigError
from ragkit.metrics.names import HEADLINE_METRICS
from ragkit.metrics.retrieval import CURVE_METRICS
from ragkit.storage.folders import as_location, location_name

FORMATS: dict[str, tuple[str, str]] = {
    "csv": (".zip", "application/zip"),
    "parquet": (".zip", "application/zip"),
    "xlsx": (".xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    "json": (".json", "application/json"),
    "html": (".html", "text/html"),
}
# Summary first: it is what a reader opens the file for. Judgements and answers (with the prompts)
# last: they are the largest and the least often read.
TABLE_ORDER = ("summary", "comparisons", "failure_classes", "runs", "questions", "scores", "retrievals", "stages",
               "judgements", "answers")
# An Excel cell holds at most this many characters; longer prompts and replies are cut in xlsx only.
XLSX_CELL_LIMIT = 32_767
# A spreadsheet reads a cell starting with one of these as a formula (OWASP: CSV injection).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format '{fmt}'. Valid formats: {', '.join(FORMATS)}")


def result_tables(results: Results) -> dict[str, pd.DataFrame]:
    summary_table = summary.summary_frame(results.runs, results.scores, results.stages, judgements=results.judgements)
    # The report's comparisons (each factor's effect and every single-factor pair; adjusted per family).
    comparisons = compare(results, default_metrics(results.scores)) if not results.runs.empty else pd.DataFrame()
    tables = {"summary": summary_table, "comparisons": comparisons, "runs": results.runs,
              # Why each question of each run fails (failure_classes: the rules in its docstring).
              "failure_classes": failure_classes(results) if not results.runs.empty else pd.DataFrame(),
              "questions": results.questions, "scores": results.scores,
              "retrievals": results.retrievals, "stages": results.stages, "judgements": results.judgements,
              "answers": results.answers}
    return {name: tables[name] for name in TABLE_ORDER}


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Nullable pandas dtypes as plain object/float columns, for writers that cannot take them."""
    return frame.astype(object).where(frame.notna(), None)


def spreadsheet_text(text: str) -> str:
    """``text`` as a spreadsheet shows it: one that would start a formula gets a leading quote
    (every CSV or XLSX ragkit writes for people: exports, labelling sheets)."""
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def _text_columns(frame: pd.DataFrame) -> list[int]:
    return [i for i, dtype in enumerate(frame.dtypes) if not pd.api.types.is_numeric_dtype(dtype)]


def _to_csv(frame: pd.DataFrame) -> bytes:
    """``frame`` as CSV whose header and text cells are safe to open in a spreadsheet."""
    safe = frame.copy()
    for i in _text_columns(frame):
        # Only a str is text: a number in an object column, even a negative one, stays a number.
        safe.isetitem(i, frame.iloc[:, i].map(lambda cell: spreadsheet_text(cell) if isinstance(cell, str) else cell))
    safe.columns = [spreadsheet_text(str(column)) for column in frame.columns]
    # RFC 4180's CRLF rows: with them a cell holding a CR is quoted, so a spreadsheet never reads
    # the rest of the cell as a new row (with "\n" rows a bare CR is written unquoted).
    return safe.to_csv(index=False, lineterminator="\r\n").encode("utf-8")


def _xlsx_cell(value: object) -> object:
    """A value Excel accepts and shows as text: control characters openpyxl refuses are dropped,
    a text that would start a formula is quoted, and text beyond a cell's limit is cut with a note
    saying where the whole text is."""
    if not isinstance(value, str):
        return value
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

    # Dropped first: "\x01=1" would otherwise reach the sheet as the formula "=1".
    value = spreadsheet_text(ILLEGAL_CHARACTERS_RE.sub("", value))
    if len(value) <= XLSX_CELL_LIMIT:
        return value
    note = f" [cut at {XLSX_CELL_LIMIT} characters for Excel; the csv, parquet and json exports hold it whole]"
    return value[: XLSX_CELL_LIMIT - len(note)] + note


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _to_xlsx(tables: dict[str, pd.DataFrame]) -> bytes:
    from openpyxl import Workbook

    # Write-only mode streams rows: about twice as fast as pandas' to_excel on large tables.
    workbook = Workbook(write_only=True)
    for name, frame in tables.items():
        if len(frame) >= 1_048_576:
            raise ConfigError(f"table '{name}' has {len(frame)} rows, more than an Excel sheet holds; "
                              "export csv or parquet instead, or select fewer runs")
        sheet = workbook.create_sheet(name)
        sheet.append([_xlsx_cell(str(column)) for column in frame.columns])
        text_columns = _text_columns(frame)
        for row in _plain(frame).itertuples(index=False, name=None):
            if text_columns:
                row = list(row)
                for i in text_columns:
                    row[i] = _xlsx_cell(row[i])
            sheet.append(row)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def _to_json(tables: dict[str, pd.DataFrame]) -> bytes:
    payload = {name: json_records(frame) for name, frame in tables.items()}  # full precision
    return json.dumps(payload).encode("utf-8")


def _figure_html(figure, include_js: bool) -> str:
    return figure.to_html(full_html=False, include_plotlyjs=include_js, config={"displaylogo": False})


def report_html(results: Results, title: str = "ragkit results") -> str:
    """A single HTML page that works offline: plotly's JS is inlined once, charts stay interactive."""
    from ragkit.analysis import charts

    tables = result_tables(results)
    sections: list[str] = []
    # The headline metrics with CIs, and the curve families over k, when the runs scored them.
    metrics = [m for m in HEADLINE_METRICS if m in set(results.scores["metric"])]
    figures = []
    if metrics:
        figures.append((f"Metrics (mean over questions, 95% CI over {results.unit}s)",
                        charts.metric_bar_chart(metric_means(results.scores, metrics, results.units), results.runs)))
    for base in CURVE_METRICS:
        points = curve(results.scores, base)
        if not points.empty:
            figures.append((f"{base}@k", charts.curve_chart(points, results.runs, base)))
    if not results.stages.empty:
        figures.append(("Latency by stage", charts.latency_chart(latency_by_stage(results.stages), results.runs)))
    for index, (heading, figure) in enumerate(figures):
        sections.append(f"<h2>{html.escape(heading)}</h2>\n{_figure_html(figure, include_js=index == 0)}")
    summary = tables["summary"].drop(columns=["run_id"])
    summary_html = summary.to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-", border=0,
                                   classes="table")
    runs_html = results.runs.to_html(index=False, na_rep="-", border=0, classes="table")
    created = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table.table {{ border-collapse: collapse; font-size: 0.85em; }}
table.table th, table.table td {{ padding: 4px 8px; border-bottom: 1px solid #ddd; text-align: left; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{len(results.runs)} run(s), {results.scores["question_id"].nunique()} question(s); generated {created}.</p>
<h2>Summary</h2>
{summary_html}
{chr(10).join(sections)}
<h2>Runs</h2>
{runs_html}
</body></html>
"""


def export_bytes(results: Results, fmt: str, run_ids: list[str] | None = None,
                 name: str = "ragkit-results") -> tuple[bytes, str, str]:
    """(content, file name, MIME type) of an export, e.g. for st.download_button."""
    _check_format(fmt)
    results = results.subset(run_ids)
    suffix, mime = FORMATS[fmt]
    if fmt == "html":
        return report_html(results, title=name).encode("utf-8"), name + suffix, mime
    tables = result_tables(results)
    if fmt == "csv":
        data = _zip({f"{table}.csv": _to_csv(frame) for table, frame in tables.items()})
    elif fmt == "parquet":
        data = _zip({f"{table}.parquet": frame.to_parquet(index=False) for table, frame in tables.items()})
    elif fmt == "xlsx":
        data = _to_xlsx(tables)
    else:
        data = _to_json(tables)
    return data, name + suffix, mime


def export_results(results_dir: str | Path, fmt: str, out_path: str | Path | None = None,
                   run_ids: list[str] | None = None) -> Path:
    """Write an export of a results folder; the default path is beside the folder, named after it."""
    _check_format(fmt)
    location = as_location(results_dir)
    # Beside a local results folder; in the working directory for one on object storage.
    data, filename, _ = export_bytes(load_results(location), fmt, run_ids, name=location_name(location))
    beside = location.resolve().parent if isinstance(location, Path) else Path.cwd()
    target = Path(out_path) if out_path else beside / filename
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target

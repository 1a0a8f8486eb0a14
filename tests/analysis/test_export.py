"""ragkit.export and `ragkit export`: every format round-trips the tables; the report works offline."""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile

import numpy as np
import pandas as pd
import pytest

from ragkit.analysis import charts, curve, load_results, metric_means
from ragkit.analysis.export import FORMULA_PREFIXES, export_bytes, export_results
from ragkit.analysis.latency import latency_by_stage, quality_vs_latency
from ragkit.cli import main
from ragkit.errors import ConfigError
from ragkit.results import ResultStore

QUESTIONS = ["q1", "q2", "q3"]
# Longer than an Excel cell holds, with a control character openpyxl refuses.
LONG_PROMPT = "Context:\x01 " + "x" * 40_000
METRICS = {"recall@1": [0.0, 1.0, 1.0], "recall@2": [1.0, 1.0, 1.0], "mrr": [0.5, 1.0, 1.0]}


def _write_store(root) -> None:
    store = ResultStore(root)
    for run_id, retriever, top_k in (("r1", "bm25", 2), ("r2", "dense", 2)):
        store.write_run(run_id, {"run_id": run_id, "experiment": "t", "chunkset_id": "cs", "index_id": "ix",
                                 "chunker": "token", "embedder": "minilm", "retriever": retriever, "top_k": top_k,
                                 "retriever.top_k": top_k})
        scores = pd.DataFrame([{"run_id": run_id, "question_id": q, "metric": m, "value": v[i], "error": None}
                               for m, v in METRICS.items() for i, q in enumerate(QUESTIONS)])
        retrievals = pd.DataFrame([{"run_id": run_id, "question_id": q, "rank": rank, "chunk_id": f"c{rank}",
                                    "doc_id": "d", "start_char": 0, "end_char": 10, "score": 1.0 / rank}
                                   for q in QUESTIONS for rank in (1, 2)])
        stages = pd.DataFrame([{"run_id": run_id, "question_id": q, "stage": "retrieve", "seconds": 0.01,
                                "cached": False} for q in QUESTIONS]
                              + [{"run_id": run_id, "question_id": None, "stage": "index", "seconds": 2.0,
                                  "cached": False}])
        judgements = pd.DataFrame([{"run_id": run_id, "question_id": q, "judge": "rerank", "input_summary": "2 chunks",
                                    "decision": '{"keep": ["c1"]}', "raw_reply": "{}", "valid": True, "error": None,
                                    "fell_back": False, "seconds": 0.5, "cache_hit": False} for q in QUESTIONS])
        answers = pd.DataFrame([{"run_id": run_id, "question_id": q, "answer": f"answer {q}", "citations": '["c1"]',
                                 "contexts": "[]", "prompt": LONG_PROMPT if q == "q1" else "p", "valid": True,
                                 "error": None} for q in QUESTIONS])
        store.commit_shard(run_id, QUESTIONS, {"scores": scores, "retrievals": retrievals, "stages": stages,
                                               "judgements": judgements, "answers": answers})


@pytest.fixture
def results_dir(tmp_path):
    root = tmp_path / "results" / "demo"
    _write_store(root)
    return root


# comparisons: the retriever's effect (bm25 vs dense) and its one pair, over the one headline metric (mrr).
# failure_classes: one row per question of each run.
EXPECTED_ROWS = {"summary": 2, "comparisons": 2, "failure_classes": 6, "runs": 2, "questions": 0, "scores": 18,
                 "retrievals": 12, "stages": 8,
                 "judgements": 6, "answers": 6}


@pytest.mark.unit
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_zip_exports_hold_one_file_per_table(results_dir, tmp_path, fmt):
    path = export_results(results_dir, fmt, tmp_path / f"out.{fmt}.zip")
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == sorted(f"{name}.{fmt}" for name in EXPECTED_ROWS)
        for name, rows in EXPECTED_ROWS.items():
            data = io.BytesIO(archive.read(f"{name}.{fmt}"))
            frame = pd.read_csv(data) if fmt == "csv" else pd.read_parquet(data)
            assert len(frame) == rows, name
            if name == "answers":  # the whole prompt, control character included
                assert LONG_PROMPT in set(frame["prompt"])


@pytest.mark.unit
def test_xlsx_has_one_sheet_per_table_summary_first(results_dir, tmp_path):
    path = export_results(results_dir, "xlsx", tmp_path / "out.xlsx")
    sheets = pd.read_excel(path, sheet_name=None)
    assert list(sheets) == list(EXPECTED_ROWS)
    assert {name: len(frame) for name, frame in sheets.items()} == EXPECTED_ROWS
    assert sheets["summary"].set_index("run_id").loc["r1", "mrr"] == pytest.approx(2.5 / 3)
    prompt = sheets["answers"].set_index(["run_id", "question_id"]).loc[("r1", "q1"), "prompt"]
    assert len(prompt) == 32_767 and prompt.startswith("Context: xxx") and prompt.endswith("hold it whole]")


@pytest.mark.unit
def test_json_is_one_object_of_tables(results_dir, tmp_path):
    payload = json.loads(export_results(results_dir, "json", tmp_path / "out.json").read_text())
    assert {name: len(records) for name, records in payload.items()} == EXPECTED_ROWS


@pytest.mark.unit
def test_html_report_is_self_contained(results_dir, tmp_path):
    text = export_results(results_dir, "html", tmp_path / "report.html").read_text(encoding="utf-8")
    # No script or stylesheet is fetched: plotly.js is inlined (its bundle mentions CDN hosts only
    # inside map-tile defaults that these charts never use).
    assert not re.search(r"<script[^>]+src=", text)
    assert not re.search(r"<link[^>]+href=\"http", text)
    assert "cdn.plot.ly/plotly" not in text
    assert text.count("plotly.js v") >= 1 and len(text) > 1_000_000
    for heading in ("Summary", "Metrics", "recall@k", "Latency by stage"):
        assert heading in text


@pytest.mark.unit
def test_export_bytes_selects_runs_and_names_the_file(results_dir):
    data, filename, mime = export_bytes(load_results(results_dir), "json", run_ids=["r2"])
    assert (filename, mime) == ("ragkit-results.json", "application/json")
    payload = json.loads(data)
    assert {r["run_id"] for r in payload["scores"]} == {"r2"} and len(payload["runs"]) == 1
    assert [r["run_id"] for r in payload["judgements"]] == ["r2"] * 3
    assert [r["answer"] for r in payload["answers"]] == ["answer q1", "answer q2", "answer q3"]


@pytest.mark.unit
def test_unknown_format_and_run_are_config_errors(results_dir):
    with pytest.raises(ConfigError, match="Valid formats: csv, parquet, xlsx, json, html"):
        export_results(results_dir, "pdf")
    with pytest.raises(ConfigError, match="unknown run id"):
        export_bytes(load_results(results_dir), "csv", run_ids=["nope"])


@pytest.mark.unit
def test_charts_draw_one_trace_per_series(results_dir):
    results = load_results(results_dir)
    means = metric_means(results.scores, ["mrr", "recall@1"])
    assert len(charts.metric_bar_chart(means, results.runs).data) == 2
    assert len(charts.metric_bar_chart(means, results.runs, kind="bar").data) == 2
    assert len(charts.curve_chart(curve(results.scores, "recall"), results.runs, "recall").data) == 2
    latency = charts.latency_chart(latency_by_stage(results.stages), results.runs)
    assert {trace.name for trace in latency.data} == {"retrieve", "index (build)"}
    scatter = charts.pareto_chart(quality_vs_latency(results.scores, results.stages, "mrr"), results.runs)
    assert [trace.name for trace in scatter.data] == ["dominated", "Pareto front"]


@pytest.mark.integration
def test_cli_export_prints_the_written_path(results_dir, tmp_path, capsys):
    out = tmp_path / "cli.xlsx"
    assert main(["export", str(results_dir), "--format", "xlsx", "--out", str(out), "--runs", "r1"]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert len(pd.read_excel(out, sheet_name="runs")) == 1
    assert main(["export", str(results_dir), "--format", "csv"]) == 0
    assert (results_dir.parent / "demo.zip").exists()


# One hostile text per prefix a spreadsheet reads as a formula (OWASP CSV injection).
HOSTILE = ['=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"]
NEGATIVE_SCORE = -0.25


@pytest.fixture
def hostile_dir(tmp_path):
    """One run whose answers, prompts, judge replies and doc ids are each a formula-leading text,
    one question per text; the first question's score is a negative number."""
    root = tmp_path / "results" / "hostile"
    store = ResultStore(root)
    store.write_run("r1", {"run_id": "r1", "experiment": "t", "chunkset_id": "cs", "index_id": "ix",
                           "chunker": "token", "embedder": "minilm", "retriever": "bm25", "top_k": 1})
    questions = [f"q{i}" for i in range(len(HOSTILE))]
    rows = list(zip(questions, HOSTILE))
    store.commit_shard("r1", questions, {
        "scores": pd.DataFrame([{"run_id": "r1", "question_id": q, "metric": "mrr",
                                 "value": NEGATIVE_SCORE if i == 0 else 1.0, "error": None}
                                for i, (q, _) in enumerate(rows)]),
        "retrievals": pd.DataFrame([{"run_id": "r1", "question_id": q, "rank": 1, "chunk_id": "c1", "doc_id": text,
                                     "start_char": 0, "end_char": 10, "score": 1.0} for q, text in rows]),
        "stages": pd.DataFrame([{"run_id": "r1", "question_id": q, "stage": "retrieve", "seconds": 0.01,
                                 "cached": False} for q, _ in rows]),
        "judgements": pd.DataFrame([{"run_id": "r1", "question_id": q, "judge": "rerank", "input_summary": "1 chunk",
                                     "decision": "{}", "raw_reply": text, "valid": True, "error": None,
                                     "fell_back": False, "seconds": 0.5, "cache_hit": False} for q, text in rows]),
        "answers": pd.DataFrame([{"run_id": "r1", "question_id": q, "answer": text, "citations": "[]",
                                  "contexts": "[]", "prompt": text, "valid": True, "error": None} for q, text in rows]),
    })
    return root


# Where the fixture put the hostile texts: table -> columns.
HOSTILE_COLUMNS = {"retrievals": ["doc_id"], "judgements": ["raw_reply"], "answers": ["answer", "prompt"]}


@pytest.mark.unit
def test_xlsx_writes_formula_leading_text_as_quoted_text(hostile_dir):
    from openpyxl import load_workbook

    data, _, _ = export_bytes(load_results(hostile_dir), "xlsx")
    workbook = load_workbook(io.BytesIO(data))
    assert all(cell.data_type != "f" for sheet in workbook for row in sheet.iter_rows() for cell in row)
    for table, columns in HOSTILE_COLUMNS.items():
        sheet = workbook[table]
        header = [cell.value for cell in sheet[1]]
        for column in columns:
            cells = [row[header.index(column)] for row in sheet.iter_rows(min_row=2)]
            assert [cell.data_type for cell in cells] == ["s"] * len(HOSTILE), (table, column)
            assert [cell.value for cell in cells] == ["'" + text for text in HOSTILE], (table, column)
    scores = workbook["scores"]
    values = [row[[c.value for c in scores[1]].index("value")] for row in scores.iter_rows(min_row=2)]
    assert {cell.data_type for cell in values} == {"n"} and NEGATIVE_SCORE in [cell.value for cell in values]
    stages = workbook["stages"]
    seconds = [row[[c.value for c in stages[1]].index("seconds")] for row in stages.iter_rows(min_row=2)]
    assert {cell.data_type for cell in seconds} == {"n"}


@pytest.mark.unit
def test_csv_writes_formula_leading_text_as_quoted_text(hostile_dir):
    data, _, _ = export_bytes(load_results(hostile_dir), "csv")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        files = {name.removesuffix(".csv"): archive.read(name).decode("utf-8") for name in archive.namelist()}
    for table, text in files.items():
        rows = list(csv.reader(io.StringIO(text, newline="")))
        leading = [cell for row in rows for cell in row if cell.startswith(FORMULA_PREFIXES)]
        assert all(re.fullmatch(r"-\d+(\.\d+)?", cell) for cell in leading), (table, leading)  # negative numbers
        header, body = rows[0], rows[1:]
        if table in HOSTILE_COLUMNS:  # a CR inside a cell does not start a row
            assert len(body) == len(HOSTILE), table
        for column in HOSTILE_COLUMNS.get(table, []):
            assert [row[header.index(column)] for row in body] == ["'" + text for text in HOSTILE], (table, column)
    scores = pd.read_csv(io.StringIO(files["scores"]))
    assert pd.api.types.is_float_dtype(scores["value"]) and NEGATIVE_SCORE in scores["value"].tolist()
    assert pd.api.types.is_float_dtype(pd.read_csv(io.StringIO(files["stages"]))["seconds"])


@pytest.mark.unit
def test_json_and_parquet_keep_formula_leading_text_exactly(hostile_dir):
    results = load_results(hostile_dir)
    payload = json.loads(export_bytes(results, "json")[0])
    with zipfile.ZipFile(io.BytesIO(export_bytes(results, "parquet")[0])) as archive:
        parquet = {name.removesuffix(".parquet"): pd.read_parquet(io.BytesIO(archive.read(name)))
                   for name in archive.namelist()}
    for table, columns in HOSTILE_COLUMNS.items():
        for column in columns:
            assert [record[column] for record in payload[table]] == HOSTILE, (table, column)
            assert parquet[table][column].tolist() == HOSTILE, (table, column)


@pytest.mark.unit
def test_a_curve_chart_of_many_runs_draws_each_run_as_a_line_of_one_trace():
    runs = pd.DataFrame({"run_id": [f"r{i}" for i in range(50)], "label": [f"run {i:02d}" for i in range(50)]})
    curves = pd.DataFrame({"run_id": np.repeat(runs["run_id"].to_numpy(), 3), "k": np.tile([1, 3, 5], 50),
                           "mean": np.tile([0.2, 0.5, 0.7], 50)})
    figure = charts.curve_chart(curves, runs, "recall")
    assert len(figure.data) == 1 and figure.data[0].name == "50 runs"
    x, y, names = figure.data[0].x, figure.data[0].y, figure.data[0].customdata
    # 50 lines of 3 points, 49 gaps between them; each point named by its run on hover.
    assert len(x) == 50 * 3 + 49 and np.isnan(np.asarray(x, dtype=float)).sum() == 49
    assert list(x[:3]) == [1, 3, 5] and np.isnan(float(x[3]))
    assert list(y[:3]) == [0.2, 0.5, 0.7] and list(names[:3]) == ["run 00"] * 3 and names[3] == ""
    assert list(names[4:7]) == ["run 01"] * 3
    few = charts.curve_chart(curves[curves["run_id"].isin(["r0", "r1"])], runs, "recall")
    assert [trace.name for trace in few.data] == ["run 00", "run 01"]

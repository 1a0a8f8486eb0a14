"""The labelling path without outside knowledge: runs named by the label `ragkit summary` prints (or
an id prefix), a sheet with spans on one line per row that reads back, a judge that shows progress
and counts what came from the cache."""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest

from ragkit.analysis.run_names import resolve_runs
from ragkit.cli import main
from ragkit.errors import ConfigError
from ragkit.labels.pooling import PoolParams, build_pool
from ragkit.labels.sheets import pool_sheet, read_sheet, sheet_labels
from ragkit.labels.store import LabelStore
from tests.labels.helpers import DOCS, make_results

pytestmark = pytest.mark.unit

RUNS = pd.DataFrame({"run_id": ["3fa2c01b9d7e4a11", "3fa2d9e07c1b2f20", "8be10c4d5a6f7e39"],
                     "label": ["token(chunk_size=256, overlap=20) · minilm · dense · k=5",
                               "token(chunk_size=256, overlap=20) · - · bm25 · k=5", "sentence · - · bm25 · k=5"]})


def test_runs_are_named_by_label_whole_id_or_a_unique_prefix():
    assert resolve_runs(RUNS, "sentence · - · bm25 · k=5") == ["8be10c4d5a6f7e39"]
    # A label holding a comma is matched whole, beside other references
    assert resolve_runs(RUNS, "token(chunk_size=256, overlap=20) · - · bm25 · k=5,8be1") == [
        "3fa2d9e07c1b2f20", "8be10c4d5a6f7e39"]
    assert resolve_runs(RUNS, "3fa2c01b9d7e4a11, 3fa2d") == ["3fa2c01b9d7e4a11", "3fa2d9e07c1b2f20"]
    with pytest.raises(ConfigError, match=r"'3fa2' matches 2 runs: 3fa2c01b9d7e4a11 .*3fa2d9e07c1b2f20"):
        resolve_runs(RUNS, "3fa2")
    with pytest.raises(ConfigError, match=r"'8be' matches no run .*Valid runs: .*8be10c4d5a6f7e39 \(sentence"):
        resolve_runs(RUNS, "8be")  # shorter than the least prefix
    with pytest.raises(ConfigError, match="'dense' matches no run"):
        resolve_runs(RUNS, "dense")


@pytest.fixture
def folder(tmp_path):
    make_results(tmp_path / "results")
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in DOCS.items()),
                                          encoding="utf-8")
    return tmp_path


def test_summary_prints_each_runs_id_beside_its_label_and_pool_takes_the_label(folder, capsys):
    results = str(folder / "results")
    assert main(["summary", results]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["label", "run_id"]
    row = next(line for line in lines if " r2 " in f" {line} ")
    label = row.split(" r2 ")[0].strip()
    assert label == "token(chunk_size=128) · - · bm25 · k=4"
    assert main(["labels", "pool", results, "--runs", f"{label},r3", "--k", "2"]) == 0
    pool = LabelStore(results).latest_pool()
    assert pool is not None and pool.runs == ["r2", "r3"]
    capsys.readouterr()
    assert main(["labels", "pool", results, "--runs", "bm25", "--k", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'bm25' matches no run" in err and "r1 (token(chunk_size=64)" in err


def test_the_sheet_has_spans_one_line_per_row_and_reads_back(tmp_path):
    texts = {"d1": "Line one.\nLine two, with a \\ and\ta tab.\r\nLine three.", "d2": "Plain text here."}
    retrievals = pd.DataFrame([
        {"run_id": "r1", "question_id": "q1", "rank": 1, "doc_id": "d1", "start_char": 0, "end_char": len(texts["d1"])},
        {"run_id": "r1", "question_id": "q1", "rank": 2, "doc_id": "d2", "start_char": 0, "end_char": 5},
        {"run_id": "r2", "question_id": "q1", "rank": 1, "doc_id": "d1", "start_char": 10, "end_char": 30}])
    questions = pd.DataFrame({"question_id": ["q1"], "text": ["Which\nlines?"], "document": ["d1"]})
    pool = build_pool(PoolParams(runs=["r1", "r2"], k=2), retrievals, questions, None, texts)
    sheet = tmp_path / "sheet.csv"
    sheet.write_text(pool_sheet(pool), encoding="utf-8")
    assert len(sheet.read_text(encoding="utf-8").splitlines()) == 1 + pool.chunk_count()  # one line per row
    rows = read_sheet(sheet)
    by_span = {(c.doc_id, c.start_char, c.end_char): c for c in pool.questions[0].chunks}
    for row in rows:
        chunk = by_span[(row["doc_id"], int(row["start_char"]), int(row["end_char"]))]
        assert row["item_id"] == chunk.item_id and row["text"] == chunk.text  # escapes undone
        assert row["text"] == texts[row["doc_id"]][int(row["start_char"]):int(row["end_char"])]
    assert rows[0]["question"] == "Which\nlines?"
    # Filled by span with the ids left blank (as a tool that knows only the documents would)
    with sheet.open(encoding="utf-8", newline="") as handle:
        records = list(csv.DictReader(handle))
    for record in records:
        record["item_id"] = ""
        record["relevance"] = "relevant" if record["doc_id"] == "d1" else "not"
    with sheet.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    labels = sheet_labels(sheet, pool, "ann")
    assert sorted((r["doc_id"], r["start_char"], r["end_char"], r["relevance"]) for r in labels) == [
        ("d1", 0, len(texts["d1"]), 2), ("d1", 10, 30, 2), ("d2", 0, 5, 0)]
    assert {r["item_id"] for r in labels} == {chunk.item_id for chunk in by_span.values()}
    # A span that disagrees with the pool's item is refused, naming both
    records[0]["item_id"], records[0]["end_char"] = pool.questions[0].chunks[0].item_id, "999"
    with sheet.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    with pytest.raises(ConfigError, match=r"line 2: item .* the sheet says .*999\)"):
        sheet_labels(sheet, pool, "ann")


def test_the_judge_shows_progress_and_counts_the_cache_truly(folder, capsys, monkeypatch):
    from ragkit.llms import base
    from tests.factories import scripted_llm_class

    backend = scripted_llm_class()(["not json"] + [json.dumps({"grade": 2, "reason": "it mentions bats"})] * 50)
    monkeypatch.setattr(base.llms, "build", lambda spec: backend)
    results = str(folder / "results")
    assert main(["labels", "pool", results, "--runs", "r1,r2", "--k", "2", "--corpus", str(folder / "dataset")]) == 0
    pool = LabelStore(results).latest_pool()
    assert pool is not None
    chunks = pool.chunk_count()
    capsys.readouterr()
    assert main(["labels", "judge", results, "--llm", "local"]) == 0
    captured = capsys.readouterr()
    assert f"{chunks}/{chunks}" in captured.err  # the progress bar: chunks judged of the total
    assert (f"judged {chunks} chunk(s) of pool {pool.pool_id} with scripted:scripted: 1 invalid reply (no grade); "
            f"{chunks} call(s) sent to the model, 0 answered from the cache") in captured.out
    # Again: only the invalid one is asked, and its reply comes from the cache
    assert main(["labels", "judge", results, "--llm", "local", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "judged 1 chunk(s)" in captured.out and "0 call(s) sent to the model, 1 answered from the cache" in \
        captured.out
    assert captured.err == ""


def test_a_sheet_text_a_spreadsheet_would_run_as_a_formula_is_quoted_and_reads_back(tmp_path):
    texts = {"d1": '=HYPERLINK("http://127.0.0.1/x","click") then text', "d2": "-5 degrees overnight."}
    retrievals = pd.DataFrame([{"run_id": "r1", "question_id": "q1", "rank": rank, "doc_id": doc_id, "start_char": 0,
                                "end_char": len(texts[doc_id])} for rank, doc_id in ((1, "d1"), (2, "d2"))])
    questions = pd.DataFrame({"question_id": ["q1"], "text": ["@SUM(A1:A2)?"], "document": ["d1"]})
    pool = build_pool(PoolParams(runs=["r1"], k=2), retrievals, questions, None, texts)
    sheet = tmp_path / "sheet.csv"
    sheet.write_text(pool_sheet(pool), encoding="utf-8")
    with sheet.open(encoding="utf-8", newline="") as handle:
        written = list(csv.DictReader(handle))
    assert {row["text"][:2] for row in written} == {"'=", "'-"} and written[0]["question"] == "'@SUM(A1:A2)?"
    rows = read_sheet(sheet)
    assert sorted(row["text"] for row in rows) == sorted(texts.values())
    assert rows[0]["question"] == "@SUM(A1:A2)?"

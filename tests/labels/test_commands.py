"""`ragkit labels`: pool, sheet, add, export, ground-truth and agreement through the CLI."""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest

from ragkit.cli import main
from tests.labels.helpers import DOCS, make_results


@pytest.fixture
def folder(tmp_path):
    scores = pd.DataFrame({"run_id": ["r1", "r1", "r2", "r2"], "question_id": ["q1", "q2"] * 2,
                           "metric": ["faithfulness"] * 4, "value": [0.9, 0.1, 0.8, 0.7], "error": [None] * 4})
    make_results(tmp_path / "results", scores)
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in DOCS.items()),
                                          encoding="utf-8")
    (dataset / "questions.jsonl").write_text(
        json.dumps({"id": "q1", "question": "What do bats host?", "answer": "coronaviruses", "doc_id": "d1",
                    "answer_start": 15, "answer_end": 28}) + "\n", encoding="utf-8")
    return tmp_path


@pytest.mark.unit
def test_pool_label_by_sheet_export_and_measure_through_the_cli(folder, capsys):
    results = str(folder / "results")
    assert main(["labels", "pool", results, "--runs", "r1,r2,r3", "--k", "3", "--corpus",
                 str(folder / "dataset")]) == 0
    assert "2 questions, 12 chunks, 5 answers from 3 runs at k=3" in capsys.readouterr().out
    sheet = folder / "sheet.csv"
    assert main(["labels", "sheet", results, "--out", str(sheet)]) == 0
    rows = list(csv.DictReader(sheet.open(encoding="utf-8")))
    assert all(any(row["text"] in text for text in DOCS.values()) for row in rows if row["item_kind"] == "chunk")
    assert not {"r1", "r2", "r3"} & {value for row in rows for value in row.values()}  # configurations hidden
    for row in rows:
        if row["item_kind"] == "chunk":
            row["relevance"] = "relevant" if "bats" in row["text"].lower() or "Ventilation" in row["text"] else "not"
        else:
            row["correct"], row["grounded"] = "correct", "yes"
    with sheet.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["labels", "add", results, str(sheet), "--annotator", "ann"]) == 0
    assert "17 label(s) by ann saved" in capsys.readouterr().out
    assert main(["labels", "export", results, "--format", "qrels"]) == 0
    qrels = capsys.readouterr().out.splitlines()
    assert "q1 0 d1 2" in qrels and "q2 0 d2 2" in qrels and all(len(line.split()) == 4 for line in qrels)
    assert main(["labels", "ground-truth", results, "--set", str(folder / "dataset"), "--out",
                 str(folder / "graded")]) == 0
    assert (folder / "graded" / "corpus.jsonl").is_file()
    graded = json.loads((folder / "graded" / "questions.jsonl").read_text(encoding="utf-8"))
    assert graded["graded_spans"] and {span["source"] for span in graded["graded_spans"]} == {"human"}
    assert main(["labels", "agreement", results, "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    assert "## Judges against people" in out and "faithfulness vs grounded" in out
    assert "## Prediction-powered means" in out and "PPI++" in out


@pytest.mark.unit
def test_the_report_has_a_labels_section_only_when_labels_exist(folder):
    from ragkit.analysis.report import render_report
    from ragkit.labels.store import LabelStore

    results = folder / "results"
    assert "Judges against people" not in render_report(results, "md")
    assert main(["labels", "pool", str(results), "--k", "2"]) == 0
    pool = LabelStore(results).latest_pool()
    assert pool is not None
    store = LabelStore(results)
    store.add([{"annotator": "ann", "pool_id": pool.pool_id, "question_id": q.question_id, "document": q.document,
                "item_kind": "answer", "item_id": a.item_id, "run_id": a.run_id, "grounded": a.run_id == "r1"}
               for q in pool.questions for a in q.answers])
    text = render_report(results, "md")
    assert "## Judges against people" in text and "## Confusion: faithfulness vs grounded" in text
    payload = json.loads(render_report(results, "json"))
    (row,) = payload["labels"]["agreement"]
    # faithfulness r1 q1 0.9, q2 0.1, r2 q1 0.8, q2 0.7 -> judge grounded yes, no, yes, yes; people yes, yes, no, no
    assert row["decision"] == "faithfulness vs grounded" and row["items"] == 4
    assert row["accuracy"] == pytest.approx(0.25)
    assert row["bias"] == pytest.approx((0.9 + 0.1 + 0.8 + 0.7) / 4 - 0.5)
    assert {r["estimator"] for r in payload["labels"]["prediction_powered"]} == {"judge only", "human only", "PPI",
                                                                                  "PPI++"}


@pytest.mark.unit
def test_labels_judge_grades_every_chunk_once_then_has_nothing_to_do(folder, capsys, monkeypatch):
    from ragkit.llms import base
    from ragkit.registry import ComponentSpec
    from tests.factories import scripted_llm_class

    backend = scripted_llm_class()([json.dumps({"grade": 2})])
    monkeypatch.setattr(base.llms, "build", lambda spec: backend)
    monkeypatch.setattr("ragkit.llms.defaults.resolve_default_backend", lambda: ComponentSpec(type="local"))
    results = str(folder / "results")
    assert main(["labels", "pool", results, "--k", "2", "--corpus", str(folder / "dataset")]) == 0
    chunks = int(capsys.readouterr().out.split(" chunks")[0].rsplit(" ", 1)[1])
    assert main(["labels", "judge", results]) == 0
    out = capsys.readouterr().out
    assert f"judged {chunks} chunk(s)" in out and "0 invalid replies" in out and len(backend.requests) == chunks
    assert main(["labels", "judge", results]) == 0
    assert "nothing to judge" in capsys.readouterr().out and len(backend.requests) == chunks
    assert main(["labels", "export", results, "--grades", "judge", "--level", "span"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == chunks and all(line.endswith(" 1") for line in lines)  # judge 2 -> partly (1)


@pytest.mark.unit
def test_labels_metrics_says_whose_grades_each_mean_used(folder, capsys):
    from ragkit.labels.store import LabelStore

    results = str(folder / "results")
    assert main(["labels", "pool", results, "--runs", "r1,r2", "--k", "2"]) == 0
    store = LabelStore(results)
    pool = store.latest_pool()
    assert pool is not None
    rows = []
    for q in pool.questions:
        for c in q.chunks:
            base = {"pool_id": pool.pool_id, "question_id": q.question_id, "document": q.document,
                    "item_kind": "chunk", "item_id": c.item_id}
            rows.append({**base, "annotator": "judge:x", "source": "judge", "relevance": 3})
            if q.question_id == "q1":
                rows.append({**base, "annotator": "ann", "relevance": 0})
    store.add(rows)
    capsys.readouterr()
    assert main(["labels", "metrics", results]) == 0
    out = capsys.readouterr().out
    # q1 graded by a person (all 0), q2 by the judge only (all 3 -> relevant): mean 0.5 over 2 questions;
    # a judge that gave 3 to every chunk tells no run apart, and the table says so.
    label = "token(chunk_size=64) · - · bm25 · k=4"
    assert f"| r1 | {label} | pool_precision@2 | 0.5 | 2 of 2 | human 1, judge 1 | 0 | not a ranking |" in out
    assert out.startswith("Not a ranking: the judge gave 3 to every chunk it graded (")
    assert main(["labels", "metrics", results, "--grades", "human"]) == 0
    out = capsys.readouterr().out
    assert f"| r1 | {label} | pool_precision@2 | 0.0 | 1 of 2 | human 1 | - | not a ranking |" in out
    assert "every graded chunk counts as not relevant, so every run's pool_precision@2 is 0.0 by construction" in out

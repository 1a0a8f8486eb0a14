"""Labels: append-only sessions, the CSV sheet round trip, TREC qrels, graded ground truth."""

from __future__ import annotations

import csv
import json

import pytest

from ragkit.errors import ConfigError
from ragkit.labels.ground_truth import add_graded_spans
from ragkit.labels.pooling import PoolParams, build_pool
from ragkit.labels.qrels import to_qrels
from ragkit.labels.sheets import pool_sheet, sheet_labels
from ragkit.labels.store import LabelStore
from ragkit.questions import load_question_set
from tests.labels.helpers import DOCS, make_results


@pytest.fixture
def pooled(tmp_path):
    results = make_results(tmp_path / "results")
    pool = build_pool(PoolParams(runs=["r1", "r2", "r3"], k=3), results.read("retrievals"), results.read("questions"),
                      results.read("answers"), DOCS)
    store = LabelStore(tmp_path / "results")
    store.save_pool(pool)
    return store, pool


def chunk_label(pool, question: int, chunk: int, grade: int, annotator: str = "ann") -> dict:
    q = pool.questions[question]
    c = q.chunks[chunk]
    return {"annotator": annotator, "pool_id": pool.pool_id, "question_id": q.question_id, "document": q.document,
            "item_kind": "chunk", "item_id": c.item_id, "doc_id": c.doc_id, "start_char": c.start_char,
            "end_char": c.end_char, "relevance": grade}


@pytest.mark.unit
def test_sessions_append_and_the_latest_label_of_an_annotator_counts(pooled):
    store, pool = pooled
    store.add([chunk_label(pool, 0, 0, 2), chunk_label(pool, 0, 1, 0)], labelled_at="2026-11-26T10:00:00+00:00")
    store.add([chunk_label(pool, 0, 0, 1)], labelled_at="2026-11-26T11:00:00+00:00")
    store.add([chunk_label(pool, 0, 0, 2, annotator="bo")], labelled_at="2026-11-26T12:00:00+00:00")
    everything = store.read()
    assert len(everything) == 4 and everything["session"].nunique() == 3  # nothing overwritten
    current = store.current()
    first = pool.questions[0].chunks[0].item_id
    mine = current[(current["item_id"] == first)].set_index("annotator")["relevance"]
    assert mine.to_dict() == {"ann": 1, "bo": 2}
    assert len(current) == 3


@pytest.mark.unit
@pytest.mark.parametrize(("change", "message"), [
    ({"relevance": 3}, "relevance grade is 0-2"),
    ({"relevance": None}, "needs a grade"),
    ({"item_kind": "passage"}, "item_kind"),
])
def test_a_bad_label_is_one_line_naming_it(pooled, change, message):
    store, pool = pooled
    with pytest.raises(ConfigError, match=message):
        store.add([{**chunk_label(pool, 0, 0, 1), **change}])
    assert store.read().empty


@pytest.mark.unit
def test_a_filled_sheet_becomes_labels_and_hides_the_runs(pooled, tmp_path):
    store, pool = pooled
    text = pool_sheet(pool)
    assert "r1" not in text and "r2" not in text and "r3" not in text
    rows = list(csv.DictReader(text.splitlines()))
    rows[0]["relevance"] = "relevant"
    rows[1]["relevance"] = "0"
    answer = next(i for i, row in enumerate(rows) if row["item_kind"] == "answer")
    rows[answer]["correct"], rows[answer]["grounded"] = "partly", "yes"
    sheet = tmp_path / "sheet.csv"
    with open(sheet, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    labels = sheet_labels(sheet, pool, "ann")
    assert [(label["item_kind"], label["relevance"], label["correct"], label["grounded"]) for label in labels] == [
        ("chunk", 2, None, None), ("chunk", 0, None, None), ("answer", None, 1, True)]
    store.add(labels)
    assert len(store.current()) == 3
    rows[1]["relevance"] = "very"
    with open(sheet, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(ConfigError, match=r"line 3: relevance 'very' is not a grade. Valid: not \(0\), partly"):
        sheet_labels(sheet, pool, "ann")


@pytest.mark.unit
def test_qrels_by_document_take_the_best_chunk_and_by_span_every_chunk(pooled):
    store, pool = pooled
    q1 = pool.questions[0]
    by_span = {(c.doc_id, c.start_char, c.end_char): i for i, c in enumerate(q1.chunks)}
    store.add([chunk_label(pool, 0, by_span[("d1", 0, 29)], 2), chunk_label(pool, 0, by_span[("d1", 30, 50)], 1),
               chunk_label(pool, 0, by_span[("d2", 0, 29)], 0),
               chunk_label(pool, 0, by_span[("d1", 0, 29)], 0, annotator="bo"),
               chunk_label(pool, 0, by_span[("d1", 0, 29)], 2, annotator="cy")])
    # d1: low median of (2, 0, 2) is 2 for 0-29, and 1 for 30-50 -> best 2; d2: 0
    assert to_qrels(pool, store.current()) == "q1 0 d1 2\nq1 0 d2 0\n"
    assert to_qrels(pool, store.current(), level="span") == "q1 0 d1:0-29 2\nq1 0 d1:30-50 1\nq1 0 d2:0-29 0\n"
    assert to_qrels(pool, store.current(), grades="judge") == ""


@pytest.mark.unit
def test_graded_spans_go_into_a_jsonl_set_that_still_reads_and_keeps_other_keys(pooled, tmp_path):
    store, pool = pooled
    store.add([chunk_label(pool, 0, 0, 2), chunk_label(pool, 0, 1, 1)])
    rows = [{"id": "q1", "question": "What do bats host?", "answer": "coronaviruses", "doc_id": "d1",
             "answer_start": 15, "answer_end": 28, "extra": "kept"},
            {"id": "q2", "question": "What lowers indoor risk?", "answer": "Ventilation", "doc_id": "d2",
             "answer_start": 30, "answer_end": 41}]
    source = tmp_path / "set.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    out = tmp_path / "graded.jsonl"
    assert add_graded_spans(source, out, pool, store.current()) == (1, 2)
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert written[0]["extra"] == "kept" and "graded_spans" not in written[1]
    before, after = load_question_set(source), load_question_set(out)
    graded = after.questions[0].graded_spans
    assert sorted(span.grade for span in graded) == [1, 2] and {span.source for span in graded} == {"human"}
    # a question without labels keeps its content key (so its results are reused), a graded one changes
    assert after.questions[1].content_key() == before.questions[1].content_key()
    assert after.questions[0].content_key() != before.questions[0].content_key()
    with pytest.raises(ConfigError, match="is the question set itself"):
        add_graded_spans(source, source, pool, store.current())


@pytest.mark.unit
def test_plain_jsonl_reads_graded_spans_and_names_a_bad_one(tmp_path):
    row = {"id": "a", "question": "What do bats host?", "relevant_doc_ids": ["d1"],
           "graded_spans": [{"doc_id": "d1", "start": 0, "end": 29, "grade": 2, "source": "judge"}]}
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(row) + "\n", encoding="utf-8")
    (question,) = load_question_set(good, format="jsonl").questions
    assert [(s.doc_id, s.start, s.end, s.grade, s.source) for s in question.graded_spans] == [("d1", 0, 29, 2, "judge")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**row, "graded_spans": [{"doc_id": "d1", "start": 0, "end": 29, "grade": 3}]}) + "\n",
                   encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad.jsonl, line 1: graded_spans.0.grade"):
        load_question_set(bad, format="jsonl")

"""Agreement that says whether it can be read: a judge (or people) using one grade only is named in
words and its pooled metrics are not a ranking; intervals from few documents are flagged; invalid
replies are counted wherever a judge is measured; runs scored on fewer questions are flagged in
the table."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ragkit.cli import main
from ragkit.labels.agreement import MIN_CLUSTERS
from ragkit.labels.store import LabelStore
from tests.labels.helpers import DOCS, make_results

pytestmark = pytest.mark.unit


@pytest.fixture
def pooled(tmp_path):
    make_results(tmp_path / "results")
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in DOCS.items()),
                                          encoding="utf-8")
    results = str(tmp_path / "results")
    assert main(["labels", "pool", results, "--runs", "r1,r2", "--k", "2", "--corpus", str(dataset)]) == 0
    store = LabelStore(results)
    pool = store.latest_pool()
    assert pool is not None
    return results, store, pool


def _grade_all(store, pool, annotator: str, grade_of, source: str = "human") -> None:
    rows = []
    for question in pool.questions:
        for number, chunk in enumerate(question.chunks):
            rows.append({"annotator": annotator, "source": source, "pool_id": pool.pool_id,
                         "question_id": question.question_id, "document": question.document, "item_kind": "chunk",
                         "item_id": chunk.item_id, "doc_id": chunk.doc_id, "start_char": chunk.start_char,
                         "end_char": chunk.end_char, **grade_of(question, number)})
    store.add(rows)


def test_a_constant_judge_is_named_and_its_metrics_are_not_a_ranking(pooled, capsys):
    results, store, pool = pooled
    _grade_all(store, pool, "ann", lambda q, n: {"relevance": 2 if n == 0 else 0})
    _grade_all(store, pool, "judge:scripted:x", lambda q, n: {"relevance": 3}, source="judge")
    capsys.readouterr()
    assert main(["labels", "agreement", results, "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert "the judge gave 3 to every chunk: agreement cannot be measured; kappa is 0 by construction" in out
    row = next(line for line in out.splitlines() if line.startswith("| relevance judge"))
    assert "cannot be measured" in row and "0.000" in row
    assert "3:" in row and f"3:{pool.chunk_count()}" in row.replace(" ", "")  # the judge's grades beside it
    assert main(["labels", "metrics", results, "--grades", "judge"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Not a ranking: the judge gave 3 to every chunk it graded")
    rows = [line for line in out.splitlines() if line.startswith(("| r1 ", "| r2 "))]
    assert len(rows) == 2 and all("not a ranking" in line for line in rows)
    # The people's grades vary: their metrics are a ranking, with no flag
    assert main(["labels", "metrics", results, "--grades", "human"]) == 0
    out = capsys.readouterr().out
    assert "Not a ranking" not in out and "not a ranking" not in out


def test_people_using_one_grade_only_are_named_too_and_the_json_report_says_unreadable(pooled, capsys):
    from ragkit.analysis.report import render_report

    results, store, pool = pooled
    _grade_all(store, pool, "ann", lambda q, n: {"relevance": 2})
    _grade_all(store, pool, "judge:scripted:x", lambda q, n: {"relevance": n % 4}, source="judge")
    payload = json.loads(render_report(results, "json"))
    (row,) = payload["labels"]["agreement"]
    assert row["readable"] is False and row["kappa"] == pytest.approx(0.0)
    assert row["human_grades"] == {"not": 0, "partly": 0, "relevant": pool.chunk_count()}
    assert sum(row["judge_grades"].values()) == pool.chunk_count() and len(row["judge_grades"]) == 4
    assert any("the people gave 'relevant' to every chunk: agreement cannot be measured; kappa is 0 by construction"
               in note for note in row["notes"])
    assert "the people gave 'relevant' to every chunk" in render_report(results, "md")


def test_intervals_from_fewer_documents_than_the_minimum_carry_a_warning(pooled, capsys):
    results, store, pool = pooled
    _grade_all(store, pool, "ann", lambda q, n: {"relevance": n % 3})
    _grade_all(store, pool, "judge:scripted:x", lambda q, n: {"relevance": (n + 1) % 4}, source="judge")
    capsys.readouterr()
    assert main(["labels", "agreement", results, "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    documents = len({q.document for q in pool.questions})
    assert documents < MIN_CLUSTERS
    assert f"CIs from {documents} document(s), fewer than {MIN_CLUSTERS}" in out
    assert f"CIs rough ({documents} < {MIN_CLUSTERS} documents)" in out


def test_the_relevance_judges_invalid_replies_are_counted_and_a_run_left_short_is_flagged(pooled, capsys):
    results, store, pool = pooled
    _grade_all(store, pool, "ann", lambda q, n: {"relevance": n % 3})
    # The judge's reply on a chunk of q2 that one run found is invalid: that chunk has no judge
    # grade, so q2 drops out of that run's pool_precision, and not out of the other's.
    bad = next(chunk for chunk in pool.questions[1].chunks if len(chunk.runs) == 1)
    _grade_all(store, pool, "judge:scripted:x",
               lambda q, n: ({"valid": False, "error": "no JSON object", "raw_reply": "hm"}
                             if q.chunks[n].item_id == bad.item_id else {"relevance": (n + 1) % 4}), source="judge")
    capsys.readouterr()
    assert main(["labels", "agreement", results, "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| relevance judge"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    header = [cell.strip() for cell in out.split("## Judges against people", 1)[1].strip().splitlines()[0]
              .strip("|").split("|")]
    assert cells[header.index("invalid left out")] == "1"
    assert cells[header.index("items / documents")].startswith(f"{pool.chunk_count() - 1} /")
    assert "1 invalid judge reply on labelled chunks left out" in out
    assert main(["labels", "metrics", results, "--grades", "judge"]) == 0
    out = capsys.readouterr().out
    table = [[cell.strip() for cell in line.strip("|").split("|")] for line in out.splitlines()
             if line.startswith("|")]
    header, rows = table[0], {row[0]: row for row in table[2:]}
    short = set(bad.runs)
    for run, row in rows.items():
        assert row[header.index("invalid replies")] == ("1" if run in short else "0")
        if run in short:
            assert row[header.index("questions")] == "1 of 2"
            assert row[header.index("flag")] == "fewer questions (1 vs 2)"
        else:
            assert row[header.index("questions")] == "2 of 2" and row[header.index("flag")] == ""


def test_answer_metrics_count_the_labelled_answers_whose_judge_failed(tmp_path):
    from ragkit.labels.judge_vs_human import answer_agreements
    from ragkit.labels.store import conform

    base = {"pool_id": "p", "item_kind": "answer", "source": "human", "annotator": "ann"}
    labels = conform(pd.DataFrame([
        {**base, "question_id": f"q{i}", "document": f"d{i}", "item_id": f"a{i}", "run_id": "r1",
         "grounded": i % 2 == 0} for i in range(4)]))
    scores = pd.DataFrame({"run_id": ["r1"] * 4, "question_id": [f"q{i}" for i in range(4)],
                           "metric": ["faithfulness"] * 4, "value": [0.9, 0.2, None, 0.1],
                           "error": [None, None, "judge reply unreadable", None]})
    (found,) = answer_agreements(labels, scores, resamples=100)
    assert found.n_items == 3 and found.left_out == 1
    assert found.human_counts == {"not grounded": 2, "grounded": 1}
    assert found.judge_counts == {"not grounded": 2, "grounded": 1}


def test_the_degeneracy_is_said_on_the_judges_own_scale_and_both_sides_constant_is_undefined():
    from ragkit.labels.agreement import Agreement

    def agreement(human, judge, scale=None):
        return Agreement("d", 5, 12, 1, 0.6, 0.0, (0.0, 0.0), 0.0, (0.0, 0.0), 0.0, 0.0, item="chunk",
                         human_counts=human, judge_counts=judge, judge_scale=scale or {})

    varied, only_not = {"not": 3, "partly": 0, "relevant": 2}, {"not": 5, "partly": 0, "relevant": 0}
    assert agreement(varied, only_not, {"0": 2, "1": 3, "2": 0, "3": 0}).degeneracy() == (
        "the judge gave grades 0 and 1 (all 'not') to every chunk: agreement cannot be measured; kappa is 0 by "
        "construction")
    assert agreement(only_not, only_not).degeneracy() == (
        "the judge gave 'not' and the people gave 'not' to every chunk: agreement cannot be measured; kappa is "
        "undefined")
    readable = agreement(varied, {"not": 2, "partly": 1, "relevant": 2})
    readable.kappa = 0.4
    assert readable.readable and readable.degeneracy() is None and readable.notes() == []  # 12 documents

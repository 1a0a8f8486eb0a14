"""The pipeline's rerank and Retrieval Judge keep/drop decisions against people's chunk grades, on a
hand-built results folder whose agreement numbers are computed by hand and by scikit-learn."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ragkit.cli import main
from tests.labels.helpers import make_results

# People's grades per (question, span): 2 relevant, 1 partly (counts as relevant), 0 not.
GRADES = {("q1", "d1", 0, 29): 2, ("q1", "d1", 0, 15): 1, ("q2", "d2", 30, 62): 2, ("q2", "d2", 63, 88): 1}


def judgement(run, question, judge, decision, valid=True):
    return {"run_id": run, "question_id": question, "judge": judge, "decision": json.dumps(decision),
            "valid": valid, "input_summary": "", "fell_back": not valid}


# Chunk ids are helpers.retrieval_rows' "<run>-<question>-<rank>"; "ghost" is in no run's retrievals.
JUDGEMENTS = pd.DataFrame([
    # r1 rerank q1: a bm25 prefilter (no LLM: not an item), then two LLM batches; kept the first two.
    judgement("r1", "q1", "rerank", {"method": "bm25", "stage": "prefilter", "scores": {}, "kept": ["r1-q1-4"]}),
    judgement("r1", "q1", "rerank", {"method": "llm", "shown": ["r1-q1-1", "r1-q1-2"], "scores": {}}),
    judgement("r1", "q1", "rerank", {"method": "llm", "shown": ["r2-q1-3", "ghost"], "scores": {},
                                     "kept": ["r1-q1-1", "r1-q1-2"]}),
    # r1 rerank q2: its batch fell back (invalid reply): left out and counted.
    judgement("r1", "q2", "rerank", {"method": "llm", "shown": ["r1-q2-1"], "action": "fell back"}, valid=False),
    # r3 rerank q2: kept 1 and 3 of three.
    judgement("r3", "q2", "rerank", {"method": "llm", "shown": ["r3-q2-1", "r3-q2-2", "r3-q2-3"], "scores": {},
                                     "kept": ["r3-q2-1", "r3-q2-3"]}),
    # r2 retrieval q1: round 1 found both relevant, round 2 (the last to show r2-q1-1) drops it.
    judgement("r2", "q1", "retrieval", {"iteration": 1, "shown": ["r2-q1-1", "r2-q1-2"],
                                        "relevant": ["r2-q1-1", "r2-q1-2"], "action": "retrieve more"}),
    judgement("r2", "q1", "retrieval", {"iteration": 2, "shown": ["r2-q1-1", "r3-q1-1"], "relevant": ["r3-q1-1"],
                                        "action": "final"}),
    judgement("r2", "q2", "retrieval", {"iteration": 1, "shown": ["r2-q2-1"], "action": "fell back"}, valid=False),
    judgement("r3", "q2", "retrieval", {"iteration": 1, "shown": ["r3-q2-1", "r2-q2-1", "r1-q2-2"],
                                        "relevant": ["r3-q2-1"], "action": "final"}),
])
# (human relevant, judge kept) per judged chunk, by hand from helpers.RANKED and GRADES:
# rerank: r1-q1-1 d1 0-29 (1,1), r1-q1-2 d1 30-50 (0,1), r2-q1-3 d2 30-62 (0,0), r3-q2-1 d2 30-62 (1,1),
#         r3-q2-2 d1 30-50 (0,0), r3-q2-3 d2 0-15 (0,1); ghost unlocated.
# retrieval: r2-q1-1 d1 30-50 (0,0), r2-q1-2 d1 0-29 (1,1), r3-q1-1 d1 0-15 partly (1,1),
#            r3-q2-1 d2 30-62 (1,1), r2-q2-1 d2 63-88 partly (1,0), r1-q2-2 d2 0-29 (0,0).
RERANK = ([1, 0, 0, 1, 0, 0], [1, 1, 0, 1, 0, 1])
RETRIEVAL = ([0, 1, 1, 1, 1, 0], [0, 1, 1, 1, 0, 0])


@pytest.fixture
def results(tmp_path):
    from ragkit.labels.store import LabelStore

    folder = tmp_path / "results"
    make_results(folder, judgements=JUDGEMENTS)
    assert main(["labels", "pool", str(folder), "--k", "4"]) == 0
    pool = LabelStore(folder).latest_pool()
    assert pool is not None
    LabelStore(folder).add([{"annotator": "ann", "pool_id": pool.pool_id, "question_id": q.question_id,
                             "document": q.document, "item_kind": "chunk", "item_id": c.item_id,
                             "relevance": GRADES.get((q.question_id, c.doc_id, c.start_char, c.end_char), 0)}
                            for q in pool.questions for c in q.chunks])
    return folder


@pytest.mark.unit
def test_rerank_and_retrieval_judges_against_people_by_hand_and_by_scikit_learn(results):
    from sklearn.metrics import cohen_kappa_score, confusion_matrix

    from ragkit.labels.tables import label_tables

    found = {a.decision.split(" ")[0]: a for a in label_tables(results, resamples=200).agreements}
    rerank, retrieval = found["judge:rerank"], found["judge:retrieval"]
    # rerank: p_o 4/6; p_e = 2/6 * 4/6 + 4/6 * 2/6 = 4/9; kappa = (2/3 - 4/9) / (5/9) = 0.4; bias 4/6 - 2/6
    assert (rerank.n_items, rerank.n_units, rerank.left_out, rerank.unlocated) == (6, 2, 1, 1)
    assert rerank.accuracy == pytest.approx(4 / 6) and rerank.kappa == pytest.approx(0.4)
    assert rerank.bias == pytest.approx(1 / 3)
    assert rerank.confusion.to_numpy().tolist() == [[2, 2], [0, 2]]
    # retrieval: p_o 5/6; p_e = 4/6 * 3/6 + 2/6 * 3/6 = 1/2; kappa = (5/6 - 1/2) / (1/2) = 2/3; bias 3/6 - 4/6
    assert (retrieval.n_items, retrieval.left_out, retrieval.unlocated) == (6, 1, 0)
    assert retrieval.accuracy == pytest.approx(5 / 6) and retrieval.kappa == pytest.approx(2 / 3)
    assert retrieval.bias == pytest.approx(-1 / 6)
    for agreement, (human, judge) in ((rerank, RERANK), (retrieval, RETRIEVAL)):
        assert agreement.kappa == pytest.approx(cohen_kappa_score(human, judge))
        assert agreement.confusion.to_numpy().tolist() == confusion_matrix(human, judge, labels=[0, 1]).tolist()
        assert agreement.kappa_ci[0] <= agreement.kappa_ci[1] or np.isnan(agreement.kappa_ci[0])


@pytest.mark.unit
def test_chunk_judges_show_in_the_cli_and_the_report(results, capsys):
    from ragkit.analysis.report import render_report

    assert main(["labels", "agreement", str(results), "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert "judge:rerank" in out and "judge:retrieval" in out and "invalid left out" in out
    payload = json.loads(render_report(results, "json"))
    rows = {row["decision"].split(" ")[0]: row for row in payload["labels"]["agreement"]}
    assert rows["judge:rerank"]["invalid_left_out"] == 1 and rows["judge:rerank"]["items"] == 6
    assert "## Confusion: judge:retrieval" in render_report(results, "md")


@pytest.mark.unit
def test_a_folder_without_chunk_judge_decisions_has_no_such_rows(tmp_path):
    from ragkit.labels.judge_decisions import chunk_judge_agreements
    from ragkit.labels.store import conform

    labels = conform(pd.DataFrame([{"pool_id": "p", "question_id": "q1", "document": "d1", "item_kind": "chunk",
                                    "item_id": "x", "annotator": "ann", "source": "human", "relevance": 2,
                                    "valid": True}]))
    other = pd.DataFrame([judgement("r1", "q1", "router", {"route": "a"})])
    spans = pd.DataFrame({"chunk_id": ["c"], "doc_id": ["d1"], "start_char": [0], "end_char": [5]})
    assert chunk_judge_agreements(labels, other, spans) == []

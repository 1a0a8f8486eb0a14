"""ragkit.analysis.failure_classes: one hand-built trace per class, the judge named, relevance
learnt from another run's recall, and a run's classes summing to its questions."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ragkit.analysis import failure_classes as fc
from ragkit.analysis.loading import Results
from tests.analysis.helpers import run_row, score_rows

pytestmark = pytest.mark.unit


def _curve(run: str, question: str, first: int | None, family: str = "recall", depth: int = 10) -> list[tuple]:
    """recall@1..depth rows: 0 before rank ``first``, 1 from it on (None: never)."""
    return [(run, question, f"{family}@{k}", float(first is not None and k >= first)) for k in range(1, depth + 1)]


def _judgement(run: str, question: str, judge: str, decision: dict, valid: bool = True, error: str | None = None):
    return {"run_id": run, "question_id": question, "judge": judge, "decision": json.dumps(decision),
            "valid": valid, "error": error}


def _traces() -> Results:
    rows = [
        *_curve("r", "ok", 3), *_curve("r", "low", 7), *_curve("r", "none", None), *_curve("r", "drop", None),
        *_curve("r", "invalid", None), *_curve("r", "span", 2, "span_recall"), *_curve("r", "span", 9),
        *[("r", "err", f"recall@{k}", np.nan, "RuntimeError: index gone") for k in range(1, 11)],
        ("r", "truth", "retrieval", np.nan, fc.NOTHING_TO_SCORE),
        # A generating run: one answer cites the relevant chunk, the other a chunk of another document.
        *_curve("g", "ok", 1), *_curve("g", "unused", 2),
    ]
    judgements = pd.DataFrame([
        _judgement("r", "drop", "rerank", {"method": "heuristic", "scores": {"dX:0": 0.1, "dY:2": 0.9},
                                           "kept": ["dY:2"]}),
        _judgement("r", "invalid", "retrieval", {"shown": ["dI:0"], "action": "fell back"}, valid=False,
                   error="reply is not JSON"),
        _judgement("r", "ok", "retrieval", {"shown": ["dA:0"], "action": "fell back"}, valid=False),
    ])
    answers = pd.DataFrame([
        {"run_id": "g", "question_id": "ok", "answer": "yes [1]", "citations": json.dumps(["dok:3"]), "valid": True},
        {"run_id": "g", "question_id": "unused", "answer": "no [2]", "citations": json.dumps(["dZ:1"]),
         "valid": True},
    ])
    questions = pd.DataFrame({"question_id": ["ok", "low", "none", "drop", "invalid", "span", "err", "truth",
                                              "unused"],
                              "document": ["dok", "dlow", "dnone", "dX", "dI", "dspan", "derr", "truth", "dU"],
                              "n_relevant_docs": [1, 1, 1, 1, 1, 1, 1, 0, 1], "n_answer_groups": 0})
    runs = pd.DataFrame([run_row("r", top_k=10, depth=10, generator=False),
                         run_row("g", top_k=10, depth=10, generator=True)])
    runs["label"] = runs["run_id"]
    empty_retrievals = pd.DataFrame({c: pd.Series(dtype="object") for c in ("run_id", "question_id", "rank",
                                                                            "doc_id")})
    return Results(runs, score_rows(rows), judgements=judgements, answers=answers, questions=questions,
                   retrievals=empty_retrievals)


def test_one_trace_per_class():
    table = fc.failure_classes(_traces(), cut=5).set_index(["run_id", "question_id"])
    expected = {
        ("r", "ok"): fc.ANSWERED,  # evidence at rank 3 <= 5; the invalid reply did not cost it anything
        ("r", "low"): fc.RANKED_LOW,  # evidence at rank 7 only
        ("r", "none"): fc.NOT_RETRIEVED,
        ("r", "drop"): fc.DROPPED,  # the reranker scored dX:0 (the relevant document) and did not keep it
        ("r", "invalid"): fc.INVALID,
        ("r", "span"): fc.ANSWERED,  # span level decides: the span at rank 2, its document at 9
        ("r", "err"): fc.ERROR,
        ("r", "truth"): fc.NO_TRUTH,
        ("g", "ok"): fc.ANSWERED,  # cites a chunk of its relevant document
        ("g", "unused"): fc.NOT_USED,  # evidence at rank 2, but the answer cites another document
    }
    assert table["failure_class"].to_dict() == expected
    assert table.loc[("r", "drop"), "judge"] == "rerank" and "dX:0" in table.loc[("r", "drop"), "detail"]
    assert table.loc[("r", "invalid"), "judge"] == "retrieval"
    assert table.loc[("r", "span"), "level"] == "span" and table.loc[("r", "ok"), "level"] == "document"
    assert table.loc[("r", "err"), "detail"] == "RuntimeError"
    assert set(expected.values()) == set(fc.CLASSES)  # every class has its trace


def test_the_cut_moves_ranked_too_low_into_answered_well():
    table = fc.failure_classes(_traces(), cut=8).set_index(["run_id", "question_id"])
    assert table.loc[("r", "low"), "failure_class"] == fc.ANSWERED and table.loc[("r", "low"), "cut"] == 8
    # The span was at rank 2 and the document at rank 9: a cut of 1 leaves it ranked too low.
    assert fc.failure_classes(_traces(), cut=1).set_index(["run_id", "question_id"]).loc[
        ("r", "span"), "failure_class"] == fc.RANKED_LOW


def test_each_runs_classes_sum_to_its_questions():
    results = _traces()
    counts = fc.class_counts(fc.failure_classes(results)).set_index("run_id")
    asked = results.scores.groupby("run_id")["question_id"].nunique()
    assert counts.sum(axis=1).to_dict() == asked.to_dict() == {"g": 2, "r": 8}


def test_a_relevant_document_learnt_from_another_runs_recall_names_the_dropping_judge():
    # Run "off" ranks dB (not the source document) at 2 and its recall rises there; run "on" had
    # dB:5 dropped by its reranker. Without run "off" that drop could not be recognised.
    rows = [*_curve("off", "q", 2), *_curve("on", "q", None)]
    retrievals = pd.DataFrame({"run_id": "off", "question_id": "q", "rank": [1, 2], "doc_id": ["dC", "dB"]})
    judgements = pd.DataFrame([_judgement("on", "q", "rerank", {"scores": {"dB:5": 0.2, "dC:1": 0.7},
                                                                 "kept": ["dC:1"]})])
    questions = pd.DataFrame({"question_id": ["q"], "document": ["dA"], "n_relevant_docs": [2],
                              "n_answer_groups": [0]})
    runs = pd.DataFrame([run_row("off", top_k=10, depth=10), run_row("on", top_k=10, depth=10)]).assign(label="x")
    answers = pd.DataFrame({c: pd.Series(dtype="object") for c in ("run_id", "question_id", "citations")})
    results = Results(runs, score_rows(rows), retrievals=retrievals, judgements=judgements, questions=questions,
                      answers=answers)
    table = fc.failure_classes(results).set_index("run_id")
    assert table.loc["on", "failure_class"] == fc.DROPPED and table.loc["on", "judge"] == "rerank"
    without = Results(runs, score_rows(rows), retrievals=retrievals.iloc[:0], judgements=judgements,
                      questions=questions, answers=answers)
    assert fc.failure_classes(without).set_index("run_id").loc["on", "failure_class"] == fc.NOT_RETRIEVED


def test_cli_failures_counts_each_runs_classes(tmp_path, capsys):
    from ragkit.cli import main
    from ragkit.results import ResultStore

    results = _traces()
    store = ResultStore(tmp_path)
    store.write_questions("q1", results.questions)
    for run_id in ("r", "g"):
        store.write_run(run_id, results.runs[results.runs["run_id"] == run_id].drop(columns="label").iloc[0].to_dict())
        mine = {name: frame[frame["run_id"] == run_id] for name, frame in
                (("scores", results.scores), ("judgements", results.judgements), ("answers", results.answers))}
        store.commit_shard(run_id, sorted(mine["scores"]["question_id"].unique()), mine)
    assert main(["failures", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ranked too low" in out and "dropped by judge" in out
    assert main(["failures", str(tmp_path), "--run", "r", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {row["question_id"]: row["failure_class"] for row in rows}["drop"] == fc.DROPPED
    assert main(["failures", str(tmp_path), "--run", "nope"]) == 2
    assert "unknown run id(s): nope" in capsys.readouterr().err


def test_claim_level_diagnostics_stand_beside_the_classes_where_scored():
    base = _traces()
    assert "context_utilization" not in fc.failure_classes(base).columns  # no run scored them
    extra = score_rows([("g", "ok", "context_utilization", 0.5), ("g", "ok", "noise_sensitivity", 0.25),
                        ("g", "unused", "context_utilization", np.nan, "unparseable judge reply for claim 'x'"),
                        ("g", "unused", "noise_sensitivity", 1 / 3)])
    results = Results(base.runs, pd.concat([base.scores, extra], ignore_index=True), judgements=base.judgements,
                      answers=base.answers, questions=base.questions, retrievals=base.retrievals)
    table = fc.failure_classes(results).set_index(["run_id", "question_id"])
    assert table.loc[("g", "ok"), ["context_utilization", "noise_sensitivity"]].tolist() == [0.5, 0.25]
    assert np.isnan(table.loc[("g", "unused"), "context_utilization"])  # failed: NaN, never 0
    assert table.loc[("g", "unused"), "noise_sensitivity"] == pytest.approx(1 / 3)
    assert table.loc[("r", "ok"), ["context_utilization", "noise_sensitivity"]].isna().all()  # not scored there
    assert table["failure_class"].to_dict() == fc.failure_classes(base).set_index(
        ["run_id", "question_id"])["failure_class"].to_dict()  # the classes themselves are unchanged

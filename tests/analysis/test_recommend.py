"""ragkit.analysis.recommend (`ragkit best`): the best run under constraints, the runs not
significantly worse (checked by hand with scipy's paired t-test and a hand Holm), the Pareto
front over three columns, the factor that mattered most, and the one-line metric error."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ragkit.analysis.latency import pareto_front
from ragkit.analysis.recommend import BestParams, recommend, to_json, to_text
from ragkit.cli import main
from ragkit.errors import ConfigError
from ragkit.results import ResultStore
from tests.analysis.helpers import results_of, run_row, score_rows

pytestmark = pytest.mark.unit

N = 30
# run -> (chunker, retriever, mean ndcg@10, seconds per question)
GRID = {"A": ("token", "bm25", 0.80, 0.05), "B": ("token", "dense", 0.78, 0.05),
        "C": ("sentence", "bm25", 0.30, 0.05), "D": ("sentence", "dense", 0.32, 0.05)}


def _grid(latency: dict[str, float] | None = None):
    rng = np.random.default_rng(7)
    shared = rng.normal(0, 0.1, N)  # question difficulty, common to every run: pairs are paired
    rows, stages = [], []
    for run, (_, _, mean, seconds) in GRID.items():
        values = np.clip(mean + shared + rng.normal(0, 0.08, N), 0, 1)
        for i, value in enumerate(values):
            failed = run == "C" and i == 0
            rows.append((run, f"q{i:02d}", "ndcg@10", np.nan, "RuntimeError: boom") if failed
                        else (run, f"q{i:02d}", "ndcg@10", float(value)))
            rows.append((run, f"q{i:02d}", "final_tokens", 100.0))
            stages.append({"run_id": run, "question_id": f"q{i:02d}", "stage": "retrieve",
                           "seconds": (latency or {}).get(run, seconds), "cached": False})
    runs = [run_row(run, chunker=chunker, retriever=retriever) for run, (chunker, retriever, _, _) in GRID.items()]
    return results_of(runs, score_rows(rows), stages=pd.DataFrame(stages).astype({"question_id": "string"}))


def _values(results, run: str) -> np.ndarray:
    scores = results.scores[(results.scores["run_id"] == run) & (results.scores["metric"] == "ndcg@10")]
    return scores.sort_values("question_id")["value"].to_numpy(dtype="float64")


def test_best_and_its_not_worse_set_are_what_the_pairs_imply_by_hand():
    results = _grid()
    rec = recommend(results, BestParams(metric="ndcg@10"))
    # Means with the failure as 0, by hand: the best is the highest.
    means = {run: np.nan_to_num(_values(results, run)).mean() for run in GRID}
    assert rec.best == max(means, key=means.get) == "A"
    # Hand check: per runner-up, a paired t over the questions both scored and one over every
    # question with a failure as 0 (the same test, counted once, where neither run failed); Holm
    # over those tests.
    tests = {}
    for run in ("B", "C", "D"):
        diff = _values(results, run) - _values(results, "A")
        strict = np.nan_to_num(_values(results, run)) - np.nan_to_num(_values(results, "A"))
        tests[(run, "diff")] = (stats.ttest_1samp(diff[~np.isnan(diff)], 0).pvalue, np.nanmean(diff))
        if np.isnan(diff).any():
            tests[(run, "strict")] = (stats.ttest_1samp(strict, 0).pvalue, strict.mean())
    order = sorted(tests, key=lambda key: tests[key][0])
    adjusted, running = {}, 0.0
    for position, key in enumerate(order):
        running = max(running, min(1.0, (len(order) - position) * tests[key][0]))
        adjusted[key] = running
    for run in ("B", "C", "D"):
        adjusted.setdefault((run, "strict"), adjusted[(run, "diff")])
        tests.setdefault((run, "strict"), tests[(run, "diff")])
    expected = [run for run in ("B", "C", "D")
                if not any(adjusted[(run, kind)] < 0.05 and tests[(run, kind)][1] < 0 for kind in ("diff", "strict"))]
    assert rec.not_worse == expected == ["B"]
    rows = rec.comparisons.set_index("run_b")
    for run in ("B", "C", "D"):
        assert rows.loc[run, "run_a"] == "A"
        # The family's tests enter with their sign-flip p (one unit per question here, far more than
        # families.SIGN_FLIP_UNITS), another test of the same mean, close to the t test's on this
        # many units; Holm over the t tests is then within a few percent of the joint test.
        assert rows.loc[run, "p_adj"] == pytest.approx(adjusted[(run, "diff")], rel=0.1)
        assert rows.loc[run, "strict_p_adj"] == pytest.approx(adjusted[(run, "strict")], rel=0.1)
    tested = len(order)
    assert tested < 6 and f"joint test over the {tested} tests" in rec.family
    # The chunker moves ndcg@10 by about 0.5, the retriever by about 0.02.
    assert rec.factor is not None and rec.factor["factor"] == "chunker" and rec.factor["range"] > 0.3
    # Each level against the factor's reference (no baseline named: the first in name order).
    assert rec.factor["comparison_level"] == "sentence" and list(rec.factor["levels"]) == ["token"]
    assert rec.factor["levels"]["token"] == pytest.approx(rec.factor["range"]) and rec.factor["levels"]["token"] > 0
    text = to_text(rec)
    assert f"token - sentence = +{rec.factor['levels']['token']:.3f}" in text
    assert "not significantly worse" in text and f"joint test over the {tested} tests" in text
    payload = json.loads(to_json(rec))
    assert payload["best"] == "A" and payload["not_significantly_worse"] == ["B"]
    assert payload["factor_that_mattered_most"]["factor"] == "chunker"


def test_a_runner_up_that_crashes_often_is_worse_through_its_strict_difference():
    rng = np.random.default_rng(3)
    values = rng.uniform(0.3, 0.9, N)
    rows = []
    for i, value in enumerate(values):
        rows.append(("A", f"q{i:02d}", "ndcg@10", float(value)))
        # B scores what A scores wherever it answers, but crashes on half the questions.
        rows.append(("B", f"q{i:02d}", "ndcg@10", np.nan, "RuntimeError: boom") if i % 2
                    else ("B", f"q{i:02d}", "ndcg@10", float(value)))
    results = results_of([run_row("A", chunker="token"), run_row("B", chunker="sentence")], score_rows(rows))
    rec = recommend(results, BestParams(metric="ndcg@10"))
    row = rec.comparisons.iloc[0]
    assert rec.best == "A" and row["diff"] == 0  # over the questions both scored, B is A
    assert row["strict_p_adj"] < 0.05 and rec.not_worse == []


def test_constraints_exclude_runs_and_name_why():
    results = _grid(latency={"A": 0.1})  # A: 100 ms per question
    rec = recommend(results, BestParams(metric="ndcg@10", max_latency_ms=80))
    assert rec.best == "B"
    table = rec.runs.set_index("run_id")
    assert not table.loc["A", "eligible"] and "latency 100.0 ms" in table.loc["A", "excluded_by"]
    assert rec.comparisons["run_b"].tolist() == ["D", "C"] or set(rec.comparisons["run_b"]) == {"C", "D"}
    # Unconstrained, A is the best again; no run is under 10 ms.
    assert recommend(results, BestParams(metric="ndcg@10")).best == "A"
    assert recommend(results, BestParams(metric="ndcg@10", max_latency_ms=10)).best is None
    # Cost: no run records LLM tokens, so each costs 0 tokens and a zero budget keeps them all.
    assert recommend(results, BestParams(metric="ndcg@10", max_cost=0)).runs["eligible"].sum() == 4


def test_an_unknown_or_descriptive_metric_is_a_one_line_error_listing_the_valid_ones():
    results = _grid()
    with pytest.raises(ConfigError) as error:
        recommend(results, BestParams(metric="ndcg@11"))
    message = str(error.value)
    assert "\n" not in message and "'ndcg@11' is not scored" in message and "Valid metrics: ndcg@10" in message
    with pytest.raises(ConfigError, match="only describes the context"):
        recommend(results, BestParams(metric="final_tokens"))


def test_a_three_column_pareto_front_by_hand():
    frame = pd.DataFrame({"quality": [0.9, 0.8, 0.8, 0.7, 0.9], "latency_ms": [100, 50, 50, 50, 100],
                          "cost": [10, 10, 5, 5, 20]})
    # Row 1 is beaten by row 2 (same quality and latency, cheaper); row 3 by row 2 (better
    # quality, same costs); row 4 by row 0 (same quality and latency, cheaper).
    assert pareto_front(frame, "quality", ["latency_ms", "cost"]).tolist() == [True, False, True, False, False]


def test_cli_best_on_a_folder_and_its_metric_error(tmp_path, capsys):
    results = _grid()
    store = ResultStore(tmp_path)
    store.write_questions("q1", pd.DataFrame({"question_id": [f"q{i:02d}" for i in range(N)],
                                              "text": "?", "document": [f"d{i}" for i in range(N)]}))
    for run in GRID:
        store.write_run(run, results.runs[results.runs["run_id"] == run].drop(columns="label").iloc[0].to_dict())
        mine = results.scores[results.scores["run_id"] == run]
        store.commit_shard(run, sorted(mine["question_id"].unique()),
                           {"scores": mine, "stages": results.stages[results.stages["run_id"] == run]})
    assert main(["best", str(tmp_path), "--metric", "ndcg@10", "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["best"] == "A" and payload["not_significantly_worse"] == ["B"]
    assert main(["best", str(tmp_path), "--metric", "recall@99"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: metric 'recall@99' is not scored") and "\n" not in err

"""The Compare page's views from shared score matrices give exactly what the row-based functions
(``ragkit report``, export) give: random tables with failures, errors, unasked questions, a run
asked nothing, read from a results folder (Arrow chunks read per metric, from the parts or their
merged copy) and given in memory."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ragkit.analysis import matrices, views
from ragkit.analysis.latency import pipeline_stages, quality_vs_latency
from ragkit.analysis.loading import load_results
from ragkit.analysis.matrices import ScoreMatrices, for_results
from ragkit.analysis.means import curve, metric_means, metric_table
from ragkit.results import ResultStore
from tests.analysis.helpers import results_of, run_row, score_rows

pytestmark = pytest.mark.unit

METRICS = ["recall@1", "recall@3", "recall@5", "mrr", "faithfulness"]


def _random_rows(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for run in range(6):
        for question in range(30):
            for metric in METRICS:
                if rng.uniform() < 0.15 or (run == 5 and metric == "faithfulness"):
                    continue  # not asked (run r5 is never asked faithfulness)
                value = float(rng.uniform()) if rng.uniform() > 0.1 else np.nan
                error = "timeout: 30 s" if rng.uniform() < 0.05 else None
                rows.append((f"r{run}", f"q{question:02d}", metric, value, error))
    return score_rows(rows)


def _stages(scores: pd.DataFrame) -> pd.DataFrame:
    asked = scores[["run_id", "question_id"]].drop_duplicates()
    rng = np.random.default_rng(0)
    frame = pd.concat([asked.assign(stage="retrieve", seconds=rng.uniform(0.01, 0.2, len(asked))),
                       asked.assign(stage="eval:faithfulness", seconds=1.0)], ignore_index=True)
    return frame.assign(cached=False)


def _in_a_folder(tmp_path, scores: pd.DataFrame, stages: pd.DataFrame, documents: dict[str, str]):
    store = ResultStore(tmp_path)
    # The question set lists all but the last two questions: rows of a question it does not list
    # are counted all the same (the matrices grow a row for each).
    listed = sorted(documents)[:-2]
    store.write_questions("q1", pd.DataFrame({"question_id": listed, "text": listed,
                                              "document": [documents[q] for q in listed]}))
    for run_id in sorted(scores["run_id"].unique()):
        store.write_run(run_id, run_row(run_id, chunker=f"c{run_id[-1]}", top_k=5))
        mine = scores[scores["run_id"] == run_id]
        store.commit_shard(run_id, sorted(mine["question_id"].unique()),
                           {"scores": mine, "stages": stages[stages["run_id"] == run_id]})
    return load_results(tmp_path)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("source", ["folder", "merged folder", "memory", "folder, batches of 7 rows"])
def test_views_from_matrices_equal_the_row_based_functions(tmp_path, monkeypatch, seed, source):
    if source.endswith("batches of 7 rows"):  # rows reduced in many batches, a batch across two runs' parts
        monkeypatch.setattr(matrices, "BATCH_ROWS", 7)
        source = "folder"
    scores, documents = _random_rows(seed), {f"q{i:02d}": f"d{i % 4}" for i in range(30)}
    stages = _stages(scores)
    if source == "folder":  # one part per run, read as Arrow chunks with their own dictionaries
        results = _in_a_folder(tmp_path, scores, stages, documents)
    elif source == "merged folder":  # read from the merged copy: row groups of one metric each
        _in_a_folder(tmp_path, scores, stages, documents)
        assert ResultStore(tmp_path).merge()["scores"] == 6
        results = load_results(tmp_path)
    else:
        runs = [run_row(f"r{i}", chunker=f"c{i}") for i in range(6)]
        results = results_of(runs, scores, documents, stages=stages)
    units = results.units
    views.read_metrics(results, tuple(METRICS[2:]), "recall")  # as the page: one read, then every view
    if source != "memory":  # built from the Arrow chunks as read, not from a pandas copy of the table
        assert "scores" not in results.__dict__ and results._batches

    # The curve first: recall@1 and @3 were read for their run means alone, no arrays.
    shared = for_results(results)
    assert {"recall@1", "recall@3"} <= set(shared._valid_means) and "recall@1" not in shared._cache
    pd.testing.assert_frame_equal(views.curve_points(results, "recall").astype({"run_id": "string"}),
                                  curve(scores, "recall").astype({"run_id": "string"}), rtol=1e-12)

    expected = metric_means(scores, METRICS, units)
    got = views.means(results, tuple(METRICS))
    pd.testing.assert_frame_equal(got.astype({"run_id": "string"}), expected.astype({"run_id": "string"}),
                                  check_exact=False, rtol=1e-12)
    assert "r5" not in set(got[got["metric"] == "faithfulness"]["run_id"])  # never asked: no row, not a 0

    pd.testing.assert_frame_equal(views.curve_points(results, "recall").astype({"run_id": "string"}),
                                  curve(scores, "recall").astype({"run_id": "string"}), rtol=1e-12)
    table = views.runs_by_metrics(results, tuple(METRICS))
    pd.testing.assert_frame_equal(table, metric_table(scores, results.runs, METRICS), rtol=1e-12)
    front = views.quality_latency(results, "mrr").sort_values("run_id", ignore_index=True)
    reference = quality_vs_latency(scores, pipeline_stages(stages), "mrr")
    pd.testing.assert_frame_equal(front, reference.sort_values("run_id", ignore_index=True).astype({"run_id": object}),
                                  rtol=1e-12)

    # A selection of runs: its matrices are built from the rows read for every run, less the others'.
    some = results.subset(["r3", "r1"])
    expected = metric_means(scores[scores["run_id"].isin(["r1", "r3"])], METRICS, units)
    got = views.means(some, tuple(METRICS))
    pd.testing.assert_frame_equal(got.astype({"run_id": "string"}), expected.astype({"run_id": "string"}),
                                  check_exact=False, rtol=1e-12)


def test_every_view_of_a_selection_shares_one_set_of_matrices():
    scores = _random_rows(3)
    results = results_of([run_row(f"r{i}", chunker=f"c{i}") for i in range(6)], scores)
    selected = results.subset(["r1", "r2"])
    assert for_results(selected) is for_results(results.subset(["r1", "r2"]))
    assert for_results(selected) is not for_results(results)
    values, asked = for_results(selected).get("mrr")
    assert values.shape == asked.shape == (len(results.question_ids), 2)
    # Only the selections asked last keep theirs: a session that changes its selection often
    # does not pile up matrices.
    first = for_results(selected)
    for run_ids in (["r0"], ["r3", "r4"], ["r5"]):
        for_results(results.subset(run_ids))
    assert for_results(results.subset(["r1", "r2"])) is not first
    assert for_results(results.subset(["r5"])) is for_results(results.subset(["r5"]))


def test_a_matrix_by_hand():
    """valid values where the row has no error and a value; asked wherever a row exists."""
    scores = score_rows([("r1", "q1", "mrr", 1.0), ("r1", "q2", "mrr", np.nan), ("r2", "q2", "mrr", 0.5, "boom"),
                         ("r2", "q1", "recall@5", 0.25)])
    results = results_of([run_row("r1"), run_row("r2", chunker="x")], scores)
    matrices = ScoreMatrices(results, ["r1", "r2"])
    values, asked = matrices.get("mrr")
    rows = list(results.question_ids)
    assert asked[rows.index("q1")].tolist() == [True, False] and asked[rows.index("q2")].tolist() == [True, True]
    assert values[rows.index("q1"), 0] == 1.0 and np.isnan(values[rows.index("q2")]).all()
    assert matrices.valid_means("mrr")[0] == 1.0 and np.isnan(matrices.valid_means("mrr")[1])
    assert matrices.run_means("mrr", 0.0).tolist() == [0.5, 0.0]  # a failure as 0, over the questions asked
    values, asked = matrices.get("never_scored")
    assert not asked.any() and np.isnan(values).all()


@pytest.mark.parametrize("source", ["folder", "memory"])
def test_a_score_row_without_a_question_id_counts_as_the_row_based_functions_count_it(tmp_path, source):
    """A malformed row (no question id, not listed by the questions table) neither loops the
    build nor disappears: it is one more question, as ``metric_means`` counts it."""
    scores = score_rows([("r1", "q1", "mrr", 1.0), ("r1", None, "mrr", 0.0), ("r2", "q1", "mrr", 0.5)])
    if source == "folder":
        store = ResultStore(tmp_path)
        store.write_questions("q1", pd.DataFrame({"question_id": ["q1"], "text": ["q1"]}))
        for run_id in ("r1", "r2"):
            store.write_run(run_id, run_row(run_id, chunker=f"c{run_id}"))
            store.commit_shard(run_id, ["q1"], {"scores": scores[scores["run_id"] == run_id]})
        results = load_results(tmp_path)
    else:
        results = results_of([run_row("r1"), run_row("r2", chunker="x")], scores, {"q1": "d1"})
    got = views.means(results, ("mrr",)).set_index("run_id")
    assert got.loc["r1", "mean"] == 0.5 and got.loc["r1", "n"] == 2 and got.loc["r2", "n"] == 1
    expected = metric_means(scores, ["mrr"]).set_index("run_id")
    assert got[["mean", "n", "n_failed"]].to_dict() == expected[["mean", "n", "n_failed"]].to_dict()


def test_matrices_of_no_runs_are_empty_not_an_error():
    scores = score_rows([("r1", "q1", "mrr", 1.0), ("r1", "q1", "recall@1", 1.0)])
    matrices = ScoreMatrices(results_of([run_row("r1")], scores), [])
    matrices.load(["mrr"], means_only=["recall@1"])
    values, asked = matrices.get("mrr")
    assert values.shape == asked.shape == (1, 0)
    assert matrices.valid_means("recall@1").shape == (0,)

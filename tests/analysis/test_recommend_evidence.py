"""`ragkit best` states its evidence: the detectable difference, a "not distinguishable" verdict
instead of a name when the runner-up is not significantly worse, ties named, each mean's
denominator, and the default metric (the search objective, else ndcg@10)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragkit.analysis.recommend import BestParams, default_metric, plan_questions, recommend, to_json, to_text
from ragkit.cli import main
from tests.analysis.helpers import results_of, run_row, score_rows

pytestmark = pytest.mark.unit


def _results(n_questions: int, means: dict[str, float], noise: float = 0.15, extra_unscored: int = 0,
             per_document: int = 2, metric: str = "ndcg@10"):
    rng = np.random.default_rng(1)
    shared = rng.normal(0, 0.1, n_questions)
    rows = []
    for run, mean in means.items():
        values = np.clip(mean + shared + rng.normal(0, noise, n_questions), 0, 1)
        rows += [(run, f"q{i:03d}", metric, float(v)) for i, v in enumerate(values)]
        # Questions with nothing to score against: asked, but no ranking metric.
        rows += [(run, f"u{i}", "final_tokens", 100.0) for i in range(extra_unscored)]
    chunkers = ["token", "sentence", "recursive", "semantic"]
    runs = [run_row(run, chunker=chunkers[i]) for i, run in enumerate(means)]
    ids = [f"q{i:03d}" for i in range(n_questions)] + [f"u{i}" for i in range(extra_unscored)]
    documents = {qid: f"d{position // per_document}" for position, qid in enumerate(ids)}
    return results_of(runs, score_rows(rows), documents)


def test_few_questions_give_the_not_distinguishable_verdict_with_the_questions_needed():
    results = _results(5, {"A": 0.55, "B": 0.50, "C": 0.45}, extra_unscored=4)
    rec = recommend(results, BestParams(metric="ndcg@10"))
    assert not rec.distinguishable
    runner = rec.runner_up
    verdict = rec.verdict()
    assert verdict.startswith(f"no configuration is distinguishable on 5 questions from {int(runner['n_units'])} "
                              "documents; about ")
    need = rec.need()
    assert need is not None and need.questions is not None and need.questions > 5
    assert f"about {need.questions:,} questions would detect a difference of {abs(runner['diff']):.3f}" in verdict
    assert f"the smallest difference these questions detect: {runner['mde']:.3f}" in verdict
    text = to_text(rec)
    assert f"verdict: {verdict}" in text
    # The header states the denominator: 5 of the 9 questions asked have the metric.
    assert "mean over the 5 questions with a ndcg@10 of the 9 asked" in text
    assert "detectable" in text


def test_a_clear_difference_on_many_questions_names_the_winner():
    results = _results(200, {"A": 0.70, "B": 0.45, "C": 0.40}, noise=0.1)
    rec = recommend(results, BestParams(metric="ndcg@10"))
    assert rec.distinguishable and rec.best == "A"
    verdict = rec.verdict()
    assert verdict.startswith("best on ndcg@10: A, better than the runner-up B by 0.2")
    assert f"the smallest difference these questions detect: {rec.runner_up['mde']:.3f}" in verdict
    payload = json.loads(to_json(rec))
    assert payload["distinguishable"] is True and payload["verdict"] == verdict
    assert payload["comparisons"][0]["mde"] == pytest.approx(rec.runner_up["mde"])


def test_ties_are_named_not_broken_silently():
    # Equal means, different questions right.
    rows = [("k5", f"q{i}", "recall@5", value) for i, value in enumerate([1, 0, 1, 0, 0.5])]
    rows += [("k10", f"q{i}", "recall@5", value) for i, value in enumerate([0, 1, 1, 0, 0.5])]
    rows += [("other", f"q{i}", "recall@5", value) for i, value in enumerate([0, 0, 1, 0, 0])]
    results = results_of([run_row("k10", top_k=10), run_row("k5", top_k=5), run_row("other", retriever="dense")],
                         score_rows(rows), {f"q{i}": f"d{i}" for i in range(5)})
    rec = recommend(results, BestParams(metric="recall@5"))
    assert rec.tied == ["k5"] and not rec.distinguishable
    text = to_text(rec)
    assert "tie: k10, k5 have the same mean 0.500 (listed by label; no tie-break)" in text
    # An exact tie plans for half the detectable difference, not for a gap of 0.
    assert rec.need().detect == pytest.approx(rec.runner_up["mde"] / 2)


def test_best_without_metric_uses_ndcg_at_10_and_a_bad_metric_lists_the_valid_ones(tmp_path, capsys, monkeypatch):
    results = _results(5, {"A": 0.55, "B": 0.50})
    monkeypatch.setattr("ragkit.analysis.loading.load_results", lambda location: results)
    assert main(["best", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ranked on ndcg@10: mean over the 5 questions with a ndcg@10")
    assert "no configuration is distinguishable on 5 questions" in out
    assert main(["best", str(tmp_path), "--metric", "recall@99"]) == 2
    err = capsys.readouterr().err
    assert "metric 'recall@99' is not scored" in err and "Valid metrics: ndcg@10" in err


def test_the_default_metric_is_the_search_objective_when_the_experiment_had_one(tmp_path):
    results = _results(5, {"A": 0.55, "B": 0.50})
    assert default_metric(results) == "ndcg@10"
    results.root = tmp_path
    (tmp_path / "search.json").write_text(json.dumps({"search": {"objective": {"metric": "mrr@10"}}}))
    assert default_metric(results) == "mrr@10"
    (tmp_path / "search.json").write_text("not json")
    assert default_metric(results) == "ndcg@10"


def test_the_verdict_plan_agrees_with_questions_plan():
    results = _results(6, {"A": 0.55, "B": 0.50, "C": 0.45})
    rec = recommend(results, BestParams(metric="ndcg@10"))
    need = rec.need()
    plan = plan_questions(results, "ndcg@10", need.detect)
    assert int(plan.lead["questions_needed"]) == need.questions


def test_a_leading_group_is_named_when_some_runs_are_worse_but_the_first_two_are_not():
    results = _results(60, {"A": 0.60, "B": 0.595, "C": 0.20}, noise=0.1)
    rec = recommend(results, BestParams(metric="ndcg@10"))
    assert not rec.distinguishable and rec.not_worse == ["B"]
    verdict = rec.verdict()
    assert verdict.startswith("no single best on 60 questions from 30 documents: A, B cannot be told apart (about ")
    assert verdict.endswith("; the other 1 is significantly worse")


def test_questions_from_one_document_cannot_be_told_apart_and_say_why():
    results = _results(5, {"A": 0.55, "B": 0.50}, per_document=5)
    verdict = recommend(results, BestParams(metric="ndcg@10")).verdict()
    assert verdict == ("no configuration is distinguishable on 5 questions from 1 document; one document gives no "
                       "spread between documents to test with: questions from more documents are needed before any "
                       "difference can be told; no difference is detectable on these questions")

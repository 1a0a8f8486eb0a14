"""The smallest detectable difference (``statistics.detectable_difference``) and the plan built on it
(``ragkit.analysis.power``, `ragkit questions plan`): a hand-computed case, a simulation at the
MDE (power near 80%), the scaling rule, and the command."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from ragkit.analysis import power, statistics
from ragkit.analysis.recommend import plan_questions
from ragkit.cli import main
from tests.analysis.helpers import results_of, run_row, score_rows

pytestmark = pytest.mark.unit


def test_mde_of_one_question_per_unit_is_the_t_formula_by_hand():
    # One question per unit: SE = sd / sqrt(n), df = n - 1 (any cluster-robust rule agrees here).
    values = np.array([0.1, -0.2, 0.3, 0.0, 0.25, -0.05, 0.15, 0.2])
    n = len(values)
    se = values.std(ddof=1) / np.sqrt(n)
    expected = (stats.t.ppf(0.975, n - 1) + stats.t.ppf(0.8, n - 1)) * se
    found = statistics.detectable_difference(values, np.arange(n))
    assert found.mde[0] == pytest.approx(expected, rel=1e-9)
    assert found.se[0] == pytest.approx(se, rel=1e-6)
    assert found.df[0] == pytest.approx(n - 1, rel=1e-4)
    assert float(statistics.mde_of(se, n - 1)) == pytest.approx(expected, rel=1e-12)


def test_mde_is_the_sum_of_the_two_interval_half_widths_of_the_same_routine():
    rng = np.random.default_rng(3)
    values = rng.normal(0.05, 0.2, (40, 3))
    units = np.repeat(np.arange(10), 4)
    wide = statistics.column_stats(values, units, 0.95)
    narrow = statistics.column_stats(values, units, 0.6)
    found = statistics.detectable_difference(values, units)
    assert np.allclose(found.mde, (wide.ci_high - wide.ci_low) / 2 + (narrow.ci_high - narrow.ci_low) / 2)


def test_zero_spread_and_one_unit_have_no_mde():
    found = statistics.detectable_difference(np.zeros((6, 1)), np.arange(6))
    assert np.isnan(found.mde[0])
    assert np.isnan(statistics.detectable_difference(np.array([0.1, 0.3]), np.array([0, 0])).mde[0])


def test_a_true_difference_equal_to_the_mde_is_found_about_80_percent_of_the_time():
    # 25 documents x 3 questions, questions of a document correlated; 600 simulated studies at once.
    rng = np.random.default_rng(11)
    units = np.repeat(np.arange(25), 3)
    reps = 600

    def draw(mean: float) -> np.ndarray:
        document = rng.normal(0, 0.15, (25, reps))[units]
        return mean + document + rng.normal(0, 0.2, (len(units), reps))

    # The MDE a study of this design reports (its median over null studies) ...
    mde = float(np.median(statistics.detectable_difference(draw(0.0), units).mde))
    # ... is detected, when it is the true difference, in about 80% of studies.
    detected = (statistics.column_stats(draw(mde), units).p_value < 0.05).mean()
    assert 0.72 <= detected <= 0.88, detected


def test_the_plan_scales_the_standard_error_with_the_square_root_of_the_documents():
    se, df, units = 0.05, 19.0, 20
    mde = float(statistics.mde_of(se, df))
    # The pilot's own MDE needs the pilot's documents; a difference half as big about four times as many
    # (a little fewer: more documents, more degrees of freedom).
    assert power.units_needed(se, df, units, mde) == units
    quarter = power.units_needed(se, df, units, mde / 2)
    assert quarter is not None and 70 <= quarter <= 80
    # The planned size reaches it and one document fewer does not.
    scaled = lambda g: float(statistics.mde_of(se * np.sqrt(units / g), df * (g - 1) / (units - 1)))  # noqa: E731
    assert scaled(quarter) <= mde / 2 < scaled(quarter - 1)
    assert power.units_needed(float("nan"), df, units, 0.1) is None


def _pilot(n_questions: int, gap: float, per_document: int = 2):
    rng = np.random.default_rng(5)
    rows = []
    shared = rng.normal(0, 0.1, n_questions)
    for run, mean in {"A": 0.6, "B": 0.6 - gap, "C": 0.3}.items():
        values = np.clip(mean + shared + rng.normal(0, 0.15, n_questions), 0, 1)
        rows += [(run, f"q{i:03d}", "ndcg@10", float(v)) for i, v in enumerate(values)]
    runs = [run_row("A", retriever="dense"), run_row("B", retriever="bm25"), run_row("C", chunker="sentence")]
    documents = {f"q{i:03d}": f"d{i // per_document}" for i in range(n_questions)}
    return results_of(runs, score_rows(rows), documents)


def test_plan_leads_with_the_comparison_against_the_runner_up():
    results = _pilot(20, 0.1)
    plan = plan_questions(results, "ndcg@10", 0.03)
    lead = plan.lead
    assert plan.best == "A" and lead["run"] == "B"
    assert lead["n"] == 20 and lead["n_units"] == 10
    # Questions = documents needed x the pilot's 2 questions per document.
    assert lead["questions_needed"] == 2 * lead["units_needed"]
    text = power.to_text(plan)
    assert "1/sqrt(documents)" in text and f"about {int(lead['questions_needed']):,} questions" in text


def test_questions_plan_command(tmp_path, capsys, monkeypatch):
    results = _pilot(20, 0.02)
    monkeypatch.setattr("ragkit.analysis.loading.load_results", lambda location: results)
    assert main(["questions", "plan", str(tmp_path), "--detect", "0.03", "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["metric"] == "ndcg@10" and payload["detect"] == 0.03
    assert payload["comparisons"][0]["questions_needed"] > 0
    assert main(["questions", "plan", str(tmp_path), "--detect", "0.03", "--metric", "nope"]) == 2
    assert "Valid metrics: ndcg@10" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["questions", "plan", str(tmp_path), "--detect", "-1"])

"""ragkit.analysis.slices: per-slice means and comparisons equal the engine on the slice's
questions alone, families span the slices (per kind and metric), and a slice tests each factor
against the reference the report uses (the experiment's baselines)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ragkit.analysis.comparison import compare
from ragkit.analysis.loading import Results
from ragkit.analysis.slices import sliced
from ragkit.analysis.statistics import holm
from ragkit.errors import ConfigError
from tests.analysis.helpers import run_row, score_rows

pytestmark = pytest.mark.unit


def _results() -> Results:
    rng = np.random.default_rng(11)
    rows = []
    kinds = {f"q{i:02d}": ("factoid" if i < 20 else "list") for i in range(40)}
    for question, kind in kinds.items():
        base = rng.uniform(0.2, 0.6)
        rows.append(("a", question, "recall@5", base))
        # Run b is 0.3 better on factoid questions, the same on lists (up to noise).
        rows.append(("b", question, "recall@5", base + (0.3 if kind == "factoid" else 0.0) + rng.normal(0, 0.05)))
    questions = pd.DataFrame({"question_id": list(kinds), "text": "?", "kind": list(kinds.values()),
                              "document": [f"d{i % 8}" for i in range(40)]})
    runs = pd.DataFrame([run_row("a", chunker="token"), run_row("b", chunker="sentence")]).assign(label=["A", "B"])
    return Results(runs, score_rows(rows), questions=questions)


def test_each_slice_is_the_engine_on_its_questions_and_holm_spans_every_slice():
    results = _results()
    out = sliced(results, ["recall@5"], "kind")
    assert out.sizes.to_dict() == {"factoid": 20, "list": 20}
    pairs = out.comparisons[out.comparisons["kind"] == "pair"].set_index("slice")
    for kind in ("factoid", "list"):
        questions = results.questions[results.questions["kind"] == kind]
        alone = Results(results.runs, results.scores[results.scores["question_id"].isin(questions["question_id"])],
                        questions=questions)
        expected = compare(alone, ["recall@5"], factor_rows=False).iloc[0]
        for column in ("diff", "ci_low", "ci_high", "p", "n", "n_units"):
            assert pairs.loc[kind, column] == pytest.approx(expected[column])
        mine = out.means[(out.means["slice"] == kind) & (out.means["run_id"] == "b")].iloc[0]
        assert mine["mean"] == pytest.approx(alone.scores[alone.scores["run_id"] == "b"]["value"].mean())
    # The pair reads sentence -> token (the engine orders levels), so b - a is about -0.3.
    assert abs(pairs.loc["factoid", "diff"]) == pytest.approx(0.3, abs=0.03) and pairs.loc["factoid", "p_adj"] < 0.001
    assert pairs.loc["list", "p_adj"] > 0.05
    # Families span the slices: the factor rows of every slice, and the pairs of every slice, each
    # with p and strict p as one test where no question failed.
    for kind, family in out.comparisons.groupby("kind"):
        # the slices' questions differ, so their tests are adjusted as independent: between p and Holm
        p, adjusted = family["p"].to_numpy(), family["p_adj"].to_numpy()
        assert (adjusted >= p).all() and (adjusted <= holm(p) * (1 + 1e-9)).all()
        assert (family["family_tests"] == 2).all()
        assert (family["family"] == ("factor table" if kind == "factor" else "pairs") + " on recall@5").all()
    assert len(out.comparisons) == 4 and out.comparisons["unit"].eq("document").all()


def test_an_unknown_column_is_a_one_line_error_naming_the_valid_ones():
    with pytest.raises(ConfigError, match=r"unknown slice column 'type'. Valid question columns: kind, document"):
        sliced(_results(), ["recall@5"], "type")


def test_slices_test_against_the_references_the_report_uses(tmp_path):
    from ragkit.analysis.loading import load_results
    from ragkit.analysis.report import build_report
    from ragkit.results import ResultStore

    results = _results()
    store = ResultStore(tmp_path / "r")
    # The stored questions table has no free columns: the kind goes in as n_answer_groups (1 or 2).
    store.write_questions("q1", results.questions.assign(question_key=results.questions["question_id"],
                                                         n_answer_groups=(results.questions["kind"] == "list") + 1))
    runs = [run_row("a", chunker="token"), run_row("b", chunker="sentence"), run_row("c", chunker="semantic")]
    for row in runs:
        store.write_run(row["run_id"], row)
        rows = results.scores[results.scores["run_id"] == ("a" if row["run_id"] == "c" else row["run_id"])]
        rows = rows.assign(run_id=row["run_id"])
        ids = rows["question_id"].astype(str).tolist()
        store.commit_shard(row["run_id"], ids, {"scores": rows}, ids)
    # The experiment names sentence, which is neither the first level listed nor the first in order.
    store.write_baselines({"chunker": "sentence"}, {"chunker": "token"})
    folder = load_results(tmp_path / "r")
    report = build_report(folder, ["recall@5"])
    out = sliced(folder, ["recall@5"], "n_answer_groups")
    expected = {(r.factor, r.level) for r in report.references}
    assert expected == {("chunker", "sentence")}
    factor_rows = out.comparisons[out.comparisons["kind"] == "factor"]
    assert len(factor_rows) == 4  # two other levels in each of two slices
    assert set(zip(factor_rows["factor"], factor_rows["level_a"])) == expected
    assert set(zip(report.factor_rows["factor"], report.factor_rows["level_a"])) == expected

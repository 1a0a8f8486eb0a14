"""The quickstart's report as a new user runs it: the real grid on the bundled COVID-QA sample
(18 articles, 247 questions), then `ragkit report`.

- bm25 is compared with dense (it has no embedder; the factor does not apply to it);
- a clear effect (dense -> hybrid span_recall@5, about +0.17) is significant after Holm in the
  factor table's family on that metric, in the row against the reference the quickstart names
  (dense), with documents as the resampling unit; each of its six pairs alone excludes 0 (their
  family, the pairs on span_recall@5, is large for 18 documents: benchmarks/README.md, "Null size
  and power", has what that costs);
- the answer-per-factor part fits on one screen above the detail.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragkit.cli import main
from ragkit.experiments.config import load_config
from ragkit.experiments.runner import run_experiment

pytestmark = pytest.mark.slow

QUICKSTART = Path(__file__).resolve().parents[2] / "experiments" / "quickstart.yaml"
SCREEN_LINES = 60


@pytest.fixture(scope="module")
def quickstart_results(tmp_path_factory) -> Path:
    import os

    from ragkit.settings import get_settings

    # One run for the module: its own data folder, as the autouse fixture gives each test.
    data = tmp_path_factory.mktemp("quickstart-data")
    previous = os.environ.get("RAGKIT_DATA_DIR")
    os.environ["RAGKIT_DATA_DIR"] = str(data)
    get_settings.cache_clear()
    try:
        out = data / "results" / "quickstart"
        run_experiment(load_config(QUICKSTART), out)
    finally:
        if previous is None:
            os.environ.pop("RAGKIT_DATA_DIR", None)
        else:
            os.environ["RAGKIT_DATA_DIR"] = previous
        get_settings.cache_clear()
    return out


def _report(results: Path, capsys, *args: str) -> str:
    assert main(["report", str(results), *args]) == 0
    return capsys.readouterr().out


def test_bm25_is_compared_with_dense_on_every_metric(quickstart_results, capsys):
    payload = json.loads(_report(quickstart_results, capsys, "--format", "json"))
    comparisons = payload["comparisons"]
    assert payload["unit"] == "document"
    bm25_dense = {row["metric"] for row in comparisons
                  if row["kind"] == "pair" and {row["level_a"], row["level_b"]} == {"bm25", "dense"}}
    assert bm25_dense == set(payload["metrics"])


def test_a_clear_effect_is_significant_after_holm(quickstart_results, capsys):
    payload = json.loads(_report(quickstart_results, capsys, "--format", "json"))
    comparisons = payload["comparisons"]
    # dense -> hybrid span_recall@5, one pair per chunker x top_k: about +0.17 to +0.20
    pairs = [row for row in comparisons if row["kind"] == "pair" and row["metric"] == "span_recall@5"
             and (row["level_a"], row["level_b"]) == ("dense", "hybrid")]
    for row in pairs:
        print(f"dense -> hybrid span_recall@5: {row['diff']:+.3f} [{row['ci_low']:+.3f}, {row['ci_high']:+.3f}], "
              f"p (adj.) {row['p_adj']:.2g} over {len(comparisons)} comparisons, {row['n_units']} {row['unit']}s")
    assert len(pairs) == 6
    assert all(row["diff"] > 0.1 and row["p"] < 0.01 and row["ci_low"] > 0 for row in pairs)
    assert all(row["unit"] == "document" and row["n_units"] == 18 for row in pairs)
    # and the factor answer for the retriever: hybrid is clearly ahead of the reference the
    # quickstart names (dense), tested against it rather than against whichever scored best
    factor = [row for row in comparisons if row["kind"] == "factor" and row["factor"] == "retriever"
              and row["metric"] == "span_recall@5" and row["level_b"] == "hybrid"]
    assert len(factor) == 1 and factor[0]["level_a"] == "dense"
    assert factor[0]["diff"] > 0.1 and factor[0]["p_adj"] < 0.05
    assert {"factor": "retriever", "level": "dense", "source": "named in the experiment"} in payload["references"]
    # every p is positive, or missing with its reason
    assert all((row["p"] or 0) > 0 or row["p_note"] for row in comparisons)
    # rows identical by construction (top_k 5 vs 10 on a metric @5) are not tested
    identical = [row for row in comparisons if row["kind"] == "pair" and row["factor"] == "top_k"
                 and row["metric_compared"].endswith("@5") and row["diff"] == 0 and row["n_failed_a"] == 0]
    assert identical and all(row["p"] is None and "identical" in row["p_note"] for row in identical)
    described = payload["family_adjustment"]
    assert described["tests"] == sum(family["tests"] for family in described["families"])


def test_the_answer_per_factor_fits_on_one_screen_above_the_detail(quickstart_results, capsys):
    text = _report(quickstart_results, capsys)
    lines = text.splitlines()
    start = lines.index("## What each factor does")
    end = lines.index("## Configurations")
    assert end - start <= SCREEN_LINES
    assert end < lines.index("## Single-factor pairs")
    assert any(line.startswith("| retriever | hybrid vs dense ") for line in lines[start:end])



def test_best_names_a_configuration_and_its_not_worse_set_as_the_reports_pairs_imply(quickstart_results, capsys):
    assert main(["best", str(quickstart_results), "--metric", "span_recall@5", "--format", "json"]) == 0
    best = json.loads(capsys.readouterr().out)
    assert best["best"] is not None and best["runs"]
    report = json.loads(_report(quickstart_results, capsys, "--format", "json", "--metrics", "span_recall@5"))
    # Every runner-up that differs from the best in one factor is a pair of the report: the same
    # questions, difference (up to orientation), strict difference and unadjusted p.
    ours = {row["run_b"]: row for row in best["comparisons"]}
    checked = 0
    for row in report["comparisons"]:
        if row["kind"] != "pair" or best["best"] not in (row["run_a"], row["run_b"]):
            continue
        other, sign = (row["run_b"], 1) if row["run_a"] == best["best"] else (row["run_a"], -1)
        mine = ours[other]
        assert mine["n"] == row["n"] and mine["diff"] == pytest.approx(sign * row["diff"], abs=1e-12)
        assert mine["p"] == pytest.approx(row["p"], rel=1e-9, abs=1e-300)
        checked += 1
    assert checked >= 3  # chunker (2 others), retriever (2), top_k (1)
    # The two tests of every runner-up (one where no question failed) in one joint test
    # (test_a_familys_adjusted_p_recomputed_draw_by_draw checks its value); not worse unless one
    # rejects downwards.
    rows = best["comparisons"]
    separate = [i for i, row in enumerate(rows) if not (row["n"] == row["n_strict"] and row["p"] == row["strict_p"])]
    tested = sum(row["p"] is not None for row in rows) + sum(rows[i]["strict_p"] is not None for i in separate)
    adjusted = [row["p_adj"] if row["p_adj"] is not None else float("nan") for row in rows]
    strict_adjusted = [row["strict_p_adj"] if row["strict_p_adj"] is not None else float("nan") for row in rows]
    for i, row in enumerate(rows):
        assert (row["p"] is None) == np.isnan(adjusted[i]) and (np.isnan(adjusted[i]) or 0 < adjusted[i] <= 1)
        assert row["family_tests"] == tested
    expected = [row["run_b"] for i, row in enumerate(rows)
                if not ((adjusted[i] < 0.05 and row["diff"] < 0)
                        or (strict_adjusted[i] < 0.05 and row["strict_diff"] < 0))]
    assert best["not_significantly_worse"] == expected


def test_every_pair_row_recomputed_independently_with_cr2(quickstart_results, capsys):
    """Each pair row's difference, CR2 standard error, Satterthwaite df, CI, p and simultaneous CI
    recomputed from the score rows with the direct matrix implementation of the tests
    (``cr2_by_matrices``: full leverage blocks, generic design, the random-effects working
    covariance built pair by pair), and every adjusted p checked against the families' rule: per
    kind and metric, p and strict p in one family, one test where equal, between p and Holm's."""
    import numpy as np
    import pandas as pd
    from scipy import stats

    from ragkit.analysis.loading import load_results
    from tests.analysis.helpers import cr2_by_matrices, random_effects_working_model

    payload = json.loads(_report(quickstart_results, capsys, "--format", "json"))
    table = pd.DataFrame(payload["comparisons"])
    results = load_results(quickstart_results)
    scores = results.scores
    documents = results.units
    values = scores.pivot_table(index="question_id", columns=["run_id", "metric"], values="value", aggfunc="first",
                                dropna=False, observed=False)
    pairs = table[table["kind"] == "pair"]
    assert len(pairs) > 200
    for row in pairs.itertuples():
        a, b = values[(row.run_a, row.metric_compared)], values[(row.run_b, row.metric_compared)]
        diff = (b - a).dropna()
        if (diff == 0).all():
            assert row.p is None or np.isnan(row.p)
            continue
        codes = pd.factorize(documents.reindex(diff.index.astype("string")).to_numpy())[0]
        y = diff.to_numpy()
        mean, se, df = cr2_by_matrices(y, np.ones((len(y), 1)), codes, np.array([1.0]),
                                       random_effects_working_model(y, codes))
        assert (row.n, row.diff, row.se, row.df) == pytest.approx((len(diff), mean, se, df), rel=1e-9, abs=1e-15)
        if se <= 1e-12 * np.abs(y).max():  # every document's mean the same: no p (the zero-SE rule)
            assert np.isnan(row.p) and "zero standard error" in row.p_note
            continue
        assert row.p == pytest.approx(2 * stats.t.sf(abs(mean / se), df), rel=1e-8)
        half = stats.t.ppf(0.975, df) * se
        assert (row.ci_low, row.ci_high) == pytest.approx((mean - half, mean + half), rel=1e-9, abs=1e-12)
        # The simultaneous interval: symmetric, and one that excludes 0 sits beside p (adj.) < 5% (its
        # width comes from the family's draws: test_families.py checks it).
        assert row.sim_ci_high - mean == pytest.approx(mean - row.sim_ci_low, rel=1e-9)
        assert row.sim_ci_low <= 0 <= row.sim_ci_high or row.p_adj < 0.05
    for (kind, metric), family in table.groupby(["kind", "metric"]):
        p, strict = family["p"].astype(float).to_numpy(), family["strict_p"].astype(float).to_numpy()
        same = (family["n"] == family["n_strict"]).to_numpy() & (p == strict)
        tests = np.concatenate([p, strict[~same]])
        adjusted, known = family["p_adj"].astype(float).to_numpy(), ~np.isnan(p)
        assert np.isnan(adjusted[~known]).all() and ((adjusted[known] > 0) & (adjusted[known] <= 1)).all()
        assert (family["family_tests"] == np.count_nonzero(~np.isnan(tests))).all()
        assert family["family"].iloc[0] == f"{'factor table' if kind == 'factor' else 'pairs'} on {metric}"


def test_no_detail_gives_every_factor_row_the_same_adjusted_p(quickstart_results, capsys):
    full = json.loads(_report(quickstart_results, capsys, "--format", "json"))
    brief = json.loads(_report(quickstart_results, capsys, "--format", "json", "--no-detail"))
    key = ("kind", "factor", "level_a", "level_b", "metric")
    shown = {tuple(row[k] for k in key): row for row in brief["comparisons"]}
    both = [(row, shown[tuple(row[k] for k in key)]) for row in full["comparisons"] if tuple(row[k] for k in key)
            in shown]
    assert len(both) == len(brief["comparisons"]) > 10
    for row, other in both:
        for column in ("p_adj", "strict_p_adj", "sim_ci_low", "sim_ci_high", "family_tests"):
            assert row[column] == other[column] or (row[column] is None and other[column] is None)


def test_best_without_a_metric_states_its_evidence_on_the_whole_sample(quickstart_results, capsys):
    # ndcg@10 by default (no search objective). The three bm25 runs at k=10 lie within a few
    # thousandths of each other: no single best, the leading group named and the rest worse.
    assert main(["best", str(quickstart_results)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ranked on ndcg@10: mean over the 247 questions with a ndcg@10")
    verdict = next(line for line in out.splitlines() if line.startswith("verdict: "))
    assert verdict.startswith("verdict: no single best on 247 questions from 18 documents: ")
    assert "token · - · bm25 · k=10" in verdict and "significantly worse" in verdict
    assert "the smallest difference these questions detect: 0.0" in verdict and "questions would detect" in verdict


def test_best_on_five_questions_is_not_distinguishable(quickstart_results, capsys, monkeypatch):
    # The sample's first 5 questions: the data folder of the whole run, so its indexes are reused.
    from ragkit.settings import get_settings

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(quickstart_results.parents[1]))
    get_settings.cache_clear()
    out = quickstart_results.parent / "five"
    run_experiment(load_config(QUICKSTART, ["dataset.limit=5"]), out)
    get_settings.cache_clear()
    assert main(["best", str(out)]) == 0
    text = capsys.readouterr().out
    verdict = next(line for line in text.splitlines() if line.startswith("verdict: "))
    assert verdict.startswith("verdict: no configuration is distinguishable on 5 questions from ")
    assert "detect" in verdict and "detectable" in text


def _step_down_by_hand(p: np.ndarray, drawn_t: np.ndarray) -> np.ndarray:
    """The step-down minP test from its definition (Westfall and Young): p* of a draw is the share
    of the test's draws with |t*| at least its own (at 9 decimals); at step i the i-th smallest p against the
    smallest p* over the tests not yet rejected, draw by draw; below 0.005 (where fewer than 50
    draws reach) p times 0.005 over the p* that 50 draws reach; between p and (m - i) p; then the
    running maximum."""
    m, draws = drawn_t.shape
    extreme = np.round(np.abs(drawn_t), 9)  # compared at 9 decimals: draws equal but for rounding tie
    drawn_p = np.empty_like(extreme)
    for k in range(m):
        ordered = np.sort(extreme[k])
        drawn_p[k] = (draws - np.searchsorted(ordered, extreme[k], side="left")) / draws
    order = np.argsort(p, kind="stable")
    steps = []
    for i, test in enumerate(order):
        smallest = drawn_p[order[i:]].min(axis=0)
        edge = np.sort(smallest)[49]
        found = p[test] * 0.005 / edge if p[test] < edge else np.mean(smallest <= p[test])
        steps.append(min(max(found, p[test]), (m - i) * p[test], 1.0))
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(steps)
    return adjusted


def test_a_familys_adjusted_p_recomputed_draw_by_draw(quickstart_results, capsys):
    """The pairs on recall@10 (a family of 17 tests over 45 rows), recomputed from the score rows
    without ragkit's statistics: the same 10,000 Webb weights and random signs (the documented
    recipe: seeded by ``families.SEED`` and the sample's key), each draw's CR2 t by its definition:
    every pair's residuals times its documents' Webb weights (the dependence), every pair's values
    times its documents' signs (each test's sign-flip p, the 18 documents being at least
    ``families.SIGN_FLIP_UNITS``), then the step-down minP test (``_step_down_by_hand``)."""
    import hashlib

    import numpy as np
    import pandas as pd

    from ragkit.analysis.comparison import Comparer
    from ragkit.analysis.loading import load_results

    payload = json.loads(_report(quickstart_results, capsys, "--format", "json", "--metrics", "recall@10"))
    family = pd.DataFrame(payload["comparisons"]).query("kind == 'pair' and metric == 'recall@10'")
    tested = family[family["p"].notna()]
    assert family["family_tests"].iloc[0] == len(tested) >= 10
    assert (tested["n"] == tested["n_strict"]).all()  # no failure: one test per row
    # The questions and documents in the order the engine keys its sample by (data, not statistics).
    comparer = Comparer(load_results(quickstart_results))
    question_ids, units = list(comparer.matrices.question_ids), comparer.units
    key = hashlib.sha256("\x1f".join(map(str, question_ids)).encode())
    key.update(np.ascontiguousarray(units, dtype="int64").tobytes())
    seed = int.from_bytes(hashlib.sha256(key.hexdigest()[:16].encode()).digest()[:8], "little")
    documents = int(units.max()) + 1
    rng = np.random.default_rng([20_161_103, seed, documents])
    weights = np.sqrt(np.array([1.5, 1.0, 0.5]))[rng.integers(0, 3, (documents, 10_000))]
    weights = weights * rng.choice([-1.0, 1.0], (documents, 10_000))
    signs = np.random.default_rng([20_161_103, seed, documents, 2]).choice([-1.0, 1.0], (documents, 10_000))
    scores = load_results(quickstart_results).scores
    values = scores.pivot_table(index="question_id", columns=["run_id", "metric"], values="value", aggfunc="first",
                                observed=False)
    values = values.reindex(pd.Index(question_ids, dtype="string"))
    # Each pair on the metric it is compared on (at the common depth where the runs' depths differ).
    y = np.column_stack([values[(row.run_b, row.metric_compared)].to_numpy()
                         - values[(row.run_a, row.metric_compared)].to_numpy() for row in tested.itertuples()])
    assert not np.isnan(y).any()
    n, sizes = len(y), np.bincount(units, minlength=documents)
    scale = np.sqrt(n / (n - sizes)) / n

    def cr2_t(sample: np.ndarray) -> np.ndarray:
        mean = sample.mean(axis=0)
        sums = np.array([sample[units == g].sum(axis=0) for g in range(documents)])
        return mean / np.sqrt((((sums - sizes[:, None] * mean) * scale[:, None]) ** 2).sum(axis=0))

    # The dependence: the residuals times Webb weights; each test's own p: its values (the null
    # imposed) times random signs, the share of draws with |t*| at least the data's (9 decimals).
    residual = y - y.mean(axis=0)
    drawn = np.column_stack([cr2_t(residual * weights[units, draw][:, None]) for draw in range(10_000)])
    flipped = np.column_stack([cr2_t(y * signs[units, draw][:, None]) for draw in range(10_000)])
    observed = np.round(np.abs(cr2_t(y)), 9)
    reached = (np.round(np.abs(flipped), 9) >= observed[:, None]).sum(axis=1)
    assert documents >= 14 and (reached >= 50).all()  # sign flips; no p beyond the draws' reach here
    own = reached / 10_000
    expected = _step_down_by_hand(own, drawn)
    print("p_adj", tested["p_adj"].to_numpy(dtype=float).round(4).tolist(), "by hand", expected.round(4).tolist())
    assert tested["p_adj"].to_numpy(dtype=float) == pytest.approx(expected, rel=1e-9)

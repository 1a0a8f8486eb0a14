"""ragkit.analysis.regression (`ragkit compare BASE NEW --fail-if`): exit 1 on a planted
regression, 0 on a copy, 2 (refusal naming the difference) on a changed question set, corpus
or model, and the one-sided rule checked against scipy."""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ragkit.analysis.loading import load_results
from ragkit.analysis.regression import FailIf, gate, selection_differences
from ragkit.cli import main
from ragkit.errors import ConfigError
from ragkit.results import ResultStore
from tests.analysis.helpers import run_row

pytestmark = pytest.mark.unit

N = 40


def _folder(path, drop: float = 0.0, questions: int = N, changed: str | None = None, llm: str = "local:smollm2",
            corpus_id: str = "c1", seed: int = 3, r2_asked: int | None = None, documents: int = 10):
    rng = np.random.default_rng(seed)
    store = ResultStore(path)
    ids = [f"q{i:02d}" for i in range(questions)]
    keys = [f"key-{q}" + ("-edited" if q == changed else "") for q in ids]
    store.write_questions("q1", pd.DataFrame({"question_id": ids, "text": ids, "document": [f"d{i % documents}"
                                                                                         for i in range(questions)],
                                              "question_key": keys}))
    base = np.random.default_rng(0).uniform(0.3, 0.9, questions)
    for run, chunker in (("r1", "token"), ("r2", "sentence")):
        store.write_run(run, run_row(run, chunker=chunker, corpus_id=corpus_id, **{"llm.generator": llm}))
        noise = rng.normal(0, 0.05, questions)
        values = np.clip(base + noise - (drop if run == "r2" else 0.0), 0, 1)
        asked = questions if run == "r1" or r2_asked is None else r2_asked
        scores = pd.DataFrame({"run_id": run, "question_id": ids[:asked], "metric": "ndcg@10",
                               "value": values[:asked], "error": None})
        store.commit_shard(run, ids[:asked], {"scores": scores}, keys[:asked])
    return path


def test_a_copy_passes_and_a_planted_regression_fails(tmp_path, capsys):
    base = _folder(tmp_path / "base")
    shutil.copytree(base, tmp_path / "copy")
    assert main(["compare", str(base), str(tmp_path / "copy"), "--fail-if", "ndcg@10 < -0.02"]) == 0
    assert "no significant regression" in capsys.readouterr().out
    _folder(tmp_path / "worse", drop=0.1, seed=4)
    assert main(["compare", str(base), str(tmp_path / "worse"), "--fail-if", "ndcg@10 < -0.02"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSED" in out and "sentence" in out.split("REGRESSED")[1].splitlines()[0]
    # A drop smaller than the threshold is tolerated.
    _folder(tmp_path / "slightly", drop=0.005, seed=4)
    assert main(["compare", str(base), str(tmp_path / "slightly"), "--fail-if", "ndcg@10 < -0.05"]) == 0


def test_the_one_sided_p_is_scipys_against_the_threshold(tmp_path):
    base, new = _folder(tmp_path / "base"), _folder(tmp_path / "new", drop=0.03, seed=5)
    result = gate(load_results(base), load_results(new), [FailIf.parse("ndcg@10 < -0.02")])
    a, b = load_results(base).scores, load_results(new).scores
    row = result.rows.set_index("base_run").loc["r2"]
    diff = (b[b["run_id"] == "r2"].sort_values("question_id")["value"].to_numpy()
            - a[a["run_id"] == "r2"].sort_values("question_id")["value"].to_numpy())
    # Each question is one document's? No: ten documents, so the unit is the document; by hand:
    # the cluster-robust t over document means of the (diff - T), one-sided.
    frame = pd.DataFrame({"d": [f"d{i % 10}" for i in range(N)], "x": diff + 0.02})
    sums, counts = frame.groupby("d")["x"].sum(), frame.groupby("d")["x"].count()
    mean = frame["x"].mean()
    g = len(sums)
    se = np.sqrt(g / (g - 1) * ((sums - counts * mean) ** 2).sum() / N ** 2)
    expected = stats.t.cdf(mean / se, g - 1)
    assert row["p_one_sided"] == pytest.approx(expected, rel=1e-6)
    assert row["diff"] == pytest.approx(diff.mean())


def test_different_questions_corpus_or_model_refuse_naming_the_difference(tmp_path, capsys):
    base = _folder(tmp_path / "base")
    _folder(tmp_path / "more", questions=N + 2, changed="q03")
    assert main(["compare", str(base), str(tmp_path / "more"), "--fail-if", "ndcg@10 < -0.02"]) == 2
    err = capsys.readouterr().err
    assert "2 question(s) only in the new folder: q40, q41" in err
    assert "1 question(s) whose text or ground truth changed: q03" in err and "--allow-different" in err
    assert main(["compare", str(base), str(tmp_path / "more"), "--fail-if", "ndcg@10 < -0.02",
                 "--allow-different"]) == 0
    assert "warning (allowed)" in capsys.readouterr().out
    _folder(tmp_path / "model", llm="ollama:llama3")
    with pytest.raises(ConfigError, match=r"llm.generator differs \(local:smollm2 -> ollama:llama3\)"):
        gate(load_results(base), load_results(tmp_path / "model"), [FailIf.parse("ndcg@10 < 0")])
    _folder(tmp_path / "corpus", corpus_id="c2")
    with pytest.raises(ConfigError, match=r"corpus content differs \(corpus_id c1 -> c2\)"):
        gate(load_results(base), load_results(tmp_path / "corpus"), [FailIf.parse("ndcg@10 < 0")])


def test_bad_conditions_are_one_line_errors(tmp_path, capsys):
    base = _folder(tmp_path / "base")
    assert main(["compare", str(base), str(base), "--fail-if", "ndcg@10 <= x"]) == 2
    assert "is not 'METRIC < NUMBER'" in capsys.readouterr().err
    assert main(["compare", str(base), str(base), "--fail-if", "mrr < -0.1"]) == 2
    assert "Valid metrics: ndcg@10" in capsys.readouterr().err


def test_selection_differences_name_question_sets_and_corpora():
    runs = pd.DataFrame({"run_id": ["a", "b"], "questions_key": ["q1", "q2"], "corpus_id": ["c", "c"]})
    assert selection_differences(runs) == ["the selected runs use 2 question sets (q1, q2)"]
    assert selection_differences(runs.assign(questions_key="q1")) == []


def test_runs_pair_by_run_id_first_then_by_configuration():
    from ragkit.analysis.regression import pair_runs

    base = pd.DataFrame([run_row("a", chunker="token"), run_row("b", chunker="sentence"),
                         run_row("c", chunker="semantic")]).assign(label=["A", "B", "C"])
    # "x" has b's configuration under a new id; "b" is kept under its id but its row now says token
    # (a run id names its configuration: the id wins); nothing matches c.
    new = pd.DataFrame([run_row("x", chunker="sentence"), run_row("b", chunker="token")])
    pairs, unpaired_base, unpaired_new = pair_runs(base, new)
    assert pairs[["base_run", "new_run", "how"]].values.tolist() == [["b", "b", "run id"]]
    assert unpaired_base == ["a", "c"] and unpaired_new == ["x"]
    new = pd.DataFrame([run_row("x", chunker="sentence"), run_row("y", chunker="token")])
    pairs, _, _ = pair_runs(base, new)
    assert pairs[["base_run", "new_run", "how"]].values.tolist() == [["a", "y", "configuration"],
                                                                     ["b", "x", "configuration"]]


def _set_r2(base, new, before: np.ndarray, after: np.ndarray) -> None:
    """r2's value per question (q00..q39) in the baseline and the new folder."""
    for folder, values in ((base, before), (new, after)):
        store = ResultStore(folder)
        scores = store.read("scores")
        rows = scores[scores["run_id"] == "r2"].sort_values("question_id")
        rows = rows.assign(value=values[rows["question_id"].str[1:].astype(int).to_numpy()])
        ids = rows["question_id"].astype(str).tolist()
        store.commit_shard("r2", ids, {"scores": rows}, [f"key-{q}" for q in ids])


@pytest.mark.parametrize("shift", [-0.25, 0.25])
def test_an_exact_shift_gets_one_verdict_whether_or_not_questions_vary_inside_documents(tmp_path, shift):
    """r2 moves by exactly ``shift`` on every question, or on every document's mean while its
    questions move by shift -+ 0.125 (document d holds q_d, q_d+10, q_d+20, q_d+30). Neither has a
    t statistic (no spread between documents); both get the verdict of the mean's side of the
    threshold: a drop of 0.25 fails "< -0.02", a rise passes (values exact in binary)."""
    verdicts = []
    for inside in (0.0, 0.125):
        base = _folder(tmp_path / f"base{inside}{shift}")
        new = tmp_path / f"new{inside}{shift}"
        shutil.copytree(base, new)
        wiggle = np.where((np.arange(N) // 10) % 2 == 0, inside, -inside)
        _set_r2(base, new, np.full(N, 0.5), 0.5 + shift + wiggle)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            result = gate(load_results(base), load_results(new), [FailIf.parse("ndcg@10 < -0.02")])
        row = result.rows.set_index("base_run").loc["r2"]
        assert row["diff"] == pytest.approx(shift) and row["p_one_sided"] == (0.0 if shift < 0 else 1.0)
        assert row["decided_by"].startswith("no spread between units")
        verdicts.append((bool(row["regressed"]), result.exit_code))
        # r1 is unchanged (p 1 by its side), r2 decided by its side: no t test is adjusted.
        assert (result.tests, result.decided, result.untested) == (0, 2, 0)
        assert (result.rows["p_adj"] == result.rows["p_one_sided"]).all()
    assert verdicts[0] == verdicts[1] == ((True, 1) if shift < 0 else (False, 0))


@pytest.mark.filterwarnings("error")
def test_a_new_run_that_stopped_short_is_refused_unless_allowed(tmp_path, capsys):
    base = _folder(tmp_path / "base")
    new = _folder(tmp_path / "new", r2_asked=29)  # r2 stopped after 29 of the 40 questions
    assert main(["compare", str(base), str(new), "--fail-if", "ndcg@10 < -0.02"]) == 2
    err = capsys.readouterr().err
    assert "new run r2" in err and "asked 29 of the 40 questions" in err and "--allow-partial" in err
    assert main(["compare", str(base), str(new), "--fail-if", "ndcg@10 < -0.02", "--allow-partial"]) == 0
    out = capsys.readouterr().out
    assert "warning (allowed): new run r2" in out and "n 29 " in out
    # The same scores (the same seed) on the questions both were asked: nothing left for a t test.
    assert ("joint test (dependence from a wild bootstrap over the shared documents) over the 0 t test(s) (2 "
            "decided by their side of the threshold)") in out


def _ann_row(run_id: str, retriever: str = "dense", **ann) -> dict:
    """A run as the plan writes it: ``ann.*`` columns only where the index is approximate."""
    row = run_row(run_id, retriever=retriever, embedder=None if retriever == "bm25" else "minilm")
    if ann:
        row.update({"ann.kind": "ivf_hnsw_sq", "ann.min_rows": 100_000, "ann.nprobes": 20, "ann.ef": None,
                    **{f"ann.{name}": value for name, value in ann.items()}})
    return row


def test_an_exact_folder_pairs_with_the_same_grid_searched_through_an_ann_index():
    from ragkit.analysis.regression import pair_runs

    base = pd.DataFrame([_ann_row("exact"), _ann_row("bm25", "bm25"), _ann_row("hnsw", ef=None)])
    base = base.assign(label=["dense exact", "bm25", "dense hnsw"])
    new = pd.DataFrame([_ann_row("bm25", "bm25"), _ann_row("a1", kind="ivf_pq"), _ann_row("a2", ef=128)])
    pairs, unpaired_base, unpaired_new = pair_runs(base, new)
    assert pairs[["base_run", "new_run", "how", "label"]].values.tolist() == [
        ["bm25", "bm25", "run id", "bm25"],
        ["exact", "a1", "search none -> ivf_pq", "dense exact [search none -> ivf_pq]"],
        ["hnsw", "a2", "search ivf_hnsw_sq ef none -> 128", "dense hnsw [search ivf_hnsw_sq ef none -> 128]"]]
    assert unpaired_base == [] and unpaired_new == []
    # Any other difference still keeps them apart.
    other = pd.DataFrame([_ann_row("a3", kind="ivf_pq") | {"top_k": 99}])
    assert pair_runs(base, other)[0].empty


@pytest.mark.filterwarnings("error")
def test_a_pair_with_one_document_has_no_verdict_and_is_not_counted(tmp_path, capsys):
    base = _folder(tmp_path / "base", documents=1)
    new = _folder(tmp_path / "new", drop=0.2, seed=4, documents=1)
    assert main(["compare", str(base), str(new), "--fail-if", "ndcg@10 < -0.02"]) == 2
    out = capsys.readouterr().out
    assert "over the 0 t test(s) (2 without a verdict" in out and out.count("UNTESTED") == 2
    assert "no verdict: 2 comparison(s) could not be tested (exit 2)" in out


@pytest.mark.filterwarnings("error")
def test_the_gate_adjusts_its_family_by_the_one_sided_joint_test(tmp_path, capsys):
    """Two conditions on one metric test the same differences against two thresholds: each pair's
    two rows move as one test, so four rows are about two tests (r1's and r2's noise differ), which
    Holm counts as four (4 p) and the joint test as about two (about 2 p). Every adjusted p lies
    between p and one-sided Holm; the text names the method and counts the t tests run."""
    from ragkit.analysis import statistics

    base, new = _folder(tmp_path / "base"), _folder(tmp_path / "new", drop=0.05, seed=5)
    conditions = [FailIf.parse("ndcg@10 < -0.01"), FailIf.parse("ndcg@10 < -0.02")]
    result = gate(load_results(base), load_results(new), conditions)
    p, adjusted = result.rows["p_one_sided"].to_numpy(), result.rows["p_adj"].to_numpy()
    holm = statistics.holm(p)
    assert result.tests == 4 and (adjusted >= p).all() and (adjusted <= holm + 1e-12).all()
    smallest = int(np.argmin(p))
    assert 0.001 < p[smallest] < 0.02
    assert holm[smallest] == pytest.approx(4 * p[smallest])
    assert 1.5 * p[smallest] < adjusted[smallest] < 2.2 * p[smallest]
    assert main(["compare", str(base), str(new), "--fail-if", "ndcg@10 < -0.01", "--fail-if",
                 "ndcg@10 < -0.02"]) == 1
    out = capsys.readouterr().out
    assert "adjusted by the one-sided step-down joint test" in out and "over the 4 t test(s), alpha" in out
    assert "p (adj.)" in out and "Holm" not in out

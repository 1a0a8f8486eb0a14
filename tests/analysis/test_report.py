"""`ragkit report` on a tiny results folder whose numbers are computed by hand: markdown, HTML and
JSON from one data model, the factor answers first, one Holm family."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ragkit.analysis.statistics import holm
from ragkit.cli import main
from ragkit.results import ResultStore

pytestmark = pytest.mark.unit

QUESTIONS = [f"q{i}" for i in range(1, 9)]
# Turning the rerank judge on finds the document for six more of the eight questions.
RECALL = {"off": [0, 0, 0, 0, 0, 0, 1, 1], "off_k10": [0, 0, 0, 0, 0, 0, 1, 1], "llm": [1] * 8}


def _run_row(run_id: str, judge_mode: str, top_k: int) -> dict:
    row = {"run_id": run_id, "experiment": "t", "corpus": "c", "corpus_id": "c1", "questions_key": "q1",
           "chunkset_id": "cs", "index_id": "ix", "chunker": "token", "embedder": None, "retriever": "bm25",
           "top_k": top_k, "retriever.top_k": top_k, "judge.rerank": judge_mode, "generator": True,
           "llm.generator": "local:smollm2"}
    if judge_mode == "llm":
        row.update({"judge.rerank.top_n": 5, "llm.rerank": "local:smollm2"})
    return row


@pytest.fixture()
def results_dir(tmp_path):
    store = ResultStore(tmp_path / "results")
    for run_id, mode, top_k in (("off", "off", 5), ("llm", "llm", 5), ("off_k10", "off", 10)):
        store.write_run(run_id, _run_row(run_id, mode, top_k))
        # The judge's run could not score groundedness for q8: a failure, not a 0.
        grounded = [0.5] * 7 + ([np.nan] if run_id == "llm" else [0.5])
        scores = pd.DataFrame({
            "run_id": run_id, "question_id": QUESTIONS * 3,
            "metric": ["recall@10"] * 8 + ["groundedness"] * 8 + ["hit@1"] * 8,
            "value": [float(v) for v in RECALL[run_id]] + grounded + [1.0] * 8,
            "error": [None] * 15 + ["judge timeout" if run_id == "llm" else None] + [None] * 8,
        })
        stage_names = ["retrieve"] + (["judge:rerank"] if mode == "llm" else [])
        stages = pd.DataFrame({
            "run_id": run_id, "question_id": np.repeat(QUESTIONS, len(stage_names)),
            "stage": stage_names * 8, "seconds": [0.010, 0.200][:len(stage_names)] * 8, "cached": False,
        })
        store.commit_shard(run_id, QUESTIONS, {"scores": scores, "stages": stages})
    return tmp_path / "results"


def _rows(text: str, first_cell: str) -> list[list[str]]:
    """The cells of the markdown table rows starting with `first_cell`."""
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]
    return [row for row in rows if row[0] == first_cell]


# The factor table's "detectable" column, after the strict and the scored difference and the signs.
MDE_COLUMN = 10


def _report(results_dir, capsys, *args) -> str:
    assert main(["report", str(results_dir), *args]) == 0
    return capsys.readouterr().out


def test_markdown_leads_with_the_factor_answers_computed_by_hand(results_dir, capsys):
    text = _report(results_dir, capsys, "--metrics", "recall@10,groundedness")
    assert text.index("## What each factor does") < text.index("## Configurations") < text.index(
        "## Single-factor pairs")
    # The reference of judge.rerank is its first level, off (named by nobody): fixed before the data.
    assert "judge.rerank: off (first level in the pairs' order" in text
    # llm vs off: per-question differences 1 x 6, 0 x 2 over 8 questions, each its own unit.
    differences = np.array([1.0] * 6 + [0.0] * 2)
    interval = stats.ttest_1samp(differences, 0.0).confidence_interval(0.95)
    judge = [row for row in _rows(text, "judge.rerank") if row[2] == "recall@10"]
    assert judge[0][:3] == ["judge.rerank", "llm vs off", "recall@10"]
    # A question failed (groundedness), so the strict difference leads; recall has no failure: equal.
    assert judge[0][3] == judge[0][6] == f"+0.750 [{interval.low:+.3f}, {interval.high:+.3f}]"
    assert judge[0][11:14] == ["6/8", "8", "0/0"]
    # beside it, the interval that agrees with p (adj.): its family (the factor table on recall@10)
    # is this one test, so the wild bootstrap's (bootstrap-t: symmetric, excluding 0 as p (adj.) < 0.05)
    low, high = (float(x) for x in judge[0][7].strip("[]").split(", "))
    assert low + high == pytest.approx(2 * 0.75, abs=1e-3) and low > 0 and float(judge[0][8]) < 0.05
    # detectable: (t(0.975, 7) + t(0.8, 7)) x the standard error of the 8 differences.
    detectable = (stats.t.ppf(0.975, 7) + stats.t.ppf(0.8, 7)) * stats.sem(differences)
    assert judge[0][MDE_COLUMN] == f"{detectable:.3f}"
    # groundedness: q8 failed in the judge's run. Equal on the 7 questions both scored (identical:
    # p 1); the strict difference scores the failure 0: -0.5 on q8, so -0.5 / 8 over 8 questions.
    grounded = next(row for row in _rows(text, "judge.rerank") if row[2] == "groundedness")
    strict = stats.ttest_1samp([0.0] * 7 + [-0.5], 0.0).confidence_interval(0.95)
    assert grounded[1] == "llm vs off" and grounded[6].startswith("+0.000")
    assert grounded[3] == f"{-0.5 / 8:+.3f} [{strict.low:+.3f}, {strict.high:+.3f}]"
    assert grounded[12:14] == ["7", "0/1"]
    # Equal on every question both scored: no spread, nothing is detectable ("-").
    assert grounded[MDE_COLUMN] == "-"
    assert "cluster-robust" in text and "over questions" in text and "the strict difference leads" in text


def test_json_carries_every_comparison_at_full_precision_with_its_family_adjustment(results_dir, capsys):
    payload = json.loads(_report(results_dir, capsys, "--format", "json", "--metrics", "recall@10,groundedness"))
    comparisons = pd.DataFrame(payload["comparisons"])
    expected = {"factor", "level_a", "level_b", "metric", "depth", "n_scored_a", "n_scored_b", "n_failed_a",
                "n_failed_b", "n_only_a", "n_only_b", "diff", "ci_low", "ci_high", "p", "p_adj", "p_note",
                "strict_diff", "strict_ci_low", "strict_ci_high", "strict_p", "strict_p_adj", "strict_p_note",
                "signs_disagree", "settings", "unit"}
    assert expected <= set(comparisons.columns)
    assert set(comparisons["kind"]) == {"factor", "pair"}
    # One family per kind and metric; a row's p and strict p in it (once where they are one test):
    # several tests, between p and Holm; one, its wild bootstrap p.
    for _, family in comparisons.groupby(["kind", "metric"]):
        p, strict_p = family["p"].to_numpy(dtype=float), family["strict_p"].to_numpy(dtype=float)
        separate = ~((family["n"] == family["n_strict"]).to_numpy() & (p == strict_p))
        tests = np.r_[p, strict_p[separate]]
        found = np.r_[family["p_adj"].to_numpy(dtype=float), family["strict_p_adj"].to_numpy(dtype=float)[separate]]
        assert (np.isnan(found) == np.isnan(tests)).all() and (family["family_tests"] == (~np.isnan(tests)).sum()).all()
        if (~np.isnan(tests)).sum() > 1:
            known = ~np.isnan(tests)
            assert (tests[known] <= found[known]).all() and (found[known] <= holm(tests)[known] * (1 + 1e-9)).all()
    for p, note in [*zip(comparisons["p"], comparisons["p_note"]),
                    *zip(comparisons["strict_p"], comparisons["strict_p_note"])]:
        assert (p is not None and not np.isnan(p) and p > 0) or note
    family = payload["family_adjustment"]
    assert family["rows"] == len(comparisons)
    assert {f["family"] for f in family["families"]} == {"factor table on recall@10", "factor table on groundedness",
                                                         "pairs on recall@10", "pairs on groundedness"}
    assert family["tests"] == sum(f["tests"] for f in family["families"]) == comparisons["family_tests"].groupby(
        [comparisons["kind"], comparisons["metric"]]).first().sum()
    factor = comparisons[(comparisons["kind"] == "factor") & (comparisons["metric"] == "groundedness")
                         & (comparisons["factor"] == "judge.rerank")].iloc[0]
    assert (factor["level_a"], factor["level_b"], factor["unit"]) == ("off", "llm", "question")
    # Full precision: -0.5 / 8 and the t interval as Python computes them, not rounded to 10 decimals.
    strict = stats.ttest_1samp([0.0] * 7 + [-0.5], 0.0)
    assert factor["strict_diff"] == -0.0625 and factor["strict_p"] == pytest.approx(strict.pvalue, rel=1e-12)
    # Alone in its family (the factor table on groundedness): its wild bootstrap p. One question
    # carries the whole difference, so every draw's |t| is the data's: p (adj.) 1.
    assert factor["family_tests"] == 1 and factor["strict_p_adj"] == 1.0
    assert factor["strict_ci_low"] == pytest.approx(strict.confidence_interval().low, rel=1e-12)
    default = ("first level in the pairs' order (off first, smaller numbers first, names alphabetically), "
               "no baseline named")
    assert sorted(payload["references"], key=lambda r: r["factor"]) == [
        {"factor": "judge.rerank", "level": "off", "source": default},
        {"factor": "top_k", "level": "5", "source": default}]
    assert payload["strict_leads"] is True and payload["partial_runs"] == []
    assert payload["unit"] == "question" and payload["metrics"] == ["recall@10", "groundedness"]
    configurations = pd.DataFrame(payload["configurations"]).set_index(["run_id", "metric"])
    assert configurations.loc[("llm", "groundedness"), ["n", "n_failed"]].tolist() == [7, 1]


def test_a_baseline_named_in_the_experiment_or_on_the_command_line_is_the_reference(results_dir, capsys):
    ResultStore(results_dir).write_baselines({}, {"judge.rerank": "llm"})
    payload = json.loads(_report(results_dir, capsys, "--format", "json", "--no-detail"))
    assert {"factor": "judge.rerank", "level": "llm", "source": "first level listed in the experiment, no baseline "
            "named"} in payload["references"]
    ResultStore(results_dir).write_baselines({"judge.rerank": "llm"}, {"judge.rerank": "off"})
    payload = json.loads(_report(results_dir, capsys, "--format", "json", "--no-detail"))
    rows = pd.DataFrame(payload["comparisons"])
    judge = rows[rows["factor"] == "judge.rerank"]
    assert set(judge["level_a"]) == {"llm"} and set(judge["level_b"]) == {"off"}
    assert {"factor": "judge.rerank", "level": "llm", "source": "named in the experiment"} in payload["references"]
    payload = json.loads(_report(results_dir, capsys, "--format", "json", "--baseline", "judge.rerank=off"))
    assert {"factor": "judge.rerank", "level": "off", "source": "named with --baseline"} in payload["references"]
    assert main(["report", str(results_dir), "--baseline", "judge.rerank=strong"]) == 2
    assert "unknown level 'strong' of judge.rerank. Valid levels: off, llm" in capsys.readouterr().err


@pytest.fixture()
def stopped_dir(tmp_path):
    """Judge off answers all 8 questions (0.5 each). The judge's run scores 1.0 on q1-q2, fails
    q3-q6 and was stopped before q7-q8."""
    store = ResultStore(tmp_path / "stopped")
    for run_id, mode in (("off", "off"), ("llm", "llm")):
        store.write_run(run_id, _run_row(run_id, mode, 5))
        asked = QUESTIONS if run_id == "off" else QUESTIONS[:6]
        values = [0.5] * 8 if run_id == "off" else [1.0, 1.0] + [np.nan] * 4
        errors = [None] * 8 if run_id == "off" else [None, None] + ["RuntimeError: judge crashed"] * 4
        scores = pd.DataFrame({"run_id": run_id, "question_id": asked, "metric": "mrr",
                               "value": values[:len(asked)], "error": errors[:len(asked)]})
        stages = pd.DataFrame({"run_id": run_id, "question_id": asked, "stage": "retrieve", "seconds": 0.01,
                               "cached": False})
        store.commit_shard(run_id, asked, {"scores": scores, "stages": stages})
    return tmp_path / "stopped"


def test_strict_statistics_sign_disagreement_and_a_stopped_run_by_hand(stopped_dir, capsys):
    payload = json.loads(_report(stopped_dir, capsys, "--format", "json", "--metrics", "mrr"))
    pair = next(row for row in payload["comparisons"] if row["kind"] == "pair")
    # Over the questions both scored (q1, q2) the judge is +0.5 better; over the six both were asked,
    # its four failures scoring 0, it is worse: (2 x 0.5 - 4 x 0.5) / 6.
    strict = np.array([0.5, 0.5, -0.5, -0.5, -0.5, -0.5])
    test = stats.ttest_1samp(strict, 0.0)
    assert (pair["diff"], pair["n"]) == (0.5, 2)
    assert pair["strict_diff"] == pytest.approx(-1 / 6, rel=1e-15) and pair["n_strict"] == 6
    assert pair["strict_p"] == pytest.approx(test.pvalue, rel=1e-12)
    assert (pair["strict_ci_low"], pair["strict_ci_high"]) == pytest.approx(tuple(test.confidence_interval()),
                                                                             rel=1e-12)
    assert pair["signs_disagree"] is True
    # Both scored values equal 0.5 - 1.0 per question: no spread, so no p (and no p = 0): a reason instead.
    assert pair["p"] is None and "zero standard error" in pair["p_note"]
    assert (pair["n_failed_a"], pair["n_failed_b"], pair["n_only_a"], pair["n_only_b"]) == (0, 4, 2, 0)
    assert payload["partial_runs"] == [{"run_id": "llm", "label": payload["partial_runs"][0]["label"],
                                        "asked": 6, "of": 8}]
    text = _report(stopped_dir, capsys, "--metrics", "mrr")
    header = next(line for line in text.splitlines() if line.startswith("Runs not asked every question"))
    assert "(llm): 6 of 8" in header
    row = _rows(text, "judge.rerank")[-1]  # the pair row; the strict difference leads (failures exist)
    assert row[4].startswith(f"{-1 / 6:+.3f}") and row[10] == "DISAGREE"


def test_no_detail_leaves_out_the_pairs_and_keeps_every_adjusted_p(results_dir, capsys):
    full = json.loads(_report(results_dir, capsys, "--format", "json"))
    short = json.loads(_report(results_dir, capsys, "--format", "json", "--no-detail"))
    assert {row["kind"] for row in short["comparisons"]} == {"factor"} and len(short["comparisons"]) < len(
        full["comparisons"])
    assert "Single-factor pairs" not in _report(results_dir, capsys, "--no-detail")
    # Every row both print has the same family, adjusted p and simultaneous interval: the family is
    # the question asked (the factor table on one metric), not what is shown.
    key = ("kind", "factor", "level_a", "level_b", "metric")
    shown = {tuple(row[k] for k in key): row for row in short["comparisons"]}
    same = [row for row in full["comparisons"] if tuple(row[k] for k in key) in shown]
    assert len(same) == len(shown)
    columns = ("family", "family_tests", "p_adj", "strict_p_adj", "sim_ci_low", "sim_ci_high")
    for row in same:
        assert [row[c] for c in columns] == [shown[tuple(row[k] for k in key)][c] for c in columns]
    # and so does the text: the factor table's rows are the same lines
    lines = [line for line in _report(results_dir, capsys).splitlines() if line.startswith("| judge.rerank | llm vs")]
    brief = [line for line in _report(results_dir, capsys, "--no-detail").splitlines()
             if line.startswith("| judge.rerank | llm vs")]
    assert brief and brief == lines[:len(brief)]


def test_html_renders_the_same_sections_to_a_file(results_dir, tmp_path, capsys):
    out = tmp_path / "r" / "report.html"
    assert main(["report", str(results_dir), "--format", "html", "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    for heading in ("What each factor does", "Configurations", "Single-factor pairs"):
        assert f"<h2>{heading}</h2>" in page


def test_a_folder_that_is_not_results_is_a_clear_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert "no results folder" in capsys.readouterr().err


def test_an_unscored_metric_lists_the_valid_ones(results_dir, capsys):
    assert main(["report", str(results_dir), "--metrics", "ndcg@10"]) == 2
    error = capsys.readouterr().err
    assert "ndcg@10" in error and "recall@10" in error


def test_a_results_folder_without_runs_says_so(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    assert "No runs" in _report(tmp_path, capsys)
    assert json.loads(_report(tmp_path, capsys, "--format", "json"))["comparisons"] == []

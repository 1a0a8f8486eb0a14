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


def _report(results_dir, capsys, *args) -> str:
    assert main(["report", str(results_dir), *args]) == 0
    return capsys.readouterr().out


def test_markdown_leads_with_the_factor_answers_computed_by_hand(results_dir, capsys):
    text = _report(results_dir, capsys, "--metrics", "recall@10,groundedness")
    assert text.index("## What each factor does") < text.index("## Configurations") < text.index(
        "## Single-factor pairs")
    # off vs llm: per-question differences 1 x 6, 0 x 2 over 8 questions, each its own unit.
    differences = np.array([1.0] * 6 + [0.0] * 2)
    interval = stats.ttest_1samp(differences, 0.0).confidence_interval(0.95)
    judge = [row for row in _rows(text, "judge.rerank") if row[2] == "recall@10"]
    assert judge[0][:3] == ["judge.rerank", "off vs llm", "recall@10"]
    assert judge[0][3] == f"+0.750 [{interval.low:+.3f}, {interval.high:+.3f}]"
    assert judge[0][5:8] == ["6/8", "0/0", "+0.750"]
    # groundedness: q8 failed in the judge's run. Scored equally elsewhere, so the judge is not the
    # best level once its failure counts (0.5 x 7 / 8 < 0.5); compared on the 7 questions both
    # scored, the failure counted, and the strict difference scoring it 0: 0.5 / 8 over 8 questions.
    grounded = next(row for row in _rows(text, "judge.rerank") if row[2] == "groundedness")
    assert grounded[1] == "llm vs off" and grounded[3].startswith("+0.000")
    assert grounded[6] == "1/0" and grounded[7] == f"{0.5 / 8:+.3f}"
    assert "cluster-robust" in text and "over questions" in text


def test_json_carries_every_comparison_unformatted_in_one_holm_family(results_dir, capsys):
    payload = json.loads(_report(results_dir, capsys, "--format", "json", "--metrics", "recall@10,groundedness"))
    comparisons = pd.DataFrame(payload["comparisons"])
    expected = {"factor", "level_a", "level_b", "metric", "depth", "n_scored_a", "n_scored_b", "n_failed_a",
                "n_failed_b", "diff", "ci_low", "ci_high", "p", "p_holm", "strict_diff", "unit"}
    assert expected <= set(comparisons.columns)
    assert set(comparisons["kind"]) == {"factor", "pair"}
    assert comparisons["p_holm"].to_numpy() == pytest.approx(holm(comparisons["p"].to_numpy(dtype=float)),
                                                             nan_ok=True)
    factor = comparisons[(comparisons["kind"] == "factor") & (comparisons["metric"] == "recall@10")
                         & (comparisons["factor"] == "judge.rerank")].iloc[0]
    assert (factor["level_a"], factor["level_b"], factor["diff"], factor["unit"]) == ("off", "llm", 0.75, "question")
    assert payload["unit"] == "question" and payload["metrics"] == ["recall@10", "groundedness"]
    configurations = pd.DataFrame(payload["configurations"]).set_index(["run_id", "metric"])
    assert configurations.loc[("llm", "groundedness"), ["n", "n_failed"]].tolist() == [7, 1]


def test_no_detail_leaves_out_the_pairs_and_shrinks_the_family(results_dir, capsys):
    full = json.loads(_report(results_dir, capsys, "--format", "json"))["comparisons"]
    short = json.loads(_report(results_dir, capsys, "--format", "json", "--no-detail"))["comparisons"]
    assert {row["kind"] for row in short} == {"factor"} and len(short) < len(full)
    assert "Single-factor pairs" not in _report(results_dir, capsys, "--no-detail")


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

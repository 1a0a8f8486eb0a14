"""`ragkit report` on a tiny results folder whose numbers are computed by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ragkit import report
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


def _write_results(root) -> None:
    store = ResultStore(root)
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


def _rows(text: str, first_cell: str) -> list[list[str]]:
    """The cells of the markdown table rows starting with `first_cell`."""
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]
    return [row for row in rows if row[0] == first_cell]


def test_report_prints_configurations_and_comparisons_by_hand(tmp_path, capsys):
    _write_results(tmp_path / "results")
    assert main(["report", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("| configuration"))
    # Default metrics: the headline and generation metrics scored, not hit@1.
    assert "recall@10 (95% CI)" in header and "groundedness (95% CI)" in header and "hit@1" not in header

    configs = {row[1]: row for row in (r for line in out.splitlines() if line.startswith("| token")
                                       for r in [[c.strip() for c in line.strip("|").split("|")]])}
    assert set(configs) == {"off", "llm", "off_k10"}
    # configuration, run, recall@10 (CI), scored/failed, groundedness (CI), scored/failed, ms/question
    assert configs["llm"][2:] == ["1.000 [1.000, 1.000]", "8/0", "0.500 [0.500, 0.500]", "7/1", "210.0"]
    assert configs["off"][2].startswith("0.250 [0.000, ") and configs["off"][3:] == [
        "8/0", "0.500 [0.500, 0.500]", "8/0", "10.0"]

    judge = _rows(out, "judge.rerank")
    top_k = _rows(out, "top_k")
    assert len(judge) == 2 and len(top_k) == 2
    # Judge on/off pairs come first, whatever order the runs are in.
    assert out.index("| judge.rerank") < out.index("| top_k")
    recall, grounded = judge
    # Differences 1,1,1,1,1,1,0,0: exact sign-flip test, 4 of 256 patterns reach +0.75 -> p = 2 * 4/256.
    # Holm over the 4 rows of the table: 4 * 0.03125 = 0.125; the others are 1.
    diffs = np.array([1.0] * 6 + [0.0] * 2)
    interval = stats.bootstrap((diffs,), np.mean, n_resamples=1000, method="percentile",
                               rng=np.random.default_rng(0)).confidence_interval
    assert recall == ["judge.rerank", "off -> llm", "off -> llm", "recall@10", "+0.750",
                      f"[{interval.low:+.3f}, {interval.high:+.3f}]", "0.031", "0.125", "6/2/0", "+200.0"]
    assert grounded == ["judge.rerank", "off -> llm", "off -> llm", "groundedness", "+0.000", "[+0.000, +0.000]",
                        "1.000", "1.000", "0/7/0", "+200.0"]
    assert [row[1] for row in top_k] == ["5 -> 10", "5 -> 10"]
    assert [row[6:9] for row in top_k] == [["1.000", "1.000", "0/8/0"]] * 2
    assert "corrected over all 4 rows" in out


def test_chosen_metrics_shrink_the_holm_family(tmp_path, capsys):
    _write_results(tmp_path / "results")
    assert main(["report", str(tmp_path / "results"), "--metrics", "recall@10"]) == 0
    out = capsys.readouterr().out
    assert "groundedness" not in out
    # Two comparisons now: 2 * 0.03125.
    assert _rows(out, "judge.rerank")[0][6:8] == ["0.031", "0.062"]


def test_html_report_to_a_file(tmp_path, capsys):
    _write_results(tmp_path / "results")
    target = tmp_path / "out" / "report.html"
    assert main(["report", str(tmp_path / "results"), "--format", "html", "--out", str(target)]) == 0
    assert str(target) in capsys.readouterr().out
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "<td>off -&gt; llm</td>" in page and "<td>+0.750</td>" in page and "<td>7/1</td>" in page


def test_a_folder_that_is_not_results_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("hello")
    assert main(["report", str(tmp_path / "notes")]) == 2
    err = capsys.readouterr().err
    assert "no results folder" in err and str(tmp_path / "notes") in err


def test_an_unscored_metric_lists_the_valid_ones(tmp_path, capsys):
    _write_results(tmp_path / "results")
    assert main(["report", str(tmp_path / "results"), "--metrics", "recall@10,faithfulness"]) == 2
    err = capsys.readouterr().err
    assert "faithfulness" in err and "Valid metrics: recall@10, hit@1, groundedness" in err


def test_a_results_folder_without_runs_says_so(tmp_path):
    (tmp_path / "runs").mkdir()
    assert "No runs in this results folder yet." in report.render_report(tmp_path)


@pytest.mark.parametrize(("rows", "warned"), [(10, False), (24, False), (25, True)])
def test_the_note_warns_when_holm_cannot_reach_significance(rows, warned):
    # The smallest resampled two-sided p is 2 / 1000; Holm multiplies it by the number of rows.
    assert ("no Holm-corrected p can fall below 0.05" in report._comparison_note(rows)) is warned


def test_a_metric_every_question_failed_shows_no_mean_and_the_failures():
    from ragkit.analysis import Results

    runs = pd.DataFrame({"run_id": ["r"], "label": ["token · - · bm25 · k=5"]})
    scores = pd.DataFrame({"run_id": "r", "question_id": ["q1", "q2"], "metric": "groundedness",
                           "value": np.nan, "error": "judge timeout"})
    stages = pd.DataFrame({"run_id": pd.Series(dtype="string"), "question_id": pd.Series(dtype="string"),
                           "stage": pd.Series(dtype="string"), "seconds": pd.Series(dtype="float64")})
    table = report.configuration_table(Results(runs, scores, pd.DataFrame(), stages), ["groundedness"])
    assert table.iloc[0].tolist() == ["token · - · bm25 · k=5", "r", "-", "0/2", "-"]

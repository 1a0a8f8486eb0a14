"""Full shared benchmarks through the real pipeline: numbers comparable with plain tools.

SciFact reference numbers measured on these machines with plain tools (bm25s with English
stemming and stop words 0.686, LanceDB FTS 0.684, raw MiniLM + numpy 0.645, RRF of the two
0.716); each bound below is that number minus 0.01. Embedding the 5,183 abstracts takes about
5 minutes on 2 cores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ragkit.experiments.config import load_config
from ragkit.experiments.runner import run_experiment
from ragkit.results import ResultStore
from tests.conftest import require_shared_dataset

pytestmark = [pytest.mark.slow, pytest.mark.benchmark]

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _runs_with_mean(out: Path, metric: str) -> list[dict]:
    """The runs table as records, each with the mean of ``metric`` over questions."""
    store = ResultStore(out)
    scores = store.read("scores")
    means = scores[scores["metric"] == metric].groupby("run_id")["value"].mean()
    return [{**row, "mean": means[row["run_id"]]} for row in store.read("runs").to_dict("records")]


def test_scifact_ndcg_at_10_matches_plain_tools(tmp_path):
    beir = require_shared_dataset("scifact") / "beir"
    config = load_config(EXPERIMENTS / "scifact.yaml", [f"dataset.path={beir}"])
    run_experiment(config, tmp_path / "out")
    ndcg = {run["retriever"]: run["mean"] for run in _runs_with_mean(tmp_path / "out", "ndcg@10")}
    print(f"SciFact ndcg@10: {ndcg}")
    assert ndcg["bm25"] >= 0.676
    assert ndcg["dense"] >= 0.635
    assert ndcg["hybrid"] >= 0.706


def test_covidqa_span_recall_differs_between_256_and_1024_token_chunks(tmp_path):
    covidqa = require_shared_dataset("covidqa")
    config = load_config(EXPERIMENTS / "covidqa_chunk_sizes.yaml", [f"dataset.path={covidqa}"])
    run_experiment(config, tmp_path / "out")
    by_size = {run["chunker.chunk_size"]: run["mean"] for run in _runs_with_mean(tmp_path / "out", "span_recall@5")}
    print(f"COVID-QA span_recall@5 by chunk size: {by_size}")
    assert set(by_size) == {256, 1024}
    assert abs(by_size[256] - by_size[1024]) > 0.01

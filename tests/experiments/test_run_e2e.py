"""End to end on the bundled sample: real chunkers, real MiniLM, real LanceDB, real results.

The data directory is shared within this module so the sample is embedded once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.results import ResultStore

pytestmark = pytest.mark.integration

SAMPLE_DATASET = Path(__file__).resolve().parents[2] / "datasets" / "covidqa_sample"

SMALL = {
    "name": "small",
    "dataset": {"path": str(SAMPLE_DATASET), "format": "squad", "limit": 24},
    "chunkers": [{"type": "token", "params": {"chunk_size": 256, "chunk_overlap": 32}}, "recursive"],
    "retrievers": ["bm25", "dense"],
    "top_k": [5],
    "shard_size": 8,
}


@pytest.fixture(scope="module")
def shared_data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("shared-data")


@pytest.fixture(autouse=True)
def use_shared_data_dir(shared_data_dir, monkeypatch):
    from ragkit.settings import get_settings

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(shared_data_dir))
    get_settings.cache_clear()


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame.sort_values(keys).reset_index(drop=True)


def test_run_then_rerun_computes_nothing(tmp_path):
    config = config_from_dict(SMALL)
    first = run_experiment(config, tmp_path / "out")
    assert first.runs_total == 4 and first.runs_computed == 4
    assert first.chunks_embedded > 0
    store = ResultStore(tmp_path / "out")
    scores = store.read("scores")
    assert scores.groupby("run_id")["question_id"].nunique().tolist() == [24] * 4
    assert {"recall@5", "ndcg@5", "mrr", "span_recall@5", "span_mrr"} <= set(scores["metric"])
    assert scores["error"].isna().all()
    # every retrieved chunk is an exact span of its document: offsets inside the document
    retrievals = store.read("retrievals")
    assert (retrievals["end_char"] > retrievals["start_char"]).all()
    assert retrievals.groupby(["run_id", "question_id"])["rank"].max().max() == 5

    second = run_experiment(config, tmp_path / "out")
    assert second.nothing_to_do and second.chunks_embedded == 0 and second.questions_computed == 0
    pd.testing.assert_frame_equal(
        _sorted(store.read("scores"), ["run_id", "question_id", "metric"]),
        _sorted(scores, ["run_id", "question_id", "metric"]),
    )


def test_same_chunks_are_not_embedded_again_in_another_experiment(tmp_path):
    run_experiment(config_from_dict(SMALL), tmp_path / "a")
    other = config_from_dict({**SMALL, "name": "other", "retrievers": ["hybrid"], "top_k": [3]})
    report = run_experiment(other, tmp_path / "b")
    assert report.runs_computed == 2 and report.chunks_embedded == 0


def test_kill_minus_9_then_resume_equals_an_uninterrupted_run(tmp_path):
    config = {**SMALL, "dataset": {**SMALL["dataset"], "limit": 60}, "shard_size": 4}
    # Warm the caches so the interrupted run spends its time answering questions.
    reference = tmp_path / "reference"
    run_experiment(config_from_dict(config), reference)

    config_path = tmp_path / "e.yaml"
    config_path.write_text(yaml.safe_dump(config))
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "ragkit.cli", "run", str(config_path), "--out", str(out), "--quiet"]
    process = subprocess.Popen(command, env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    commits = out / "_commits"
    while time.time() < deadline and process.poll() is None:
        if commits.exists() and len(list(commits.glob("*.json"))) >= 3:
            break
        time.sleep(0.05)
    assert process.poll() is None, "the run finished before it could be killed; make it longer"
    process.send_signal(signal.SIGKILL)
    process.wait()
    partial = ResultStore(out).read("scores")
    assert 0 < partial["question_id"].nunique() or len(partial) > 0

    subprocess.run(command, env=os.environ.copy(), check=True, stdout=subprocess.DEVNULL)
    keys = ["run_id", "question_id", "metric"]
    resumed = _sorted(ResultStore(out).read("scores"), keys)
    assert not resumed.duplicated(keys).any()
    pd.testing.assert_frame_equal(resumed, _sorted(ResultStore(reference).read("scores"), keys))

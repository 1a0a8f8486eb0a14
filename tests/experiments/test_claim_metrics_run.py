"""The claim-level metrics inside a run, against the fake Ollama server: the evaluation role
is resolved for them, their calls go through the run's LLM client under ``eval:<metric>``, an
unusable verdict is a NaN row with the reason (never 0), and `ragkit failures` carries them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ragkit.cli import main
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.results import ResultStore
from tests.experiments.test_dead_llm import experiment
from tests.llms.fake_ollama import FIRST_DIGEST, FakeOllama

pytestmark = pytest.mark.integration

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "covidqa_sample"
ASKED = 3


def small_sample(folder: Path) -> Path:
    """The bundled sample's first questions: each has an answer span, the reference answer."""
    folder.mkdir(parents=True)
    shutil.copy(SAMPLE / "corpus.jsonl", folder / "corpus.jsonl")
    lines = (SAMPLE / "questions.jsonl").read_text(encoding="utf-8").splitlines()[:ASKED]
    (folder / "questions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.fixture
def server():
    fake = FakeOllama().start()
    yield fake
    fake.stop()


def test_a_run_scores_the_claim_metrics_through_the_evaluation_llm(tmp_path, server, capsys):
    metrics = ["context_utilization", "noise_sensitivity"]
    config = config_from_dict(experiment(small_sample(tmp_path / "sample"), server.url, top_k=[1],
                                         evaluation={"metrics": metrics}))
    run_experiment(config, tmp_path / "out")
    store = ResultStore(tmp_path / "out")
    runs = store.read("runs")
    assert runs["llm_digest.evaluation"].tolist() == runs["llm_digest.generator"].tolist() == [FIRST_DIGEST]
    scores = store.read("scores")
    claims = scores[scores["metric"].isin(metrics)]
    assert len(claims) == 2 * ASKED
    # The fake answers a verdict schema with {"score": 90, ...}: no "supported", so every row is
    # NaN with the reason quoting the reply, and none is 0.
    assert claims["value"].isna().all()
    assert claims["error"].str.startswith("unparseable judge reply for claim").all()
    assert claims["error"].str.contains('"score": 90').all()
    assert sum(body["path"] == "/api/chat" and "Statement:" in body["messages"][-1]["content"]
               for body in server.requests) > 0

    assert main(["failures", str(tmp_path / "out"), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == ASKED
    assert all(set(metrics) <= set(row) and row["context_utilization"] is None for row in rows)

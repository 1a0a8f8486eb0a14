"""The exported pipeline, run in a subprocess over the bundled sample, retrieves what its run did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.cli import main
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.pipeline_export import config_from_run_row, read_run_config
from ragkit.qa import load_question_set
from ragkit.results import ResultStore

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "datasets" / "covidqa_sample"


def test_exported_pipelines_retrieve_the_runs_chunks_in_the_same_order(tmp_path):
    config = config_from_dict({
        "name": "export", "dataset": {"path": str(SAMPLE), "format": "squad", "limit": 3},
        "chunkers": [{"type": "recursive", "params": {"chunk_size": 1000, "chunk_overlap": 100}}],
        "embedders": ["minilm"], "retrievers": ["bm25", "dense"], "top_k": [5],
    })
    out = tmp_path / "out"
    run_experiment(config, out)
    store = ResultStore(out)
    runs = store.read("runs")
    retrievals = store.read("retrievals")
    questions = {q.id: q.text for q in load_question_set(str(SAMPLE), format="squad", limit=3).questions}
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert set(runs["retriever"]) == {"bm25", "dense"}
    for run in runs.itertuples():
        app = tmp_path / f"app_{run.retriever}.py"
        assert main(["export-pipeline", str(out), run.run_id, "--out", str(app)]) == 0
        done = subprocess.run([sys.executable, str(app), str(SAMPLE), *questions.values(), "--json"],
                              capture_output=True, text=True, env=environment, timeout=600, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        # The same documents and every parameter pinned: the pipeline's run id is the run's own.
        assert "note: this pipeline's run id" not in done.stderr
        replies = [json.loads(line) for line in done.stdout.splitlines()]
        for question_id, reply in zip(questions, replies):
            expected = retrievals[(retrievals["run_id"] == run.run_id) & (retrievals["question_id"] == question_id)]
            expected = expected.sort_values("rank")
            assert len(expected) == 5
            assert [(c["doc_id"], c["start_char"], c["end_char"]) for c in reply["chunks"]] == \
                list(zip(expected["doc_id"], expected["start_char"].astype(int), expected["end_char"].astype(int)))


def test_the_run_row_reads_back_as_its_configuration(tmp_path):
    row = {"run_id": "r", "chunker": "token", "chunker.chunk_size": 128, "chunker.chunk_overlap": 16,
           "embedder": None, "retriever": "bm25", "retriever.top_k": 3, "top_k": 3, "judge.rerank": "heuristic",
           "judge.rerank.top_n": 2, "generator": True, "llm.generator": "ollama:qwen2.5:3b", "depth": 2}
    config = config_from_run_row(row)
    assert config["chunkers"] == [{"type": "token", "params": {"chunk_size": 128, "chunk_overlap": 16}}]
    assert config["embedders"] == [] and config["top_k"] == 3
    assert config["judges"] == {"rerank": {"mode": ["heuristic"], "params": {"top_n": 2}}}
    # The model name keeps its own colons.
    assert config["llm"] == {"roles": {"generator": {"type": "ollama", "params": {"model": "qwen2.5:3b"}}}}


def test_an_unknown_run_is_a_one_line_error(tmp_path, capsys):
    config = config_from_dict({"name": "x", "dataset": {"path": str(SAMPLE), "format": "squad", "limit": 1},
                               "chunkers": [{"type": "token", "params": {"chunk_size": 512}}],
                               "embedders": [], "retrievers": ["bm25"], "top_k": [3]})
    run_experiment(config, tmp_path / "out")
    assert main(["export-pipeline", str(tmp_path / "out"), "nope", "--out", str(tmp_path / "a.py")]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    run_id = ResultStore(tmp_path / "out").read("runs")["run_id"].iloc[0]
    assert read_run_config(tmp_path / "out", run_id)["retrievers"][0]["type"] == "bm25"

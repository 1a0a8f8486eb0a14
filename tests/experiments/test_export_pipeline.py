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
from ragkit.pipeline.export import config_from_run_row, read_run_config
from ragkit.questions import load_question_set
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


def _bm25_run(tmp_path, **extra):
    config = config_from_dict({
        "name": "export", "dataset": {"path": str(SAMPLE), "format": "squad", "limit": 1},
        "chunkers": [{"type": "token", "params": {"chunk_size": 256, "chunk_overlap": 0}}],
        "embedders": [], "retrievers": ["bm25"], "top_k": [3], **extra,
    })
    out = tmp_path / "out"
    run_experiment(config, out)
    return out, str(ResultStore(out).read("runs")["run_id"].iloc[0])


def _run_app(app: Path, *arguments: str, monkeypatch, capsys) -> tuple[str, str]:
    """The exported module's main, in this process (so a test's scripted backend is registered)."""
    import runpy

    monkeypatch.setattr(sys, "argv", [str(app), *arguments])
    runpy.run_path(str(app), run_name="__main__")
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_an_app_without_a_generator_says_it_is_retrieval_only_and_where_its_data_is(tmp_path, capsys, monkeypatch):
    from ragkit.settings import get_settings

    out, run_id = _bm25_run(tmp_path)
    app = tmp_path / "app.py"
    assert main(["export-pipeline", str(out), run_id, "--out", str(app)]) == 0
    assert "retrieval only: this run had no generator (use --generator)" in capsys.readouterr().out
    stdout, stderr = _run_app(app, str(SAMPLE), "What is MERS?", monkeypatch=monkeypatch, capsys=capsys)
    assert stdout.startswith("retrieval only: this run had no generator (use --generator)\n")
    assert "  #1 " in stdout and "answer:" not in stdout
    assert f"data directory: {get_settings().resolved_data_dir()}" in stderr


def test_generator_adds_one_that_answers(tmp_path, capsys, monkeypatch):
    from ragkit.llms.base import llms
    from tests.factories import scripted_llm_class

    out, run_id = _bm25_run(tmp_path)
    app = tmp_path / "app.py"
    with llms.registered("scripted", scripted_llm_class()):
        assert main(["export-pipeline", str(out), run_id, "--out", str(app), "--generator", "scripted"]) == 0
        assert "answers with scripted" in capsys.readouterr().out
        stdout, stderr = _run_app(app, str(SAMPLE), "What is MERS?", "--json", monkeypatch=monkeypatch,
                                  capsys=capsys)
    reply = json.loads(stdout.splitlines()[-1])
    assert reply["answer"] == "ok" and len(reply["chunks"]) == 3 and "note" not in reply
    # Another configuration than the run's: its run id is not compared with the run's.
    assert "note: this pipeline's run id" not in stderr


def test_generator_without_a_model_keeps_the_runs_own_and_a_bad_backend_is_refused(tmp_path, capsys):
    from ragkit.pipeline.export import with_generator

    own = {"generator": True, "llm": {"roles": {"generator": {"type": "ollama", "params": {"model": "m"}}}}}
    assert with_generator(own, "") == own
    assert with_generator({"generator": False}, "")["generator"] is True
    assert with_generator({}, "ollama:qwen2.5:3b")["llm"]["roles"]["generator"] == \
        {"type": "ollama", "params": {"model": "qwen2.5:3b"}}
    out, run_id = _bm25_run(tmp_path)
    assert main(["export-pipeline", str(out), run_id, "--out", str(tmp_path / "a.py"), "--generator", "nope"]) == 2
    assert "unknown LLM backend 'nope'. Valid backends:" in capsys.readouterr().err


@pytest.mark.slow
def test_the_exported_app_answers_with_the_embedded_model(tmp_path, local_backend):
    out, run_id = _bm25_run(tmp_path)
    app = tmp_path / "app.py"
    assert main(["export-pipeline", str(out), run_id, "--out", str(app), "--generator", "local"]) == 0
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(app), str(SAMPLE), "What is MERS-CoV?", "--json"],
                          capture_output=True, text=True, env=environment, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout.splitlines()[-1])
    assert isinstance(reply["answer"], str) and reply["answer"].strip()
    assert "data directory:" in done.stderr

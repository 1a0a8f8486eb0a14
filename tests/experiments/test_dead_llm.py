"""A dead or slow LLM, against the fake Ollama server: down at start, gone mid-run, too slow.

Down at start is one clear error and nothing written. Gone mid-run stops the run with what it
finished committed and no row for what it could not reach (a dead server says nothing about a
configuration), and a re-run finishes with the tables of an uninterrupted run. Too slow is a
failed call: retried, then the question's error rows, as any failed call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from ragkit.cli import main
from ragkit.corpus.store import CorpusStore
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.executor import RunStopped
from ragkit.experiments.runner import run_experiment
from ragkit.results import ResultStore
from ragkit.settings import get_settings
from tests.factories import tiny_experiment, write_beir
from tests.llms.fake_ollama import FakeOllama
from tests.llms.test_ollama_backend import free_port_url

pytestmark = pytest.mark.integration

# What a table holds about the questions, without what depends on when and how it was computed.
TIMING_FREE = {
    "scores": ["run_id", "question_id", "metric", "value", "error"],
    "retrievals": ["run_id", "question_id", "rank", "chunk_id", "doc_id", "start_char", "end_char", "score"],
    "answers": ["run_id", "question_id", "answer", "citations", "contexts", "prompt", "valid", "error"],
    "judgements": ["run_id", "question_id", "judge", "decision", "raw_reply", "valid", "error", "fell_back"],
    "stages": ["run_id", "question_id", "stage"],
}


# "animal" is in every document and question, so bm25 ranks every document and the two runs'
# prompts (top 1 and top 2 chunks) differ for every question: no run is served the other's reply.
DOCS = {"d1": "The cat is an animal that purrs.", "d2": "The dog is an animal that barks.",
        "d3": "The cow is an animal that moos."}
QUESTIONS = {"q1": ("which animal purrs", "d1"), "q2": ("which animal barks", "d2"), "q3": ("which animal moos", "d3")}


@pytest.fixture
def server():
    fake = FakeOllama().start()
    yield fake
    fake.stop()


def experiment(dataset: Path, url: str, **extra: Any) -> dict[str, Any]:
    """Two runs (top_k 1 and 2) answering three questions, in shards of two."""
    ollama = {"base_url": url, "model": "fake-model", "max_retries": 1, "retry_backoff_s": 0.01, "timeout_s": 5}
    return tiny_experiment(dataset, "dead-llm", **{"top_k": [1, 2], "generator": True, "shard_size": 2,
                                                   "llm": {"default": {"type": "ollama", "params": ollama}}, **extra})


def table(out: Path, name: str) -> pd.DataFrame:
    frame = ResultStore(out).read(name)[TIMING_FREE[name]]
    return frame.sort_values(TIMING_FREE[name][:4]).reset_index(drop=True).astype(str)


def test_ollama_down_at_start_is_one_line_naming_the_url_and_nothing_is_written(tmp_path, capsys, isolated_data_dir):
    url = free_port_url()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cats.txt").write_text(DOCS["d1"], encoding="utf-8")
    config = experiment(write_beir(tmp_path / "beir", DOCS, QUESTIONS), url, corpus={"path": str(docs)})
    path = tmp_path / "down.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML

    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: LLM for generator: Ollama is not reachable at {url}") and err.count("\n") == 1
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()
    assert CorpusStore().list() == []  # checked before the corpus is even ingested
    assert not (isolated_data_dir / "llm_cache").exists()


def test_a_backend_gone_mid_run_stops_commits_what_it_finished_and_a_rerun_equals_an_uninterrupted_run(
        tmp_path, server, monkeypatch):
    config = config_from_dict(experiment(write_beir(tmp_path / "beir", DOCS, QUESTIONS), server.url))
    out = tmp_path / "out"
    # Run 1 answers its shards [q1, q2] and [q3]; run 2 answers q1, then the server is gone for q2.
    server.chats_before_down = 4

    with pytest.raises(RunStopped) as stopped:
        run_experiment(config, out)
    message = str(stopped.value)
    assert message == (f"stopped: the ollama backend at {server.url} is unreachable; 4 of 6 questions (2 run(s) x 3) "
                       f"are committed in {out}; start it and run the same experiment again to resume")
    store = ResultStore(out)
    assert sorted(len(ids) for ids in store.completed_questions().values()) == [1, 3]
    scores = store.read("scores")
    assert scores["error"].isna().all()  # no error row for the questions it could not reach
    assert len(store.read("answers")) == 4 and store.read("answers")["valid"].all()

    server.start()  # Ollama is back, at the same URL
    report = run_experiment(config, out)
    assert report.questions_computed == 2 and server.chats == 6  # only the two missing answers are asked for

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "fresh-data"))  # no cache: the backend answers all
    get_settings.cache_clear()
    run_experiment(config, tmp_path / "uninterrupted")
    assert server.chats == 12
    for name in TIMING_FREE:
        pd.testing.assert_frame_equal(table(out, name), table(tmp_path / "uninterrupted", name))


def test_a_backend_gone_inside_a_library_that_catches_everything_still_stops_the_run(tmp_path, server):
    """ragas turns any exception into a NaN with its reason: the client remembers the outage."""
    config = config_from_dict(experiment(write_beir(tmp_path / "beir", DOCS, QUESTIONS), server.url, top_k=[2],
                                         evaluation={"metrics": ["faithfulness"], "timeout_s": 20}))
    out = tmp_path / "out"
    server.chats_before_down = 1  # q1's answer; faithfulness' calls are refused

    with pytest.raises(RunStopped, match="0 of 3 questions"):
        run_experiment(config, out)
    assert ResultStore(out).completed_questions() == {}

    server.start()
    run_experiment(config, out)
    scores = ResultStore(out).read("scores")
    assert set(scores["question_id"]) == {"q1", "q2", "q3"}
    assert not scores["error"].fillna("").str.contains("reachable").any()


def test_replies_slower_than_the_timeout_are_retried_then_each_question_has_its_error_rows(tmp_path, server):
    config = experiment(write_beir(tmp_path / "beir", DOCS, QUESTIONS), server.url, top_k=[2],
                        judges={"groundedness": "llm"})
    config["llm"]["default"]["params"].update(timeout_s=0.2, max_retries=1)
    server.delay_s = 1.0
    out = tmp_path / "out"

    report = run_experiment(config_from_dict(config), out)
    assert report.questions_computed == 3
    assert server.chats == 3 * 2  # each question's answer: first attempt and one retry, then given up
    reason = f"Ollama at {server.url} did not answer within timeout_s=0.2 (2 attempts)"
    answers = ResultStore(out).read("answers")
    assert len(answers) == 3 and not answers["valid"].any()
    assert answers["error"].str.startswith(reason).all()
    scores = ResultStore(out).read("scores")
    groundedness = scores[scores["metric"] == "groundedness"]
    assert len(groundedness) == 3 and groundedness["value"].isna().all()
    assert groundedness["error"].str.contains(reason, regex=False).all()


def test_the_cli_says_a_stopped_run_is_resumable_in_one_line_and_exits_3(tmp_path, server, capsys):
    path = tmp_path / "dead.yaml"
    path.write_text(json.dumps(experiment(write_beir(tmp_path / "beir", DOCS, QUESTIONS), server.url)),
                    encoding="utf-8")
    out = tmp_path / "out"
    server.chats_before_down = 4

    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith(f"error: stopped: the ollama backend at {server.url} is unreachable; 4 of 6 questions")
    assert err.rstrip().endswith("run the same experiment again to resume")

    server.start()
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    assert sorted(len(ids) for ids in ResultStore(out).completed_questions().values()) == [3, 3]

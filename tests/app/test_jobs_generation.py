"""Question-generation jobs: `ragkit questions generate` in a background child, talking to a
scripted Ollama-speaking server (tests/llms/fake_ollama.py), followed through its status file."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ragkit.app.jobs import JobInfo, JobManager
from ragkit.errors import ConfigError
from tests.conftest import SAMPLE_DATASET
from tests.questions.generation_helpers import scripted_ollama_server

pytestmark = pytest.mark.integration


@pytest.fixture
def scripted_ollama(monkeypatch):
    """The default backend (Ollama when it answers) is this scripted server, for children too."""
    with scripted_ollama_server(monkeypatch) as fake:
        yield fake


def _wait_for(manager: JobManager, job_id: str, timeout: float = 120.0) -> JobInfo:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = manager.get(job_id)
        if info.state not in ("queued", "running"):
            return info
        time.sleep(0.1)
    raise AssertionError(f"job still {info.state} after {timeout} s\n{info.log_tail}")


def test_a_generation_job_runs_the_cli_to_a_set_with_progress_in_calls(scripted_ollama, tmp_path):
    manager = JobManager()
    out = tmp_path / "generated"
    job = manager.start_generation(str(SAMPLE_DATASET), out, n=4, types=["factoid"], seed=1, embeddings=False)

    info = _wait_for(manager, job.job_id)

    assert info.state == "done", info.log_tail
    assert info.kind == "questions" and info.experiment == "generated"
    assert info.done == info.total == 4 == scripted_ollama.chats  # one status step per LLM call
    assert job.command[3:5] == ["questions", "generate"]
    rows = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    documents = {d["_id"]: d["text"] for d in map(json.loads, (out / "corpus.jsonl").read_text().splitlines())}
    assert len(rows) == 4
    assert info.outcome["summary"] == "kept 4 of 4 (100%): poor yield (fewer than 30 questions)"
    assert info.state_text() == f"done · {info.outcome['summary']}"
    for row in rows:  # the library did the work: exact, verified spans
        assert documents[row["doc_id"]][row["answer_start"]:row["answer_end"]] == row["answer"]


def test_a_failing_generation_job_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGKIT_OLLAMA_URL", "http://127.0.0.1:9")  # nothing answers: the embedded model
    manager = JobManager()
    job = manager.start_generation(str(SAMPLE_DATASET), tmp_path / "out", n=2, types=["factoid"], llm="ollama",
                                   embeddings=False)

    info = _wait_for(manager, job.job_id)

    assert info.state == "failed"
    assert "Ollama" in (info.error or "") + info.log_tail
    assert not (tmp_path / "out" / "questions.jsonl").exists()


@pytest.mark.parametrize(("values", "message"), [
    ({"n": 0}, "--n 0"),
    ({"types": ["trivia"]}, "trivia"),
    ({"llm": "gpt-9"}, "unknown llm 'gpt-9'"),
])
def test_bad_generation_values_start_nothing(tmp_path, values, message):
    manager = JobManager()
    arguments = {"n": 3, "types": ["factoid"], **values}

    with pytest.raises(ConfigError, match=message):
        manager.start_generation(str(SAMPLE_DATASET), tmp_path / "out", **arguments)

    assert list(manager.jobs_dir.iterdir()) == []


def test_an_existing_set_is_not_overwritten(tmp_path):
    existing = tmp_path / "set"
    existing.mkdir()
    (existing / "questions.jsonl").write_text("{}\n")
    manager = JobManager()

    with pytest.raises(ConfigError, match="already holds a question set"):
        manager.start_generation(str(SAMPLE_DATASET), existing, n=3, types=["factoid"])

    assert list(manager.jobs_dir.iterdir()) == [] and (existing / "questions.jsonl").read_text() == "{}\n"


def test_job_records_written_before_generation_jobs_read_as_runs(tmp_path):
    manager = JobManager()
    folder = manager.jobs_dir / "old-job"
    folder.mkdir()
    (folder / "job.json").write_text(json.dumps({"job_id": "old-job", "experiment": "e", "out_dir": str(tmp_path),
                                                 "created": "2026-01-01T00:00:00Z", "pid": 999999,
                                                 "command": ["x"]}))

    assert manager.get("old-job").kind == "run"
    assert Path(manager.get("old-job").out_dir) == tmp_path

"""Progress that tells the truth: an index build says its chunks embedded of the total, the rate and
the ETA (``status.BuildProgress``), in the status file the Runs page reads, and the executor
reports the build's start and end; the questions ETA is not extrapolated while a build runs."""

from __future__ import annotations

import json

import pytest

from ragkit.experiments.status import BuildProgress, StatusWriter, clock_text, read_status
from tests.doubles import FakeClock

pytestmark = pytest.mark.unit


def test_a_build_says_chunks_embedded_of_the_total_the_rate_and_the_eta():
    clock = FakeClock(now=100.0)
    builds = BuildProgress(indexes_to_build=6, clock=clock)
    assert builds.text() is None
    assert builds.event("index_started", 6742)
    builds.event("index_built", 1)
    builds.event("index_started", 6742)
    clock.now += 27.4
    builds.event("embedded", 1234)
    # 1,234 chunks in 27.4 s: 45/s; 5,508 left: 122 s.
    assert builds.text() == "building index 2 of 6: 1,234 of 6,742 chunks embedded, 45/s, ETA 2:02"
    assert not builds.event("questions", 3)
    builds.event("index_built", 1)
    assert builds.text() is None


def test_embedding_without_a_start_event_is_followed_all_the_same():
    clock = FakeClock(now=100.0)
    builds = BuildProgress(clock=clock)
    builds.event("embedded", 10)
    clock.now += 2
    builds.event("embedded", 10)
    assert builds.text() == "embedding: 20 chunks embedded, 10/s"


def test_clock_text():
    assert clock_text(110) == "1:50"
    assert clock_text(3977) == "1:06:17"


def test_the_status_file_carries_the_build_and_the_job_drops_the_question_eta(tmp_path, monkeypatch):
    from ragkit.app.jobs import JobManager

    monkeypatch.setattr("ragkit.app.jobs._process_alive", lambda pid: True)

    manager = JobManager(tmp_path / "jobs")
    job = manager.jobs_dir / "j1"
    job.mkdir(parents=True)
    (job / "job.json").write_text(json.dumps({"job_id": "j1", "experiment": "e", "out_dir": str(tmp_path),
                                              "created": "2026-01-01T00:00:00+00:00", "pid": 0, "command": []}))
    status = StatusWriter(job / "status.json", total=100)
    status.advance(9)
    status.describe("building index 1 of 2: 10 of 20 chunks embedded, 5/s, ETA 0:02")
    assert read_status(job / "status.json")["detail"].startswith("building index 1 of 2")
    info = manager.get("j1")
    assert info.detail == "building index 1 of 2: 10 of 20 chunks embedded, 5/s, ETA 0:02"
    assert info.eta_s is None
    status.describe(None)
    info = manager.get("j1")
    assert info.detail is None and info.eta_s is not None
    status.finish()
    assert read_status(job / "status.json")["detail"] is None


@pytest.mark.integration
def test_the_executor_reports_each_index_build_with_its_chunks(tmp_path):
    from ragkit.experiments.config import config_from_dict
    from ragkit.experiments.runner import run_experiment

    dataset = tmp_path / "dataset"
    dataset.mkdir()
    texts = {"d1": "Coronaviruses are enveloped RNA viruses. " * 20, "d2": "Bats host many viruses. " * 20}
    (dataset / "corpus.jsonl").write_text("".join(json.dumps({"_id": doc, "title": doc, "text": text}) + "\n"
                                                  for doc, text in texts.items()))
    (dataset / "questions.jsonl").write_text(json.dumps({
        "id": "q1", "question": "What hosts viruses?", "answer": "Bats", "answer_start": 0, "answer_end": 4,
        "doc_id": "d2"}) + "\n")
    config = config_from_dict({
        "name": "progress", "dataset": {"path": str(dataset), "format": "squad"},
        "chunkers": [{"type": "token", "params": {"chunk_size": 64, "chunk_overlap": 0}}],
        "embedders": ["minilm"], "retrievers": ["dense"], "top_k": [3],
    })
    events: list[tuple[str, int]] = []
    run_experiment(config, tmp_path / "out", progress=lambda event, amount: events.append((event, amount)))
    names = [event for event, _ in events]
    started, built = names.index("index_started"), names.index("index_built")
    assert started < names.index("embedded") < built
    assert ("questions", 1) in events[built:]
    embedded = sum(amount for event, amount in events if event == "embedded")
    assert 0 < embedded <= events[started][1]  # the distinct chunk texts of the index, none cached yet

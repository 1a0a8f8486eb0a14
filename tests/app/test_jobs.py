"""Background jobs: a real `ragkit run` child on a tiny BEIR folder, bm25 only (no model to load)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from ragkit.app.jobs import Job, JobInfo, JobManager, _process_alive
from ragkit.errors import ConfigError
from ragkit.results import ResultStore
from tests.factories import tiny_experiment
from tests.held_run import child_env, hold_after, wait_until_held

TOPICS = ["llamas graze on high plains", "alpacas grow soft fleece", "camels store fat in humps",
          "vicunas live in the andes", "guanacos are wild camelids", "dromedaries have one hump"]


def _write_beir(folder: Path, questions: int) -> Path:
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w") as corpus:
        for i, text in enumerate(TOPICS):
            corpus.write(json.dumps({"_id": f"d{i}", "title": text.split()[0], "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w") as queries:
        for q in range(questions):
            queries.write(json.dumps({"_id": f"q{q}", "text": f"which animal: {TOPICS[q % len(TOPICS)]}"}) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"q{q}\td{q % len(TOPICS)}\t1" for q in range(questions)]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return folder


def _wait_for(manager: JobManager, job_id: str, states: tuple[str, ...], timeout: float = 120.0) -> JobInfo:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = manager.get(job_id)
        if info.state in states:
            return info
        time.sleep(0.1)
    raise AssertionError(f"job did not reach {states} in {timeout} s: {info.state}\n{info.log_tail}")


def _wait_for_exit(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while _process_alive(pid):
        assert time.monotonic() < deadline, f"process {pid} still alive after {timeout} s"
        time.sleep(0.05)


@pytest.mark.integration
def test_job_runs_to_done_in_the_background(tmp_path):
    manager = JobManager()
    job = manager.start(tiny_experiment(_write_beir(tmp_path / "beir", questions=4)), out_dir=tmp_path / "out")
    assert manager.get(job.job_id).state in ("queued", "running", "done")

    info = _wait_for(manager, job.job_id, ("done", "failed", "interrupted"))

    assert info.state == "done", info.log_tail
    assert info.done == info.total == 2 * 4 and info.unit == "questions"  # two top_k values x four questions
    assert info.error is None and info.eta_s is None and info.elapsed_s >= 0
    _wait_for_exit(job.pid)  # the status says done just before the child prints its summary
    scores = ResultStore(tmp_path / "out").read("scores")
    assert not scores.empty and set(scores["question_id"]) == {"q0", "q1", "q2", "q3"}
    assert [i.job_id for i in manager.list()] == [job.job_id]
    folder = manager.jobs_dir / job.job_id
    assert {p.name for p in folder.iterdir()} >= {"config.yaml", "job.json", "status.json", "log.txt"}


@pytest.mark.integration
def test_cancelled_job_resumes_without_duplicate_rows(tmp_path, monkeypatch):
    manager = JobManager()
    # The child holds after 3 of its 240 one-question shards (tests/child_hooks): cancelled mid-run.
    config = tiny_experiment(_write_beir(tmp_path / "beir", questions=120), shard_size=1)
    held = tmp_path / "held"
    with monkeypatch.context() as patch:
        for name, value in child_env(RAGKIT_TEST_HOLD_AFTER=hold_after(3, held)).items():
            patch.setenv(name, value)
        job = manager.start(config, out_dir=tmp_path / "out")
    wait_until_held(held, lambda: manager.get(job.job_id).state in ("queued", "running"),
                    lambda: manager.get(job.job_id).log_tail)

    cancelled = manager.cancel(job.job_id)

    assert cancelled.state == "cancelled" and cancelled.eta_s is None
    assert not _process_alive(job.pid)
    assert manager.get(job.job_id).state == "cancelled"
    partial = ResultStore(tmp_path / "out").read("scores")
    assert partial["question_id"].nunique() == 3

    resumed = manager.resume(job.job_id)
    assert resumed.state in ("queued", "running", "done")
    info = _wait_for(manager, job.job_id, ("done", "failed", "interrupted", "cancelled"))

    assert info.state == "done", info.log_tail
    assert info.done == info.total == 2 * 120
    scores = ResultStore(tmp_path / "out").read("scores")
    assert len(scores) > len(partial)
    assert not scores.duplicated(["run_id", "question_id", "metric"]).any()
    assert scores.groupby("run_id")["question_id"].nunique().tolist() == [120, 120]


@pytest.mark.integration
def test_job_whose_process_vanished_is_interrupted_and_resumable(tmp_path):
    manager = JobManager()
    job = manager.start(tiny_experiment(_write_beir(tmp_path / "beir", questions=4)), out_dir=tmp_path / "out")
    _wait_for(manager, job.job_id, ("done",))
    _wait_for_exit(job.pid)
    # A dashboard restart after a crash finds a "running" status whose process is gone.
    status_path = manager.jobs_dir / job.job_id / "status.json"
    status = json.loads(status_path.read_text())
    status_path.write_text(json.dumps({**status, "state": "running", "done": 3}))

    assert manager.get(job.job_id).state == "interrupted"
    manager.resume(job.job_id)
    assert _wait_for(manager, job.job_id, ("done", "failed")).state == "done"


@pytest.mark.integration
def test_invalid_config_fails_before_any_process_starts(tmp_path):
    manager = JobManager()
    bad = tiny_experiment(_write_beir(tmp_path / "beir", questions=4), retrievers=["bm26"])

    with pytest.raises(ConfigError, match="unknown retriever 'bm26'"):
        manager.start(bad)

    assert list(manager.jobs_dir.iterdir()) == []


@pytest.mark.integration
def test_missing_dataset_is_a_failed_job_with_the_reason(tmp_path):
    manager = JobManager()
    job = manager.start(tiny_experiment(tmp_path / "nowhere"), out_dir=tmp_path / "out")

    info = _wait_for(manager, job.job_id, ("failed", "done"))

    assert info.state == "failed"
    assert str(tmp_path / "nowhere") in info.error


@pytest.mark.integration
def test_unknown_job_lists_the_known_ids_and_delete_keeps_results(tmp_path):
    manager = JobManager()
    job = manager.start(tiny_experiment(_write_beir(tmp_path / "beir", questions=4)), out_dir=tmp_path / "out")

    with pytest.raises(ConfigError, match=f"unknown job 'nope'. Known jobs: {job.job_id}"):
        manager.get("nope")

    _wait_for(manager, job.job_id, ("done",))
    manager.delete(job.job_id)
    assert manager.list() == []
    assert not ResultStore(tmp_path / "out").read("scores").empty


def test_our_own_running_child_is_alive_whatever_its_command_line_reads():
    # Right after exec a child's /proc cmdline can read empty: a job polled then was called dead.
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert _process_alive(child.pid)
    finally:
        child.kill()
    deadline = time.monotonic() + 10
    while _process_alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _process_alive(child.pid)


@pytest.mark.integration
def test_a_job_on_ray_runs_to_done_with_the_tables_of_a_local_job(tmp_path, monkeypatch):
    pytest.importorskip("ray", reason="the test extra installs ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    manager = JobManager()
    dataset = _write_beir(tmp_path / "beir", questions=4)
    on_ray = manager.start(tiny_experiment(dataset, shard_size=2), out_dir=tmp_path / "ray", executor="ray")
    local = manager.start(tiny_experiment(dataset, "tiny-local", shard_size=2), out_dir=tmp_path / "local")
    assert on_ray.command[-2:] == ["--executor", "ray"] and local.command[-2:] == ["--executor", "local"]

    for job in (on_ray, local):
        info = _wait_for(manager, job.job_id, ("done", "failed", "interrupted"), timeout=240)
        assert info.state == "done" and info.done == info.total == 8, info.log_tail
    columns = ["run_id", "question_id", "metric", "value"]
    ray_scores, local_scores = (ResultStore(tmp_path / name).read("scores")[columns].sort_values(columns)
                                .reset_index(drop=True) for name in ("ray", "local"))
    pd.testing.assert_frame_equal(ray_scores, local_scores)


def test_an_unknown_executor_is_refused_naming_the_valid_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown executor 'spark'\. Valid executors: local, ray"):
        JobManager().start(tiny_experiment(_write_beir(tmp_path / "beir", questions=1)), executor="spark")
    assert list(JobManager().jobs_dir.iterdir()) == []


def _job_folder(jobs_dir: Path, job_id: str, out_dir: Path, dataset: str | None) -> None:
    folder = jobs_dir / job_id
    folder.mkdir(parents=True)
    (folder / "job.json").write_text(json.dumps({"out_dir": str(out_dir)}), encoding="utf-8")
    if dataset is not None:
        (folder / "config.yaml").write_text(f"name: x\ndataset:\n  path: {dataset}\n", encoding="utf-8")


@pytest.mark.unit
def test_the_dataset_of_a_results_folder_is_read_from_the_job_that_wrote_it(tmp_path):
    manager = JobManager(tmp_path / "jobs")
    _job_folder(manager.jobs_dir, "1-broken", tmp_path / "results" / "a", dataset=None)  # no config.yaml
    _job_folder(manager.jobs_dir, "2-other", tmp_path / "results" / "b", dataset="/data/other")
    _job_folder(manager.jobs_dir, "3-written", tmp_path / "results" / "a", dataset="/data/set")
    assert manager.dataset_of(tmp_path / "results" / "sub" / ".." / "a") == "/data/set"
    assert manager.dataset_of(tmp_path / "results" / "b") == "/data/other"
    assert manager.dataset_of(tmp_path / "results" / "c") is None
    assert manager.dataset_of("s3://bucket/results/a") is None  # jobs write local folders only


@pytest.mark.parametrize(("kind", "written", "shown"), [
    ("questions", "questions", "questions"),  # an extractive set counts the questions it asked for
    ("questions", "LLM calls", "LLM calls"),
    ("questions", None, "LLM calls"),  # a status file from before it named its unit
    ("run", None, "questions"),
])
def test_progress_counts_what_the_status_file_names_and_older_files_by_job_kind(tmp_path, kind, written, shown):
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()  # a pid that no longer runs: the job's state is read from its status alone
    manager = JobManager(tmp_path / "jobs")
    job = Job(job_id="job", experiment="set", out_dir=str(tmp_path / "out"), created=datetime.now(UTC),
              pid=finished.pid, command=[], kind=kind)
    folder = manager.jobs_dir / job.job_id
    folder.mkdir()
    (folder / "job.json").write_text(job.model_dump_json(), encoding="utf-8")
    status = {"state": "done", "done": 20, "total": 20, "started": 0.0, "updated": 1.0, "pid": finished.pid,
              "error": None, "detail": None, **({"unit": written} if written else {})}
    (folder / "status.json").write_text(json.dumps(status), encoding="utf-8")
    info = manager.get("job")
    assert (info.state, info.done, info.total, info.unit) == ("done", 20, 20, shown)

"""Results on S3-compatible object storage, against a real S3 server on 127.0.0.1 (moto's server
mode) started by the test: the same tables as a local folder, and a run killed with SIGKILL that
resumes with no lost or duplicated rows."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pandas as pd
import pytest

from ragkit.analysis.loading import load_results
from ragkit.cli import main
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.results import ResultStore
from tests.factories import tiny_experiment, write_beir
from tests.held_run import process_alive, process_stderr, start_held_run, wait_until_held

boto3 = pytest.importorskip("boto3", reason="the test extra installs boto3 and moto")
moto_server = pytest.importorskip("moto.server", reason="the test extra installs moto[server]")

pytestmark = pytest.mark.integration

BUCKET = "ragkit-results"
ANIMALS = ["cat", "dog", "cow", "owl", "fox", "bee"]
DOCS = {f"d{i}": f"The {name} is an animal from farm {i}." for i, name in enumerate(ANIMALS)}
QUESTIONS = {f"q{i}": (f"which farm has the {name}", f"d{i}") for i, name in enumerate(ANIMALS)}
KEYS = {"scores": ["run_id", "question_id", "metric", "value", "error"],
        "retrievals": ["run_id", "question_id", "rank", "chunk_id", "doc_id", "start_char", "end_char", "score"],
        "stages": ["run_id", "question_id", "stage"]}


@pytest.fixture(scope="module")
def s3_server():
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(s3_server, monkeypatch):
    """A fresh bucket on the local server, and the AWS variables every process here reads."""
    for name, value in {"AWS_ENDPOINT_URL": s3_server, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    yield client
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for item in page.get("Contents", []):
            client.delete_object(Bucket=BUCKET, Key=item["Key"])
    client.delete_bucket(Bucket=BUCKET)


def grid(dataset: Path, **extra) -> dict:
    return tiny_experiment(dataset, "s3-grid", **{"shard_size": 2, **extra})


def table(location, name: str) -> pd.DataFrame:
    columns = KEYS[name]
    frame = ResultStore(location).read(name)[columns]
    return frame.sort_values(columns).reset_index(drop=True).astype(str)


def test_a_run_on_object_storage_writes_and_reads_the_tables_of_a_local_folder(tmp_path, s3):
    config = config_from_dict(grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS)))
    remote = f"s3://{BUCKET}/experiments/grid"
    on_s3 = run_experiment(config, remote)
    run_experiment(config, tmp_path / "local")

    assert on_s3.questions_computed == 12
    keys = [item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert all(key.startswith("experiments/grid/") for key in keys)
    # 2 runs x 3 shards, each run compacted into one part per table once finished
    assert sum(key.startswith("experiments/grid/_commits/") for key in keys) == 2
    assert sum(key.startswith("experiments/grid/scores/") for key in keys) == 2
    for name in KEYS:
        pd.testing.assert_frame_equal(table(remote, name), table(tmp_path / "local", name))
    store = ResultStore(remote)
    assert store.exists() and not ResultStore(f"s3://{BUCKET}/elsewhere").exists()
    assert store.completed_questions() == ResultStore(tmp_path / "local").completed_questions()
    assert store.metric_names() == ResultStore(tmp_path / "local").metric_names()
    results = load_results(remote)
    assert len(results.runs) == 2 and sorted(results.questions["question_id"]) == sorted(QUESTIONS)
    assert run_experiment(config, remote).nothing_to_do


def test_the_cli_reports_a_results_prefix_on_object_storage(tmp_path, s3, capsys):
    config = grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS))
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    remote = f"s3://{BUCKET}/cli"
    assert main(["run", str(path), "--out", remote, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["report", remote, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["title"] == "ragkit report: cli"
    assert {row["run_id"] for row in report["configurations"]} == set(ResultStore(remote).read("runs")["run_id"])


def test_a_run_on_object_storage_killed_midway_resumes_with_no_lost_or_duplicated_rows(tmp_path, s3):
    # 3 runs x 30 one-question shards.
    many = {f"q{i}": (f"which farm has the {ANIMALS[i % 6]} number {i}", f"d{i % 6}") for i in range(30)}
    config = grid(write_beir(tmp_path / "beir", DOCS, many), shard_size=1, top_k=[1, 2, 3])
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    remote = f"s3://{BUCKET}/killed"

    def committed() -> int:
        listed = s3.list_objects_v2(Bucket=BUCKET, Prefix="killed/_commits/")
        return len(listed.get("Contents", []))

    held = tmp_path / "held"
    process = start_held_run(["run", str(path), "--out", remote, "--quiet"], 3, held, dict(os.environ))
    # Killed at a known point: 3 of 90 shards committed.
    wait_until_held(held, process_alive(process), process_stderr(process))
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert committed() == 3

    assert main(["run", str(path), "--out", remote, "--quiet"]) == 0
    assert committed() == 3  # each finished run compacted into one part
    scores = ResultStore(remote).read("scores")
    assert not scores.duplicated(["run_id", "question_id", "metric"]).any()
    assert scores.groupby("run_id")["question_id"].nunique().tolist() == [30, 30, 30]
    run_experiment(config_from_dict(config), tmp_path / "local")
    for name in KEYS:
        pd.testing.assert_frame_equal(table(remote, name), table(tmp_path / "local", name))


def test_merged_read_copies_on_object_storage_read_what_the_parts_read(tmp_path, s3, capsys):
    config = config_from_dict(grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS)))
    remote = f"s3://{BUCKET}/experiments/merged"
    run_experiment(config, remote)
    run_experiment(config, tmp_path / "local")
    before = {name: table(remote, name) for name in KEYS}
    assert main(["compact", remote]) == 0  # two runs: below a plan's threshold, so written on request
    assert "merged read copies written: runs, scores, stages, judgements" in capsys.readouterr().out
    keys = {item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET, Prefix="experiments/merged/_merged/")["Contents"]}
    assert {"experiments/merged/_merged/scores.parquet", "experiments/merged/_merged/markers.json"} <= keys
    for name in KEYS:  # whole-table reads (every column) still read the parts
        pd.testing.assert_frame_equal(table(remote, name), before[name])
    from ragkit.results.copies import merged_copy

    store = ResultStore(remote)
    copy = merged_copy(store, "scores")
    assert copy is not None and set(copy.parts) == {entry.stem for entry in store.committed_entries("scores")}
    # What analysis reads (its columns, a few metrics) comes from the copies: as the local folder's parts.
    local, remote_results = load_results(tmp_path / "local"), load_results(remote)
    stage_columns = ["run_id", "question_id", "stage"]
    pd.testing.assert_frame_equal(
        remote_results.stages[stage_columns].astype(str).sort_values(stage_columns, ignore_index=True),
        local.stages[stage_columns].astype(str).sort_values(stage_columns, ignore_index=True))
    for name in ("mrr", "recall@1"):
        mine = remote_results.scores_of([name]).astype({"run_id": str, "question_id": str, "metric": str})
        theirs = local.scores_of([name]).astype({"run_id": str, "question_id": str, "metric": str})
        columns = ["run_id", "question_id", "metric", "value"]
        pd.testing.assert_frame_equal(mine[columns].sort_values(columns[:2], ignore_index=True),
                                      theirs[columns].sort_values(columns[:2], ignore_index=True))

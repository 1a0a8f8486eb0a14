"""Chunk sets and indexes shared through object storage (``RAGKIT_SHARED_ARTEFACTS``), against a
real S3 server on 127.0.0.1 (moto's server mode): a second machine (another data directory)
downloads what the first built instead of building it, and writes the same tables; an artefact
without its marker is never used."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.results import ResultStore
from ragkit.settings import get_settings
from tests.factories import write_beir
from tests.results import test_s3 as results_s3
from tests.results.test_s3 import BUCKET, DOCS, KEYS, QUESTIONS, table

# The local S3 server and its fresh bucket, the fixtures of the results-on-S3 tests.
s3_server, s3 = results_s3.s3_server, results_s3.s3

pytestmark = pytest.mark.integration

ARTEFACTS = f"s3://{BUCKET}/artefacts"


def machine(monkeypatch, data_dir: Path, shared: bool = True) -> None:
    """Another machine: its own data directory, the cluster's shared prefix (unless ``shared`` is off)."""
    monkeypatch.setenv("RAGKIT_DATA_DIR", str(data_dir))
    if shared:
        monkeypatch.setenv("RAGKIT_SHARED_ARTEFACTS", ARTEFACTS)
    else:
        monkeypatch.delenv("RAGKIT_SHARED_ARTEFACTS", raising=False)
    get_settings.cache_clear()


def markers(s3) -> list[str]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix="artefacts/").get("Contents", [])
    return [item["Key"] for item in listed if item["Key"].endswith("/published.json")]


def grid(dataset: Path) -> dict:
    # 4 chunk sets (2 chunkers, Chunking Judge off and heuristic: its decisions travel with the
    # chunk set) and 8 indexes (MiniLM for dense, none for bm25).
    return {"name": "shared", "dataset": {"path": str(dataset)}, "chunkers": ["document", "sentence"],
            "embedders": ["minilm"], "retrievers": ["bm25", "dense"], "top_k": [3],
            "judges": {"chunking": ["off", "heuristic"]}, "shard_size": 3}


def test_a_second_machine_downloads_what_the_first_built_and_writes_the_same_tables(tmp_path, s3, monkeypatch):
    config = config_from_dict(grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS)))
    machine(monkeypatch, tmp_path / "machine-a")
    first = run_experiment(config, tmp_path / "out-a")
    assert (first.chunksets_built, first.indexes_built) == (4, 8) and first.chunks_embedded > 0
    assert len(markers(s3)) == 12

    machine(monkeypatch, tmp_path / "machine-b")
    second = run_experiment(config, tmp_path / "out-b")
    assert (second.chunksets_built, second.indexes_built, second.chunks_embedded) == (0, 0, 0)
    assert second.questions_computed == first.questions_computed == 8 * len(QUESTIONS)
    # Only what it needs: the 8 indexes, which bring the Chunking Judge's decisions its runs
    # report; no chunk set (they were needed to build the indexes only).
    derived = tmp_path / "machine-b" / "derived"
    assert len(list(derived.glob("*/lancedb/*.ready"))) == 8
    assert len(list(derived.glob("*/chunksets/*.parquet"))) == 0
    assert len(list(derived.glob("*/chunksets/*.decisions.json"))) == 2
    for name in KEYS:
        pd.testing.assert_frame_equal(table(tmp_path / "out-b", name), table(tmp_path / "out-a", name))
    # The build costs come with the artefacts: machine b's runs show machine a's, as cached builds;
    # the full-text index is each machine's own step.
    builds_a, builds_b = (ResultStore(tmp_path / out).read("stages").query("question_id.isna()")
                          for out in ("out-a", "out-b"))
    shared_a, shared_b = (builds[builds["stage"] != "fulltext"] for builds in (builds_a, builds_b))
    assert len(shared_b) == len(shared_a) > 0 and shared_b["cached"].all() and not shared_a["cached"].any()
    assert sorted(shared_b["seconds"].round(9)) == sorted(shared_a["seconds"].round(9))
    assert not builds_b.loc[builds_b["stage"] == "fulltext", "cached"].any()


def test_an_artefact_without_its_marker_is_built_not_downloaded(tmp_path, s3, monkeypatch):
    """A machine killed while uploading leaves files but no marker: the next one builds."""
    config = config_from_dict(grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS)))
    machine(monkeypatch, tmp_path / "machine-a")
    first = run_experiment(config, tmp_path / "out-a")
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="artefacts/indexes/"):
        for item in page.get("Contents", []):
            if item["Key"].endswith("/published.json"):
                s3.delete_object(Bucket=BUCKET, Key=item["Key"])

    machine(monkeypatch, tmp_path / "machine-c")
    third = run_experiment(config, tmp_path / "out-c")
    assert (third.chunksets_built, third.indexes_built) == (0, first.indexes_built)
    for name in KEYS:
        pd.testing.assert_frame_equal(table(tmp_path / "out-c", name), table(tmp_path / "out-a", name))


def test_artefacts_built_before_sharing_was_on_are_published_when_next_used(tmp_path, s3, monkeypatch):
    config = config_from_dict(grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS)))
    machine(monkeypatch, tmp_path / "machine-a", shared=False)
    run_experiment(config, tmp_path / "out-a")
    assert markers(s3) == []
    machine(monkeypatch, tmp_path / "machine-a")
    again = run_experiment(config, tmp_path / "out-a2")
    assert (again.chunksets_built, again.indexes_built) == (0, 0)
    # Every index this run opened; its chunk sets were not opened (the indexes were built).
    assert sum("/indexes/" in key for key in markers(s3)) == 8

    machine(monkeypatch, tmp_path / "machine-b")
    second = run_experiment(config, tmp_path / "out-b")
    assert (second.chunksets_built, second.indexes_built, second.chunks_embedded) == (0, 0, 0)
    for name in KEYS:
        pd.testing.assert_frame_equal(table(tmp_path / "out-b", name), table(tmp_path / "out-a", name))


@pytest.mark.unit
def test_shared_artefacts_must_be_an_s3_prefix(monkeypatch, tmp_path):
    from ragkit.errors import ConfigError

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RAGKIT_SHARED_ARTEFACTS", "/mnt/shared")
    get_settings.cache_clear()
    with pytest.raises(ConfigError, match="RAGKIT_SHARED_ARTEFACTS"):
        get_settings()
    get_settings.cache_clear()


@pytest.mark.slow
def test_ray_workers_download_what_another_machine_published(tmp_path, s3, monkeypatch):
    """The Ray executor's workers (a local Ray the executor starts, so they get the RAGKIT_
    variables) download the published artefacts instead of building them."""
    pytest.importorskip("ray", reason="the test extra installs ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    config = config_from_dict(grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS)))
    machine(monkeypatch, tmp_path / "machine-a")
    run_experiment(config, tmp_path / "out-a")

    machine(monkeypatch, tmp_path / "machine-b")
    on_ray = run_experiment(config, tmp_path / "out-b", executor="ray", num_cpus=2)
    assert (on_ray.chunksets_built, on_ray.indexes_built, on_ray.chunks_embedded) == (0, 0, 0)
    assert len(list((tmp_path / "machine-b").glob("derived/*/lancedb/*.ready"))) == 8
    for name in ("scores", "stages"):  # retrieval scores may differ in the last bits on one thread
        pd.testing.assert_frame_equal(table(tmp_path / "out-b", name), table(tmp_path / "out-a", name))

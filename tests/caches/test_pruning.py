"""`ragkit cache size` / `ragkit cache prune`: counts, ages, dry runs, concurrent writers, CLI errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragkit.artefacts.index import CHUNK_COLUMNS, Hit
from ragkit.caches.pruning import cache_sizes, parse_duration, prune_caches
from ragkit.cli import main
from ragkit.llms.calls import LLMCache
from ragkit.retrievers.cache import RetrievalCache, connect

pytestmark = pytest.mark.unit

NOW = 1_800_000_000.0
DAY = 86_400.0


def _hit(n: int) -> Hit:
    row = {column: f"{column}{n}" for column in CHUNK_COLUMNS}
    return Hit(row, 0.5)


def _fill(data_dir: Path, llm_ages_days: list[float], retrieval_ages_days: list[float]) -> None:
    """LLM files and retrieval rows written the given numbers of days before NOW."""
    llm = LLMCache(data_dir / "llm_cache")
    for n, age in enumerate(llm_ages_days):
        key = f"{n:02d}" + "a" * 30
        llm.put(key, {"text": "reply"})
        os.utime(llm._path(key), (NOW - age * DAY, NOW - age * DAY))
    cache = RetrievalCache(data_dir / "retrieval_cache")
    for n in range(len(retrieval_ages_days)):
        cache.put(f"{n:02d}" + "b" * 30, [_hit(n)], 0.01)
    cache.flush()
    cache.close()  # closed here, not whenever the collector gets to it: the WAL's files are then gone
    db = connect(data_dir / "retrieval_cache")
    for n, age in enumerate(retrieval_ages_days):
        db.execute("UPDATE retrievals SET written = ? WHERE key = ?", (NOW - age * DAY, f"{n:02d}" + "b" * 30))
    db.close()


def test_sizes_count_entries_bytes_and_ages(tmp_path):
    _fill(tmp_path, [1, 5, 40], [2, 60])
    llm, retrieval, embeddings = cache_sizes(tmp_path)
    files = list((tmp_path / "llm_cache").glob("??/*.json"))
    assert (llm.entries, llm.bytes) == (3, sum(p.stat().st_size for p in files))
    assert (llm.oldest, llm.newest) == (NOW - 40 * DAY, NOW - 1 * DAY)
    assert retrieval.entries == 2 and retrieval.bytes > 0
    assert (retrieval.oldest, retrieval.newest) == (NOW - 60 * DAY, NOW - 2 * DAY)
    assert (embeddings.entries, embeddings.bytes, embeddings.oldest) == (0, 0, None)


def test_prune_removes_only_entries_older_than_the_limit(tmp_path):
    _fill(tmp_path, [1, 5, 40], [2, 29.9, 30.1, 60])
    llm, retrieval, _ = prune_caches(tmp_path, parse_duration("30d"), clock=lambda: NOW)
    assert (llm.removed, llm.kept) == (1, 2)
    assert (retrieval.removed, retrieval.kept) == (2, 2)
    ages = sorted(round((NOW - t) / DAY, 1) for (t,) in connect(tmp_path / "retrieval_cache")
                  .execute("SELECT written FROM retrievals"))
    assert ages == [2.0, 29.9]
    assert cache_sizes(tmp_path)[0].oldest == NOW - 5 * DAY
    # What is left still answers; what was pruned is a miss (recomputed by its next run).
    cache = RetrievalCache(tmp_path / "retrieval_cache")
    assert cache.get("00" + "b" * 30) is not None and cache.get("03" + "b" * 30) is None


def test_prune_of_old_per_file_retrieval_entries(tmp_path):
    legacy = tmp_path / "retrieval_cache" / "ab" / ("ab" + "c" * 30 + ".json")
    legacy.parent.mkdir(parents=True)
    legacy.write_text(json.dumps({"format": 1}), encoding="utf-8")
    os.utime(legacy, (NOW - 10 * DAY, NOW - 10 * DAY))
    assert cache_sizes(tmp_path)[1].entries == 1
    (_, retrieval, _) = prune_caches(tmp_path, parse_duration("1w"), clock=lambda: NOW)
    assert retrieval.removed == 1 and not legacy.exists()


def test_a_dry_run_counts_and_removes_nothing(tmp_path):
    _fill(tmp_path, [1, 40], [2, 60])
    before = cache_sizes(tmp_path)
    llm, retrieval, _ = prune_caches(tmp_path, parse_duration("30d"), dry_run=True, clock=lambda: NOW)
    assert (llm.removed, llm.kept, retrieval.removed, retrieval.kept) == (1, 1, 1, 1)
    # Entries and ages, not bytes: SQLite's WAL files come and go with connections, not with content.
    after = cache_sizes(tmp_path)
    assert [(s.entries, s.oldest, s.newest) for s in after[:2]] == [(s.entries, s.oldest, s.newest) for s in before[:2]]
    assert after[0].bytes == before[0].bytes


@pytest.mark.parametrize(("text", "seconds"), [("45s", 45), ("90m", 5400), ("12h", 43200), ("2d", 172800),
                                               ("1w", 604800), ("1.5h", 5400)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["3x", "30", "d", "-1d", ""])
def test_a_bad_duration_is_one_line_and_exit_2(bad, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path))
    assert main(["cache", "prune", f"--older-than={bad}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and repr(bad) in err and "30d" in err


def test_cli_size_and_prune(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path))
    _fill(tmp_path, [1, 400], [500])
    assert main(["cache", "size"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:2] == ["llm", "2"] and lines[2].split()[:2] == ["retrieval", "1"]
    assert main(["cache", "prune", "--older-than", "1w"]) == 0
    out = capsys.readouterr().out
    assert "llm: removed 1 entries" in out and "retrieval: removed 1 entries" in out


_WRITER = """
import sys
import time
from ragkit.artefacts.index import CHUNK_COLUMNS, Hit
from ragkit.retrievers.cache import RetrievalCache
cache = RetrievalCache(sys.argv[1])
for flush in range(40):
    for n in range(10):
        key = f"{sys.argv[2]}-{flush}-{n}"
        cache.put(key, [Hit({c: key for c in CHUNK_COLUMNS}, 1.0)], 0.0)
    cache.flush()
"""


@pytest.mark.integration
def test_two_writer_processes_lose_nothing(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), name], env=env) for name in "ab"]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    cache = RetrievalCache(tmp_path)
    keys = [f"{name}-{flush}-{n}" for name in "ab" for flush in range(40) for n in range(10)]
    found = [cache.get(key) for key in keys]
    assert all(entry is not None and entry[0][0].row["text"] == key for entry, key in zip(found, keys))
    assert connect(tmp_path).execute("SELECT COUNT(*) FROM retrievals").fetchone()[0] == 800


def test_the_retrieval_cache_travels_to_another_process(tmp_path):
    """Ray and multiprocessing pickle the executor: the cache goes without its connection."""
    import pickle

    cache = RetrievalCache(tmp_path)
    cache.put("k" * 32, [_hit(1)], 0.5)
    cache.flush()
    copy = pickle.loads(pickle.dumps(cache))
    assert copy.get("k" * 32)[1] == 0.5


def test_kept_keys_survive_whatever_their_age(tmp_path):
    _fill(tmp_path, [40, 50], [60, 70])
    keep = {"llm": {"00" + "a" * 30}, "retrieval": {"01" + "b" * 30}}
    llm, retrieval, _ = prune_caches(tmp_path, parse_duration("30d"), keep=keep, clock=lambda: NOW)
    assert (llm.removed, llm.kept, retrieval.removed, retrieval.kept) == (1, 1, 1, 1)
    assert LLMCache(tmp_path / "llm_cache").get("00" + "a" * 30) is not None
    assert LLMCache(tmp_path / "llm_cache").get("01" + "a" * 30) is None
    cache = RetrievalCache(tmp_path / "retrieval_cache")
    assert cache.get("01" + "b" * 30) is not None and cache.get("00" + "b" * 30) is None


def _vectors(data_dir: Path, keys: list[str], age_days: float) -> Path:
    """An embedding table holding ``keys``, its files last written ``age_days`` before NOW."""
    import numpy as np

    from ragkit.embedders.cache import EmbeddingCache

    EmbeddingCache(data_dir / "embeddings", "emb1").add(keys, np.ones((len(keys), 4), np.float32))
    table = data_dir / "embeddings" / "embeddings_emb1.lance"
    for path in table.rglob("*"):
        os.utime(path, (NOW - age_days * DAY, NOW - age_days * DAY))
    return table


def _vector_keys(data_dir: Path) -> list[str]:
    from ragkit.embedders.cache import EmbeddingCache

    return sorted(EmbeddingCache(data_dir / "embeddings", "emb1").lookup([f"k{n}" for n in range(5)]))


def test_embeddings_older_than_the_limit_are_pruned_except_kept_keys(tmp_path):
    _vectors(tmp_path, [f"k{n}" for n in range(5)], age_days=40)
    keep = {"embeddings/emb1": {"k1", "k3"}, "embeddings/other": {"k0"}}
    *_, dry = prune_caches(tmp_path, parse_duration("30d"), keep=keep, dry_run=True, clock=lambda: NOW)
    assert (dry.removed, dry.kept) == (3, 2) and len(_vector_keys(tmp_path)) == 5
    *_, vectors = prune_caches(tmp_path, parse_duration("30d"), keep=keep, clock=lambda: NOW)
    assert (vectors.removed, vectors.kept) == (3, 2) and _vector_keys(tmp_path) == ["k1", "k3"]
    assert cache_sizes(tmp_path)[2].entries == 2


def test_a_young_embedding_table_is_kept_whole(tmp_path):
    _vectors(tmp_path, ["k0", "k1"], age_days=2)
    *_, vectors = prune_caches(tmp_path, parse_duration("30d"), clock=lambda: NOW)
    assert (vectors.removed, vectors.kept) == (0, 2)
    *_, vectors = prune_caches(tmp_path, parse_duration("1d"), clock=lambda: NOW)  # nothing kept: all go
    assert (vectors.removed, vectors.kept) == (2, 0) and _vector_keys(tmp_path) == []


_HOLDER = """
import sys, time
from pathlib import Path
from ragkit.storage.locks import content_lock
with content_lock(Path(sys.argv[1]), "embedder", "emb1"):
    Path(sys.argv[2]).write_text("held")
    time.sleep(60)
"""


@pytest.mark.integration
def test_embedding_prune_is_refused_while_a_run_holds_the_embedders_lock(tmp_path, capsys, monkeypatch):
    _vectors(tmp_path, ["k0", "k1"], age_days=40)
    held = tmp_path / "held"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path), str(held)], env=env)
    try:
        for _ in range(600):
            if held.exists() or holder.poll() is not None:
                break
            time.sleep(0.1)
        assert held.exists()
        monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path))
        assert main(["cache", "prune", "--older-than", "30d"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"process {holder.pid}" in err and "embedder emb1" in err
        assert len(_vector_keys(tmp_path)) == 2  # nothing deleted
    finally:
        holder.kill()
        holder.wait()
    *_, vectors = prune_caches(tmp_path, parse_duration("30d"), clock=lambda: NOW)  # released: pruned now
    assert vectors.removed == 2 and _vector_keys(tmp_path) == []


def test_keep_runs_of_a_folder_that_is_not_results_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path))
    assert main(["cache", "prune", "--keep-runs", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nowhere" in err and "no results folder" in err

"""``ragkit cache prune --keep-runs``: a real run (bm25 and MiniLM on the bundled sample, answers
by the embedded LLM) records what it used; pruning everything else keeps exactly that, so a re-run
of the kept folder calls no LLM and embeds nothing, while the pruned configuration's entries are
gone and recomputed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ragkit.caches.pruning import cache_sizes, folder_keep_set, prune_caches
from ragkit.cli import main
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import prepare, run_experiment
from ragkit.llms.base import LLMBackend
from ragkit.settings import get_settings
from tests.experiments.test_claim_metrics_run import small_sample
from tests.factories import tiny_experiment

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def kept_grid(sample: Path, chunk_size: int) -> dict:
    """bm25 and dense (MiniLM) on token chunks of ``chunk_size``, answers by the embedded LLM."""
    return tiny_experiment(sample, f"keep-{chunk_size}",
                           chunkers=[{"type": "token", "params": {"chunk_size": chunk_size, "chunk_overlap": 16}}],
                           embedders=["minilm"], retrievers=["bm25", "dense"], top_k=[2], generator=True,
                           llm={"default": {"type": "local", "params": {"max_tokens": 4}}})


@pytest.fixture
def llm_calls(monkeypatch, local_backend):
    counted = {"n": 0}
    original = LLMBackend.chat

    def chat(self, *args, **kwargs):
        counted["n"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LLMBackend, "chat", chat)
    return counted


def _fresh_derived(config: dict) -> None:
    """Drop the built chunk sets and indexes, so a re-run needs the embedding cache, not an index."""
    shutil.rmtree(prepare(config_from_dict(config))[1])


def test_prune_keeps_exactly_what_a_kept_folder_needs(tmp_path, llm_calls, capsys):
    data_dir = get_settings().resolved_data_dir()
    sample = small_sample(tmp_path / "sample")
    kept, dropped = tmp_path / "kept", tmp_path / "dropped"
    run_experiment(config_from_dict(kept_grid(sample, 128)), kept)
    calls_kept = llm_calls["n"]
    run_experiment(config_from_dict(kept_grid(sample, 96)), dropped)
    assert calls_kept > 0 and llm_calls["n"] > calls_kept
    needed = folder_keep_set(kept)
    before = {size.cache: size.entries for size in cache_sizes(data_dir)}
    assert {"llm", "retrieval"} < set(needed) and any(c.startswith("embeddings/") for c in needed)
    needed_vectors = sum(len(keys) for cache, keys in needed.items() if cache.startswith("embeddings/"))

    # A dry run counts and changes nothing.
    assert main(["cache", "prune", "--older-than", "0s", "--keep-runs", str(kept), "--dry-run"]) == 0
    assert "would remove" in capsys.readouterr().out
    assert {size.cache: size.entries for size in cache_sizes(data_dir)} == before

    llm, retrieval, vectors = prune_caches(data_dir, 0.0, keep=needed)
    after = {size.cache: size.entries for size in cache_sizes(data_dir)}
    assert (llm.kept, retrieval.kept, vectors.kept) == (len(needed["llm"]), len(needed["retrieval"]), needed_vectors)
    assert after == {"llm": llm.kept, "retrieval": retrieval.kept, "embeddings": vectors.kept}
    assert llm.removed > 0 and retrieval.removed > 0 and vectors.removed > 0  # the other folder's entries

    _fresh_derived(kept_grid(sample, 128))
    calls = llm_calls["n"]
    report = run_experiment(config_from_dict(kept_grid(sample, 128)), tmp_path / "kept-again")
    assert llm_calls["n"] == calls and report.chunks_embedded == 0
    report = run_experiment(config_from_dict(kept_grid(sample, 96)), tmp_path / "dropped-again")
    assert llm_calls["n"] > calls and report.chunks_embedded > 0


def test_a_folder_without_records_is_refused_naming_it(tmp_path, capsys):
    sample = small_sample(tmp_path / "sample")
    out = tmp_path / "old"
    config = {"name": "old", "dataset": {"path": str(sample)}, "chunkers": ["document"], "embedders": [],
              "retrievers": ["bm25"], "top_k": [1]}
    run_experiment(config_from_dict(config), out)
    shutil.rmtree(out / "cache_keys")  # as a folder written before records existed
    assert main(["cache", "prune", "--older-than", "0s", "--keep-runs", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(out) in err and "before cache keys were recorded" in err
    assert cache_sizes(get_settings().resolved_data_dir())[1].entries == 3  # nothing pruned

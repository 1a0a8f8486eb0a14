"""A streamed build (``build_window_rows``: chunking, embedding and the index write a window at a
time) makes what the whole-frame build makes, on the bundled sample: the same chunk set file
(byte for byte while it fits one window; the same table in several row groups otherwise), the
same index table, the same texts embedded once, and the same search results in a run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from ragkit.artefacts.chunksets import build_chunkset_streamed, load_or_build_chunkset
from ragkit.artefacts.index_stream import chunkset_windows
from ragkit.chunkers import chunkers
from ragkit.corpus.model import Corpus
from ragkit.embedders.base import Embedder, embedders
from ragkit.embedders.local import MiniLMParams
from ragkit.questions.corpus import dataset_corpus_rows
from ragkit.settings import get_settings

pytestmark = pytest.mark.integration

DIM = 16
SAMPLE_DATASET = Path(__file__).resolve().parents[2] / "datasets" / "covidqa_sample"


def hashed_vectors(texts: list[str]) -> np.ndarray:
    """A vector per text from its SHA-256 alone: the same whatever batch it is embedded in."""
    rows = [np.frombuffer(hashlib.sha256(text.encode()).digest()[:DIM], np.uint8) for text in texts]
    return np.asarray(rows, np.float32) - 127.5


class HashedEmbedder(Embedder):
    name: ClassVar[str] = "hashed-test"
    Params: ClassVar[type[MiniLMParams]] = MiniLMParams
    texts_embedded: ClassVar[list[str]] = []

    class _Model:
        def get_text_embedding_batch(self, texts: list[str]) -> Any:
            HashedEmbedder.texts_embedded.extend(texts)
            return hashed_vectors(texts)

    def _create_model(self) -> Any:
        return self._Model()

    def _embed_query_batch(self, texts: list[str]) -> list:
        return list(hashed_vectors(texts))


def sample_corpus() -> Corpus:
    rows = dataset_corpus_rows(SAMPLE_DATASET)
    assert rows is not None
    return Corpus.from_documents("covidqa_sample", rows)


def token_chunker() -> Any:
    return chunkers.build({"type": "token", "params": {"chunk_size": 128, "chunk_overlap": 16}})


@pytest.mark.unit
def test_streamed_chunkset_is_the_whole_builds_file(tmp_path: Path) -> None:
    corpus = sample_corpus()
    whole, built = load_or_build_chunkset(tmp_path / "whole.parquet", corpus, token_chunker)
    assert built and len(whole) > 300  # several windows of 100 below
    assert build_chunkset_streamed(tmp_path / "one.parquet", corpus, token_chunker, 65_536)
    assert (tmp_path / "one.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()

    assert build_chunkset_streamed(tmp_path / "windows.parquet", corpus, token_chunker, 100)
    windowed = pq.ParquetFile(tmp_path / "windows.parquet")
    assert [windowed.metadata.row_group(i).num_rows for i in range(windowed.num_row_groups)][:-1] == \
        [100] * (len(whole) // 100)
    assert windowed.read().equals(pq.read_table(tmp_path / "whole.parquet"), check_metadata=True)
    assert not build_chunkset_streamed(tmp_path / "windows.parquet", corpus, token_chunker, 100)  # there: not rebuilt

    # A streamed index build reads exact windows from either file (the whole build's is one row group).
    for path in (tmp_path / "whole.parquet", tmp_path / "windows.parquet"):
        windows = list(chunkset_windows(path, 64))
        assert {len(w) for w in windows[:-1]} == {64} and 0 < len(windows[-1]) <= 64
        assert pd.concat(windows, ignore_index=True).equals(whole)


def run_sample(data_dir: Path, monkeypatch: pytest.MonkeyPatch, window_rows: int) -> dict[str, Any]:
    """The sample's first 20 questions on a dense and a bm25 run, in a fresh data directory."""
    from ragkit.analysis.loading import load_results
    from ragkit.experiments.config import config_from_dict
    from ragkit.experiments.runner import run_experiment

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(data_dir))
    monkeypatch.setenv("RAGKIT_BUILD_WINDOW_ROWS", str(window_rows))
    get_settings.cache_clear()
    HashedEmbedder.texts_embedded = []
    with embedders.registered("hashed-test", HashedEmbedder):
        config = config_from_dict({
            "name": "streamed", "dataset": {"path": str(SAMPLE_DATASET), "format": "beir", "limit": 20},
            "chunkers": [{"type": "token", "params": {"chunk_size": 128, "chunk_overlap": 16}}],
            "embedders": ["hashed-test"], "retrievers": ["dense", "bm25"], "top_k": [5],
        })
        report = run_experiment(config, data_dir / "out")
    assert not report.errors, report.errors
    results = load_results(data_dir / "out")
    derived = next((data_dir / "derived").iterdir())
    [chunkset] = (derived / "chunksets").glob("*.parquet")
    indexes = {}
    for marker in sorted((derived / "lancedb").glob("chunks_*.ready")):
        import lancedb

        name = marker.name.removesuffix(".ready")
        table = lancedb.connect(derived / "lancedb").open_table(name).to_arrow()
        indexes[name] = (table, json.loads(marker.read_text()))
    steps = {path.name: sorted(json.loads(path.read_text())) for path in (derived / "steps").glob("*.json")}
    retrievals = results.retrievals.drop(columns=[c for c in ("seconds",) if c in results.retrievals])
    return {"chunkset": chunkset, "indexes": indexes, "steps": steps, "embedded": list(HashedEmbedder.texts_embedded),
            "retrievals": retrievals.sort_values(["run_id", "question_id", "rank"]).reset_index(drop=True),
            "chunks_embedded": report.chunks_embedded, "ids": sorted(results.runs["run_id"])}


def test_streamed_run_builds_and_finds_what_the_whole_build_does(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    whole = run_sample(tmp_path / "whole", monkeypatch, 0)
    streamed = run_sample(tmp_path / "streamed", monkeypatch, 100)
    assert whole["ids"] == streamed["ids"]
    whole_rows = pq.read_table(whole["chunkset"])
    assert pq.read_table(streamed["chunkset"]).equals(whole_rows, check_metadata=True)
    assert pq.ParquetFile(streamed["chunkset"]).num_row_groups > 3  # it did stream in windows

    assert whole["indexes"].keys() == streamed["indexes"].keys() and len(whole["indexes"]) == 2  # dense, bm25
    for name, (table, marker) in whole["indexes"].items():
        streamed_table, streamed_marker = streamed["indexes"][name]
        assert streamed_table.equals(table, check_metadata=True), name
        assert streamed_marker == marker
    assert whole["steps"] == streamed["steps"]  # the same stage records (chunk; embed + index; index; fulltext)

    # Each text embedded once, across windows too (the sample repeats no chunk text, so: every chunk).
    unique_texts = set(whole_rows.column("embed_text").to_pylist())
    assert sorted(streamed["embedded"]) == sorted(whole["embedded"]) == sorted(unique_texts)
    assert streamed["chunks_embedded"] == whole["chunks_embedded"] == len(unique_texts)

    assert len(whole["retrievals"]) > 0
    assert streamed["retrievals"].equals(whole["retrievals"])

"""An ingested corpus loaded with its texts left in the store's parsed files (``ParsedTexts``) is
the corpus the whole read made: the same ids, texts, metadata and corpus_id, the same chunk set
bytes; it holds far less than its texts; it ships its texts when pickled (the Ray executor's
plan); a parsed file changed or removed under it stops the read with one line."""

from __future__ import annotations

import os
import pickle
import tracemalloc
from pathlib import Path

import pytest

from ragkit.artefacts.chunksets import build_chunkset_streamed, load_or_build_chunkset
from ragkit.chunkers import chunkers
from ragkit.corpus.model import Corpus
from ragkit.corpus.parsed_texts import ParsedTexts
from ragkit.corpus.store import CorpusStore
from ragkit.errors import ConfigError
from tests.factories import make_pdf

pytestmark = pytest.mark.unit


def whole_read(store: CorpusStore, name: str) -> Corpus:
    """The load of before: every parsed file's documents read into memory, texts included."""
    manifest = store._require(name)
    return Corpus.from_documents(name, [r for entry in manifest.documents for r in store._entry_records(entry)])


def mixed_folder(folder: Path) -> Path:
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("Llamas are members of the camelid family.\n\n" * 30, encoding="utf-8")
    (folder / "guide.md").write_text("---\ntitle: Guide\ntags: a, b\n---\n# Intro\nSome words here.\n\n"
                                     "## Part two\nMore words, ü and \"quotes\".\n" * 5, encoding="utf-8")
    (folder / "sub" / "page.html").write_text("<html><head><title>Page</title></head><body><h1>Head</h1>"
                                              "<p>Paragraph one of the page.</p><h2>Sub</h2><p>Two.</p>"
                                              "</body></html>", encoding="utf-8")
    make_pdf(folder / "sub" / "paper.pdf", ["Page one of the paper.", "Page two of the paper."])
    (folder / "beir.jsonl").write_text('{"_id": "b2", "text": "second line"}\n{"_id": "b1", "text": "first"}\n',
                                       encoding="utf-8")
    return folder


@pytest.fixture
def ingested(isolated_data_dir: Path, tmp_path: Path) -> tuple[CorpusStore, str]:
    store = CorpusStore()
    report = store.ingest([mixed_folder(tmp_path / "upload")], "mixed")
    assert report.ingested_count == 5, report.files
    return store, report.corpus_id or ""


def test_the_loaded_corpus_is_the_whole_read_one(ingested: tuple[CorpusStore, str]) -> None:
    store, ingested_id = ingested
    corpus, before = store.load("mixed"), whole_read(store, "mixed")
    assert isinstance(corpus.documents.texts, ParsedTexts) and isinstance(before.documents.texts, list)
    assert corpus.corpus_id == before.corpus_id == ingested_id  # the id the ingest wrote: unchanged
    assert corpus.documents == before.documents and len(corpus.documents) == 6  # 4 files, 2 BEIR lines
    assert [(d.id_, d.text, d.metadata) for d in corpus.documents] == \
        [(d.id_, d.text, d.metadata) for d in before.documents]
    assert [list(batch.texts) for batch in corpus.batches(3)] == [list(b.texts) for b in before.batches(3)]
    assert corpus.documents.texts[-1] == before.documents.texts[-1]
    assert corpus.texts_by_id()["b1"].text == "first"
    assert any(d.metadata.get("page_starts") for d in corpus.documents)  # the pdf's pages kept
    assert any(d.metadata.get("sections") for d in corpus.documents)


def test_the_chunk_set_is_the_same_bytes(ingested: tuple[CorpusStore, str], tmp_path: Path) -> None:
    store, _ = ingested
    lazy, whole = store.load("mixed"), whole_read(store, "mixed")

    def chunker() -> object:
        return chunkers.build({"type": "token", "params": {"chunk_size": 32, "chunk_overlap": 4}})

    load_or_build_chunkset(tmp_path / "whole.parquet", whole, chunker)
    build_chunkset_streamed(tmp_path / "lazy.parquet", lazy, chunker, 65_536)
    load_or_build_chunkset(tmp_path / "lazy-whole.parquet", lazy, chunker)
    assert (tmp_path / "lazy.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    assert (tmp_path / "lazy-whole.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()


def test_pickled_it_carries_its_texts(ingested: tuple[CorpusStore, str], isolated_data_dir: Path) -> None:
    """A Ray worker may not see the data dir: the texts travel, as they did before."""
    store, _ = ingested
    corpus = store.load("mixed")
    shipped = pickle.loads(pickle.dumps(corpus))
    for parsed in (store.data_dir / "documents").glob("*.json"):
        parsed.unlink()
    assert isinstance(shipped.documents.texts, list) and shipped.corpus_id == corpus.corpus_id
    assert shipped.texts_by_id()["b2"].text == "second line"


@pytest.mark.parametrize("change", ["removed", "rewritten"])
def test_a_parsed_file_changed_under_the_corpus_stops_the_read(
        ingested: tuple[CorpusStore, str], change: str) -> None:
    store, _ = ingested
    corpus = store.load("mixed")
    parsed = sorted((store.data_dir / "documents").glob("*.txt.v*.json"))[0]
    if change == "removed":
        parsed.unlink()
    else:
        parsed.write_text(parsed.read_text(encoding="utf-8").replace("Llamas", "Camels"), encoding="utf-8")
        os.utime(parsed, ns=(1, 1))  # another mtime even on a coarse-clock filesystem
    with pytest.raises(ConfigError, match=rf"{parsed.name} (was removed|changed) while a corpus read from it "
                                          r"was in use: ingest its source file again") as error:
        list(corpus.batches(2))
    assert "\n" not in str(error.value)


def test_the_loaded_corpus_holds_far_less_than_its_texts(isolated_data_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    words = "protein virus cell gene sample patient dose trial ".split()
    for number in range(2_000):  # ~5 KB each, distinct
        body = " ".join(words[(number + i) % len(words)] for i in range(800))
        (folder / f"doc{number:04d}.txt").write_text(f"Document {number}.\n\n{body}\n", encoding="utf-8")
    store = CorpusStore()
    assert store.ingest([folder], "many").ingested_count == 2_000
    text_bytes = sum(path.stat().st_size for path in folder.iterdir())

    def held(load: object) -> tuple[int, Corpus]:
        tracemalloc.start()
        try:
            corpus = load()  # type: ignore[operator]
            return tracemalloc.get_traced_memory()[0], corpus
        finally:
            tracemalloc.stop()

    lazy_bytes, lazy = held(lambda: store.load("many"))
    whole_bytes, whole = held(lambda: whole_read(store, "many"))
    assert lazy.corpus_id == whole.corpus_id
    # Measured (10 MB of texts): the ids and metadata (a 300-character description, title, file
    # name... ~1.5 KB a document) hold 0.3 of the texts' size; the whole read holds the texts too.
    assert whole_bytes - lazy_bytes > 0.8 * text_bytes, (whole_bytes, lazy_bytes, text_bytes)
    assert lazy_bytes < 0.45 * text_bytes, (lazy_bytes, text_bytes, whole_bytes)

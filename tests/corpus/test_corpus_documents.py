"""Single documents of a corpus: listed (one row per source file) and deleted into a new version."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

import ragkit.corpus.store as store_module
from ragkit.corpus.listing import DOCUMENT_COLUMNS, documents_table
from ragkit.corpus.model import Corpus, make_document
from ragkit.corpus.store import CorpusStore, ManifestEntry
from ragkit.errors import ConfigError, LockTimeout
from ragkit.storage.locks import content_lock
from tests.factories import make_pdf

pytestmark = pytest.mark.integration


@pytest.fixture
def store(isolated_data_dir: Path) -> CorpusStore:
    return CorpusStore()


@pytest.fixture
def three_files(tmp_path: Path) -> Path:
    folder = tmp_path / "files"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("Alpacas are smaller than llamas.", encoding="utf-8")
    (folder / "b.md").write_text("# Camels\n\nCamels store fat in their humps.\n", encoding="utf-8")
    make_pdf(folder / "sub" / "paper.pdf", ["Page one.", "Page two."])
    return folder


def _parsed_files(data_dir: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in (data_dir / "documents").glob("*.json")}


def test_files_lists_each_source_file_with_its_documents(store: CorpusStore, three_files: Path) -> None:
    store.ingest([three_files], "camelids")
    table = documents_table(store.files("camelids"))
    assert list(table.columns) == DOCUMENT_COLUMNS
    rows = {row["doc_id"]: row for row in table.to_dict("records")}
    assert list(rows) == ["a.txt", "b.md", "sub/paper.pdf"]
    assert rows["a.txt"]["chars"] == len("Alpacas are smaller than llamas.")
    assert rows["a.txt"]["size_bytes"] == (three_files / "a.txt").stat().st_size
    assert rows["sub/paper.pdf"]["file_name"] == "paper.pdf" and rows["sub/paper.pdf"]["pages"] == 2
    assert rows["a.txt"]["pages"] == 0 and rows["b.md"]["documents"] == 1
    ingested = datetime.fromisoformat(rows["b.md"]["ingested"])
    assert ingested.tzinfo is not None and abs((datetime.now(UTC) - ingested).total_seconds()) < 3600


def test_delete_gives_a_new_version_with_the_rest_unchanged(
    store: CorpusStore, three_files: Path, isolated_data_dir: Path
) -> None:
    old_id = store.ingest([three_files], "camelids").corpus_id
    before = store.load("camelids").by_id()
    parsed_before = _parsed_files(isolated_data_dir)
    store.derived_dir(old_id).mkdir(parents=True)  # chunk sets and indexes of the old version

    corpus = store.delete_documents("camelids", ["b.md"])

    kept = ["a.txt", "sub/paper.pdf"]
    assert corpus.corpus_id != old_id
    assert corpus.corpus_id == Corpus.from_documents("camelids", [before[d] for d in kept]).corpus_id
    after = store.load("camelids")
    assert after.corpus_id == corpus.corpus_id and list(after.by_id()) == kept
    for doc_id in kept:  # the remaining documents are the same, byte for byte
        assert after.by_id()[doc_id].text.encode() == before[doc_id].text.encode()
        assert after.by_id()[doc_id].metadata == before[doc_id].metadata
    parsed_after = _parsed_files(isolated_data_dir)
    assert len(parsed_after) == 2 and all(parsed_before[name] == data for name, data in parsed_after.items())
    manifest = json.loads((isolated_data_dir / "corpora" / "camelids.json").read_text())
    assert manifest["corpus_id"] == corpus.corpus_id
    assert manifest["total_bytes"] == sum(entry["size_bytes"] for entry in manifest["documents"])
    # The store keeps one version per name: the old id resolves to nothing any more.
    assert not store.derived_dir(old_id).exists()
    assert all(info.corpus_id != old_id for info in store.list())


def test_a_parsed_file_another_corpus_uses_is_kept(store: CorpusStore, three_files: Path) -> None:
    store.ingest([three_files], "camelids")
    store.ingest([three_files / "b.md"], "camels")
    store.delete_documents("camelids", ["b.md"])
    assert store.load("camels").documents[0].text.startswith("# Camels")


def test_unknown_doc_is_one_error_naming_the_valid_ones_and_changes_nothing(
    store: CorpusStore, three_files: Path, isolated_data_dir: Path
) -> None:
    store.ingest([three_files], "camelids")
    manifest = (isolated_data_dir / "corpora" / "camelids.json").read_bytes()
    with pytest.raises(ConfigError) as caught:
        store.delete_documents("camelids", ["a.txt", "nope.txt"])
    assert str(caught.value) == ("corpus 'camelids' has no document 'nope.txt'. "
                                 "Its documents: a.txt, b.md, sub/paper.pdf.")
    with pytest.raises(ConfigError, match=r"unknown corpus 'other'\. Existing corpora: camelids"):
        store.delete_documents("other", ["a.txt"])
    with pytest.raises(ConfigError, match="leave corpus 'camelids' empty"):
        store.delete_documents("camelids", ["a.txt", "b.md", "sub/paper.pdf"])
    assert (isolated_data_dir / "corpora" / "camelids.json").read_bytes() == manifest


HOLD = """
import sys, time
from pathlib import Path
from ragkit.storage.locks import content_lock
with content_lock(Path(sys.argv[1]), "corpus", "camelids"):
    print("held", flush=True)
    time.sleep(600)
"""


def test_deletes_wait_for_the_corpus_lock_that_ingest_holds(
    store: CorpusStore, three_files: Path, isolated_data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.ingest([three_files], "camelids")
    # Give up at once instead of waiting, so a held lock shows as LockTimeout, not as a long wait.
    monkeypatch.setattr(store_module, "content_lock", lambda *args: content_lock(*args, timeout=0))
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(isolated_data_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        with pytest.raises(LockTimeout, match="corpus camelids is in use"):
            store.delete_documents("camelids", ["a.txt"])
        with pytest.raises(LockTimeout, match="corpus camelids is in use"):
            store.delete("camelids")
    finally:
        child.kill()
        child.wait()
    assert list(store.load("camelids").by_id()) == ["a.txt", "b.md", "sub/paper.pdf"]
    store.delete_documents("camelids", ["a.txt"])
    assert list(store.load("camelids").by_id()) == ["b.md", "sub/paper.pdf"]


@pytest.mark.unit
def test_documents_table_counts_pages_chars_and_documents_per_file() -> None:
    entry = ManifestEntry(doc_id="data/corpus.jsonl", sha256="s", file_type="jsonl", size_bytes=90,
                          loader_version=1, document_count=2)
    documents = [make_document("d1", "abc", {"pages": 3}), make_document("d2", "hello", {"pages": "many"})]
    [row] = documents_table([(entry, documents)]).to_dict("records")
    assert row == {"doc_id": "data/corpus.jsonl", "file_name": "corpus.jsonl", "file_type": "jsonl",
                   "size_bytes": 90, "documents": 2, "pages": 3, "chars": 8, "ingested": None}

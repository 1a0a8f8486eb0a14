"""The corpus store: ingesting folders with bad files, the parse cache, manifests, deletion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ragkit.corpus.store as store_module
from ragkit.corpus.model import make_document
from ragkit.corpus.store import CorpusStore, check_corpus_name
from ragkit.errors import ConfigError, IngestError
from tests.factories import make_pdf

MB = 1024 * 1024




@pytest.fixture
def store(isolated_data_dir: Path) -> CorpusStore:
    return CorpusStore()


@pytest.fixture
def mixed_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "upload"
    (folder / "sub").mkdir(parents=True)
    (folder / "good.txt").write_text("Llamas are members of the camelid family.", encoding="utf-8")
    make_pdf(folder / "sub" / "paper.pdf", ["Page one.", "Page two."])
    corrupt = make_pdf(folder / "corrupt.pdf", ["Soon to be broken."])
    corrupt.write_bytes(corrupt.read_bytes()[:300])
    (folder / "empty.txt").write_bytes(b"")
    (folder / "setup.txt").write_bytes(b"MZ\x90\x00" + bytes(range(256)) * 8)
    with open(folder / "huge.txt", "wb") as handle:
        handle.truncate(60 * MB)  # sparse; rejected by its size before any byte is read
    (folder / "tool.exe").write_bytes(b"MZ\x90\x00")
    (folder / ".hidden.txt").write_text("never ingested", encoding="utf-8")
    (folder / ".git").mkdir()
    (folder / ".git" / "config.txt").write_text("never ingested", encoding="utf-8")
    return folder


@pytest.mark.integration
def test_mixed_folder_ingests_good_files_and_names_each_bad_one(store: CorpusStore, mixed_folder: Path) -> None:
    calls: list[tuple[int, int, str]] = []
    report = store.ingest([mixed_folder], "mixed", progress=lambda *call: calls.append(call))

    by_id = {item.doc_id: item for item in report.files}
    assert list(by_id) == ["corrupt.pdf", "empty.txt", "good.txt", "huge.txt", "setup.txt", "sub/paper.pdf", "tool.exe"]
    assert by_id["good.txt"].status == "ingested" and by_id["good.txt"].documents == 1
    assert by_id["sub/paper.pdf"].status == "ingested"
    expected_reasons = {
        "corrupt.pdf": "corrupt PDF",
        "empty.txt": "empty file",
        "setup.txt": "binary content in a .txt file (looks like a Windows executable)",
        "huge.txt": "RAGKIT_MAX_FILE_MB",
        "tool.exe": "'.exe' is not allowed",
    }
    for doc_id, reason in expected_reasons.items():
        assert by_id[doc_id].status == "skipped"
        assert reason in by_id[doc_id].reason, (doc_id, by_id[doc_id].reason)
    assert report.ingested_count == 2 and report.ok
    assert calls[-1] == (3, 3, "")  # three files passed validation; corrupt.pdf failed while parsing

    corpus = store.load("mixed")
    assert corpus.corpus_id == report.corpus_id
    assert sorted(corpus.by_id()) == ["good.txt", "sub/paper.pdf"]
    assert corpus.by_id()["sub/paper.pdf"].metadata["page_starts"][0] == 0


@pytest.mark.integration
def test_manifest_layout(store: CorpusStore, mixed_folder: Path, isolated_data_dir: Path) -> None:
    report = store.ingest([mixed_folder / "good.txt"], "notes")
    manifest = json.loads((isolated_data_dir / "corpora" / "notes.json").read_text())
    assert manifest["name"] == "notes" and manifest["corpus_id"] == report.corpus_id
    assert manifest["created"].endswith("Z") or manifest["created"].endswith("+00:00")
    [entry] = manifest["documents"]
    assert entry["doc_id"] == "good.txt" and entry["file_type"] == "txt"
    assert entry["size_bytes"] == manifest["total_bytes"] == (mixed_folder / "good.txt").stat().st_size
    assert len(list((isolated_data_dir / "documents").glob(f"{entry['sha256']}.txt.v*.json"))) == 1


@pytest.mark.integration
def test_same_bytes_under_two_names_are_parsed_once(
    store: CorpusStore, tmp_path: Path, isolated_data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parses: list[Path] = []
    real_parse = store_module.parse_file

    def counting_parse(path: Path, file_type: str):
        parses.append(path)
        return real_parse(path, file_type)

    monkeypatch.setattr(store_module, "parse_file", counting_parse)
    first, second = tmp_path / "a.md", tmp_path / "copy" / "b.md"
    second.parent.mkdir()
    first.write_text("# Same\n\nbytes", encoding="utf-8")
    second.write_bytes(first.read_bytes())

    store.ingest([first], "one")
    store.ingest([second.parent], "two")

    assert parses == [first]
    assert len(list((isolated_data_dir / "documents").glob("*.json"))) == 1
    [document] = store.load("two").documents
    assert (document.id_, document.metadata["file_name"], document.metadata["title"]) == ("b.md", "b.md", "Same")
    assert document.metadata["sections"] == [[0, "Same"]]


@pytest.mark.integration
def test_ingesting_into_an_existing_corpus_adds_and_replaces(store: CorpusStore, tmp_path: Path) -> None:
    first = tmp_path / "v1"
    first.mkdir()
    (first / "a.txt").write_text("alpha", encoding="utf-8")
    (first / "b.txt").write_text("beta", encoding="utf-8")
    before = store.ingest([first], "grow")
    second = tmp_path / "v2"
    second.mkdir()
    (second / "b.txt").write_text("beta, revised", encoding="utf-8")
    (second / "c.txt").write_text("gamma", encoding="utf-8")
    after = store.ingest([second], "grow")

    texts = {doc_id: document.text for doc_id, document in store.load("grow").by_id().items()}
    assert texts == {"a.txt": "alpha", "b.txt": "beta, revised", "c.txt": "gamma"}
    assert after.corpus_id != before.corpus_id
    [info] = store.list()
    assert (info.name, info.files, info.documents, info.file_types) == ("grow", 3, 3, {"txt": 3})


@pytest.mark.integration
def test_beir_ids_colliding_with_another_file_are_reported(store: CorpusStore, tmp_path: Path) -> None:
    folder = tmp_path / "beir"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"_id": "d1", "text": "one"}\n{"_id": "d2", "text": "two"}\n', encoding="utf-8")
    (folder / "b.jsonl").write_text('{"_id": "d2", "text": "other two"}\n', encoding="utf-8")
    report = store.ingest([folder], "beir")
    statuses = {item.doc_id: (item.status, item.reason) for item in report.files}
    assert statuses["a.jsonl"] == ("ingested", "")
    assert statuses["b.jsonl"] == ("skipped", "document id 'd2' is already in the corpus from 'a.jsonl'")
    assert sorted(store.load("beir").by_id()) == ["d1", "d2"]


@pytest.mark.integration
def test_total_size_limit_rejects_the_batch_before_parsing(
    store: CorpusStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGKIT_MAX_TOTAL_MB", "0.001")
    store_module.get_settings.cache_clear()
    (tmp_path / "a.txt").write_text("x" * 2000, encoding="utf-8")
    with pytest.raises(IngestError, match="RAGKIT_MAX_TOTAL_MB"):
        store.ingest([tmp_path / "a.txt"], "big")
    assert store.list() == []


@pytest.mark.integration
def test_nothing_ingested_writes_no_corpus(store: CorpusStore, tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    report = store.ingest([tmp_path / "empty.txt", tmp_path / "missing.txt"], "none")
    assert not report.ok and report.corpus_id is None
    assert [item.reason for item in report.files] == ["empty file", "not found"]
    with pytest.raises(ConfigError, match="unknown corpus 'none'"):
        store.load("none")


@pytest.mark.integration
def test_delete_removes_manifest_derived_dir_and_unshared_parsed_files(
    store: CorpusStore, tmp_path: Path, isolated_data_dir: Path
) -> None:
    (tmp_path / "shared.txt").write_text("in both corpora", encoding="utf-8")
    (tmp_path / "own.txt").write_text("only in the first", encoding="utf-8")
    first = store.ingest([tmp_path / "shared.txt", tmp_path / "own.txt"], "first")
    store.ingest([tmp_path / "shared.txt"], "second")
    derived = store.derived_dir(first.corpus_id)
    (derived / "chunks").mkdir(parents=True)

    store.delete("first")

    assert not (isolated_data_dir / "corpora" / "first.json").exists()
    assert not derived.exists()
    assert len(list((isolated_data_dir / "documents").glob("*.json"))) == 1
    assert store.load("second").documents[0].text == "in both corpora"
    assert [info.name for info in store.list()] == ["second"]


@pytest.mark.integration
def test_delete_keeps_derived_dir_shared_with_a_corpus_of_same_content(store: CorpusStore, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("same", encoding="utf-8")
    first = store.ingest([tmp_path / "a.txt"], "first")
    second = store.ingest([tmp_path / "a.txt"], "second")
    assert first.corpus_id == second.corpus_id
    store.derived_dir(first.corpus_id).mkdir(parents=True)
    store.delete("first")
    assert store.derived_dir(first.corpus_id).exists()


@pytest.mark.integration
def test_import_documents_round_trips(store: CorpusStore) -> None:
    documents = [make_document("q2", "second", {"title": "Two"}), make_document("q1", "first")]
    corpus = store.import_documents(documents, "dataset")
    loaded = store.load("dataset")
    assert loaded.corpus_id == corpus.corpus_id
    assert [(d.id_, d.text) for d in loaded.documents] == [("q1", "first"), ("q2", "second")]
    assert loaded.by_id()["q2"].metadata["title"] == "Two"
    with pytest.raises(ConfigError, match="duplicate document ids"):
        store.import_documents([make_document("x", "a"), make_document("x", "b")], "dupes")


@pytest.mark.unit
@pytest.mark.parametrize("name", ["", "../escape", "a/b", "x" * 65, ".hidden", "..", "sp ace", "ok\x00"])
def test_invalid_corpus_names_are_config_errors(name: str) -> None:
    with pytest.raises(ConfigError, match="corpus name"):
        check_corpus_name(name)


@pytest.mark.unit
@pytest.mark.parametrize("name", ["a", "covid-qa_v1.2", "x" * 64])
def test_valid_corpus_names(name: str) -> None:
    assert check_corpus_name(name) == name


@pytest.mark.integration
def test_unknown_corpus_lists_existing_names(store: CorpusStore, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a", encoding="utf-8")
    store.ingest([tmp_path / "a.txt"], "alpha")
    with pytest.raises(ConfigError, match="Existing corpora: alpha"):
        store.delete("beta")

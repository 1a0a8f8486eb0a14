"""Named corpora on disk over a content-addressed cache of parsed files.

Layout under the data dir::

    documents/<sha256>.<type>.v<LOADER_VERSION>.json   parsed documents of one file's bytes
    corpora/<name>.json                                manifest: which files, under which doc ids
    derived/<corpus_id>/                               chunk sets and indexes made from a corpus

The parse cache is keyed by the bytes, the type (the same bytes as .txt and as .md parse
differently) and the loader version, and holds nothing that depends on the file's name; the
name-dependent metadata (doc id, file name, title fallback) is applied when a corpus is loaded.
So the same bytes uploaded under any name, into any corpus, are parsed once.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, computed_field

from ragkit.corpus.jsonl_texts import file_stamp
from ragkit.corpus.loaders import LOADER_VERSION, label_records, parse_file
from ragkit.corpus.model import Corpus, DocumentRecord, DocumentRows, document_to_json, make_document, make_record
from ragkit.corpus.ordered_pool import in_order
from ragkit.corpus.parsed_texts import ParsedTexts
from ragkit.corpus.parsers.parsed import ParsedDocument
from ragkit.corpus.screening import FileStatus, screen, skipped, walk
from ragkit.corpus.validation import file_type_of, validate_total_size
from ragkit.errors import ConfigError, IngestError
from ragkit.hashing import bytes_sha256, canonical_json, file_sha256
from ragkit.settings import get_settings
from ragkit.storage.atomic import write_json_atomic
from ragkit.storage.locks import content_lock

if TYPE_CHECKING:
    from llama_index.core.schema import Document

_CORPUS_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")
# file_type of the manifest entry that holds documents given already parsed (dataset corpora).
IMPORTED = "imported"

# Called with (done, total, doc id); whatever it returns is ignored.
ProgressCallback = Callable[[int, int, str], object]


class ManifestEntry(BaseModel):
    """One source file of a corpus (or the one imported set), under the doc id it was given."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str
    sha256: str
    file_type: str
    size_bytes: int
    loader_version: int
    document_count: int
    modified: str | None = None  # the file's modification time (UTC, ISO 8601) when it was ingested
    ingested: str | None = None  # when it was ingested (UTC, ISO 8601); None in manifests written before


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    corpus_id: str
    created: datetime
    documents: list[ManifestEntry]
    total_bytes: int


class IngestReport(BaseModel):
    corpus_name: str
    corpus_id: str | None
    files: list[FileStatus]

    # mypy does not support decorators over @property; pydantic's docs give this ignore.
    @computed_field  # type: ignore[prop-decorator]
    @property
    def ingested_count(self) -> int:
        return sum(1 for item in self.files if item.status == "ingested")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        return self.ingested_count > 0


class CorpusInfo(BaseModel):
    name: str
    corpus_id: str
    files: int
    documents: int
    total_bytes: int
    file_types: dict[str, int]
    created: datetime


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def check_corpus_name(name: str) -> str:
    if not isinstance(name, str) or not _CORPUS_NAME.fullmatch(name):
        raise ConfigError(
            f"corpus name {name!r} is invalid: use 1-64 letters, digits, '.', '_' or '-', not starting with '.'"
        )
    return name


class CorpusStore:
    """Named corpora under ``data_dir``; see the module docstring for the layout."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else get_settings().resolved_data_dir()

    def derived_dir(self, corpus_id: str) -> Path:
        """Where chunk sets and indexes of a corpus live; removed with the last corpus using it."""
        return self.data_dir / "derived" / corpus_id

    def _manifest_path(self, name: str) -> Path:
        return self.data_dir / "corpora" / f"{check_corpus_name(name)}.json"

    def _parsed_path(self, sha256: str, file_type: str, loader_version: int) -> Path:
        return self.data_dir / "documents" / f"{sha256}.{file_type}.v{loader_version}.json"

    def _entry_parsed_path(self, entry: ManifestEntry) -> Path:
        return self._parsed_path(entry.sha256, entry.file_type, entry.loader_version)

    def _read_manifest(self, name: str) -> Manifest | None:
        path = self._manifest_path(name)
        return Manifest.model_validate_json(path.read_text(encoding="utf-8")) if path.exists() else None

    def _manifests(self) -> list[Manifest]:
        folder = self.data_dir / "corpora"
        paths = sorted(folder.glob("*.json")) if folder.exists() else []
        return [Manifest.model_validate_json(path.read_text(encoding="utf-8")) for path in paths]

    @staticmethod
    def _write_parsed(cache: Path, sha256: str, file_type: str, parsed: list[ParsedDocument]) -> None:
        # Same shape as document_to_json, with doc_id null where the id comes from the file name.
        payload = {"sha256": sha256, "file_type": file_type, "loader_version": LOADER_VERSION}
        write_json_atomic(cache, payload | {"documents": [item.to_json() for item in parsed]})

    @staticmethod
    def _read_parsed(cache: Path) -> list[ParsedDocument]:
        payload = json.loads(cache.read_text(encoding="utf-8"))
        return [ParsedDocument.from_json(item) for item in payload["documents"]]

    def _entry_documents(self, entry: ManifestEntry) -> list[Document]:
        return [make_document(*record) for record in self._entry_records(entry)]

    def _entry_records(self, entry: ManifestEntry) -> list[DocumentRecord]:
        """The entry's documents as records: a corpus is loaded (its id, the answer spans) without
        LlamaIndex, which ``Corpus.documents`` imports when a step needs Documents."""
        cache = self._entry_parsed_path(entry)
        if not cache.exists():
            raise FileNotFoundError(f"parsed documents of '{entry.doc_id}' are missing ({cache}); ingest it again")
        parsed = self._read_parsed(cache)
        if entry.file_type == IMPORTED:
            return [make_record(item.own_id or "", item.text, item.metadata) for item in parsed]
        return label_records(parsed, entry.doc_id, entry.file_type, entry.size_bytes, entry.modified)

    def ingest(self, paths: Sequence[Path], name: str, progress: ProgressCallback | None = None) -> IngestReport:
        """Validate, parse and add files to corpus ``name``; a bad file is reported, never fatal.

        Raises IngestError only when the files together exceed the total-size limit, before
        anything is parsed. A file whose doc id is already in the corpus replaces it. Ingests
        into one corpus take turns (the corpus's lock spans reading, merging and writing its
        manifest), so none loses another's files. PDFs are parsed ``pdf_workers`` (setting) at a
        time, each in its own worker process; the report and the corpus are the same as serial.
        """
        check_corpus_name(name)
        with content_lock(self.data_dir, "corpus", name):
            return self._ingest(paths, name, progress)

    def _ingest(self, paths: Sequence[Path], name: str, progress: ProgressCallback | None) -> IngestReport:
        if isinstance(paths, (str, Path)):  # one path given bare would otherwise iterate its characters
            paths = [Path(paths)]
        settings = get_settings()
        candidates = [item for given in map(Path, paths) for item in walk(given)]
        statuses, accepted = screen(candidates, settings)
        validate_total_size(sum(path.stat().st_size for _, path, _ in accepted), settings)

        manifest = self._read_manifest(name)
        entries = {entry.doc_id: entry for entry in manifest.documents} if manifest else {}
        documents = {doc_id: self._entry_records(entry) for doc_id, entry in entries.items()}
        owner = {document.id_: doc_id for doc_id, docs in documents.items() for document in docs}
        # PDFs are parsed settings.pdf_workers at a time, each in its own worker process; results
        # still arrive here one file after another, in order, so what follows is a serial merge.
        parsed_in_order = in_order(
            accepted, lambda item: self._ingest_file(item[1], item[2]), settings.pdf_workers,
            on_thread=lambda item: file_type_of(item[1]) == "pdf",
        )
        for done, ((index, path, doc_id), ingested) in enumerate(parsed_in_order):
            if progress is not None:
                progress(done, len(accepted), doc_id)
            try:
                entry, new_docs = ingested()
                for document in new_docs:  # BEIR-style files name their documents themselves
                    if (other := owner.get(document.id_, doc_id)) != doc_id:
                        raise IngestError(f"document id '{document.id_}' is already in the corpus from '{other}'")
            except (IngestError, OSError) as error:
                statuses[index] = skipped(path, doc_id, error)
                continue
            for document in documents.get(doc_id, []):
                owner.pop(document.id_, None)
            owner.update((document.id_, doc_id) for document in new_docs)
            documents[doc_id], entries[doc_id] = new_docs, entry
            statuses[index] = FileStatus(path=str(path), doc_id=doc_id, status="ingested", documents=len(new_docs))
        if progress is not None:
            progress(len(accepted), len(accepted), "")

        files = [statuses[index] for index in sorted(statuses)]
        corpus_id = manifest.corpus_id if manifest else None
        if any(item.status == "ingested" for item in files):
            corpus_id = Corpus.from_documents(name, [d for docs in documents.values() for d in docs]).corpus_id
            self._write_manifest(name, corpus_id, list(entries.values()), manifest)
        return IngestReport(corpus_name=name, corpus_id=corpus_id, files=files)

    def _ingest_file(self, path: Path, doc_id: str) -> tuple[ManifestEntry, list[DocumentRecord]]:
        file_type, size_bytes = file_type_of(path), path.stat().st_size
        sha256 = file_sha256(path)
        cache = self._parsed_path(sha256, file_type, LOADER_VERSION)
        if cache.exists():
            parsed = self._read_parsed(cache)
        else:
            parsed = parse_file(path, file_type)
            self._write_parsed(cache, sha256, file_type, parsed)
        modified = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).isoformat(timespec="seconds")
        entry = ManifestEntry(
            doc_id=doc_id, sha256=sha256, file_type=file_type, size_bytes=size_bytes,
            loader_version=LOADER_VERSION, document_count=len(parsed), modified=modified, ingested=_now(),
        )
        return entry, label_records(parsed, doc_id, file_type, size_bytes, modified)

    def import_documents(self, documents: list[Document], name: str) -> Corpus:
        """Create or replace corpus ``name`` with documents that arrive parsed (a dataset's corpus.jsonl)."""
        check_corpus_name(name)
        if not documents:
            raise ConfigError(f"corpus '{name}': no documents to import")
        duplicates = [doc_id for doc_id, count in Counter(d.id_ for d in documents).items() if count > 1]
        if duplicates:
            raise ConfigError(f"corpus '{name}': duplicate document ids {sorted(duplicates)[:5]}")
        ordered = sorted(documents, key=lambda document: document.id_)
        parsed = [
            ParsedDocument(d.text, {k: v for k, v in d.metadata.items() if k != "doc_id"}, own_id=d.id_)
            for d in ordered
        ]
        # Content address of the documents themselves, as a file's sha256 addresses its bytes.
        serialised = canonical_json([document_to_json(document) for document in ordered]).encode("utf-8")
        sha256 = bytes_sha256(serialised)
        cache = self._parsed_path(sha256, IMPORTED, LOADER_VERSION)
        if not cache.exists():
            self._write_parsed(cache, sha256, IMPORTED, parsed)
        entry = ManifestEntry(
            doc_id=f"{IMPORTED}:{name}", sha256=sha256, file_type=IMPORTED, size_bytes=len(serialised),
            loader_version=LOADER_VERSION, document_count=len(parsed), ingested=_now(),
        )
        corpus = Corpus.from_documents(name, [make_document(p.own_id or "", p.text, p.metadata) for p in parsed])
        with content_lock(self.data_dir, "corpus", name):
            self._write_manifest(name, corpus.corpus_id, [entry], self._read_manifest(name))
        return corpus

    def _write_manifest(
        self, name: str, corpus_id: str, entries: list[ManifestEntry], previous: Manifest | None
    ) -> None:
        created = previous.created if previous else datetime.now(UTC)
        manifest = Manifest(
            name=name, corpus_id=corpus_id, created=created,
            documents=sorted(entries, key=lambda entry: entry.doc_id),
            total_bytes=sum(entry.size_bytes for entry in entries),
        )
        write_json_atomic(self._manifest_path(name), manifest.model_dump(mode="json"))

    def _require(self, name: str) -> Manifest:
        manifest = self._read_manifest(name)
        if manifest is None:
            existing = ", ".join(m.name for m in self._manifests()) or "(none yet)"
            raise ConfigError(f"unknown corpus '{name}'. Existing corpora: {existing}.")
        return manifest

    def load(self, name: str) -> Corpus:
        """Corpus ``name`` with its texts left in the parsed files (``ParsedTexts``), read back a
        batch at a time; ids and metadata stay in memory (the labels ``label_records`` adds, most
        of it the 300-character description, plus any page_starts/sections lists a parser made).
        Same documents and corpus_id as reading it whole."""
        return Corpus.from_documents(name, self._rows_in_files(self._require(name)))

    def _rows_in_files(self, manifest: Manifest) -> DocumentRows:
        """Each parsed file read once (labels and text digests kept, texts let go)."""
        paths: list[Path] = []
        stamps: list[tuple[int, int]] = []
        places: list[tuple[int, int]] = []
        digests = bytearray()
        ids: list[str] = []
        metadata: list[dict[str, Any] | None] = []
        for entry in manifest.documents:
            cache = self._entry_parsed_path(entry)
            # Stamped before it is read: a change after the stamp is caught at the first batch read.
            stamp = file_stamp(cache) if cache.exists() else (-1, -1)
            records = self._entry_records(entry)  # a missing file: its "ingest it again" error
            paths.append(cache)
            stamps.append(stamp)
            for number, record in enumerate(records):
                places.append((len(paths) - 1, number))
                digests += hashlib.sha256(record.text.encode("utf-8")).digest()
                ids.append(record.id_)
                metadata.append(None if record.metadata == {"doc_id": record.id_} else record.metadata)
        texts = ParsedTexts(paths, stamps, np.array(places, dtype=np.int32).reshape(-1, 2),
                            np.frombuffer(bytes(digests), dtype=np.uint8).reshape(-1, 32))
        return DocumentRows(ids, texts, metadata)

    def files(self, name: str) -> list[tuple[ManifestEntry, list[Document]]]:
        """Each source file of corpus ``name`` (its manifest entry, by doc id) with its documents."""
        return [(entry, self._entry_documents(entry)) for entry in self._require(name).documents]

    def delete_documents(self, name: str, doc_ids: Sequence[str]) -> Corpus:
        """Remove source files (by doc id, as ``files`` lists them) from corpus ``name``.

        The rest make a new version of the corpus, with a new corpus_id (a content hash). The
        store keeps one version per name, so the old corpus_id no longer loads; its derived data
        and the removed files' parsed documents go, as in ``delete``, once no corpus uses them.
        Runs of the old version keep their results. Under the corpus lock, as ingest: neither
        loses the other's change.
        """
        with content_lock(self.data_dir, "corpus", check_corpus_name(name)):
            manifest = self._require(name)
            known = [entry.doc_id for entry in manifest.documents]
            unknown = [doc_id for doc_id in dict.fromkeys(doc_ids) if doc_id not in known]
            if unknown:
                more = f" and {len(known) - 10} more (`ragkit corpus docs {name}`)" if len(known) > 10 else ""
                shown = ", ".join(known[:10]) + more
                raise ConfigError(f"corpus '{name}' has no document {', '.join(map(repr, unknown))}. "
                                  f"Its documents: {shown}.")
            doomed = set(doc_ids)
            remaining = [entry for entry in manifest.documents if entry.doc_id not in doomed]
            if not remaining:
                raise ConfigError(f"that would leave corpus '{name}' empty: delete the corpus itself "
                                  f"(`ragkit corpus delete {name}`)")
            corpus = Corpus.from_documents(name, [d for entry in remaining for d in self._entry_documents(entry)])
            self._write_manifest(name, corpus.corpus_id, remaining, manifest)
            self._drop_unused(manifest)
        return corpus

    def delete(self, name: str) -> None:
        """Remove a corpus, and its derived data and parsed files once no other corpus uses them.
        Under the corpus lock, as ingest and ``delete_documents``: a delete during an ingest of the
        same name would otherwise remove files the ingest's new manifest still names."""
        with content_lock(self.data_dir, "corpus", check_corpus_name(name)):
            manifest = self._require(name)
            self._manifest_path(name).unlink()
            self._drop_unused(manifest)

    def _drop_unused(self, manifest: Manifest) -> None:
        """Remove the derived data and parsed files of a manifest no longer written that no corpus uses.

        Only parsed files this manifest referenced are candidates for removal, so a concurrent
        ingestion whose manifest is not written yet does not lose its freshly parsed files.
        """
        current = self._manifests()
        if all(other.corpus_id != manifest.corpus_id for other in current):
            shutil.rmtree(self.derived_dir(manifest.corpus_id), ignore_errors=True)
        still_used = {self._entry_parsed_path(entry) for other in current for entry in other.documents}
        for entry in manifest.documents:
            if (cache := self._entry_parsed_path(entry)) not in still_used:
                cache.unlink(missing_ok=True)

    # Defined last: inside the class body this name shadows the builtin for type checkers.
    def list(self) -> list[CorpusInfo]:
        infos = []
        for manifest in self._manifests():
            types: Counter[str] = Counter()
            for entry in manifest.documents:
                types[entry.file_type] += entry.document_count
            infos.append(CorpusInfo(
                name=manifest.name, corpus_id=manifest.corpus_id, files=len(manifest.documents),
                documents=sum(types.values()), total_bytes=manifest.total_bytes,
                file_types=dict(types), created=manifest.created,
            ))
        return infos

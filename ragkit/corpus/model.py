"""The in-memory shape of a corpus, shared by file ingestion and dataset corpora."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, overload, runtime_checkable

from ragkit.hashing import content_key_of_rows, text_sha256

if TYPE_CHECKING:
    from llama_index.core.schema import Document

# Document metadata that describes positions inside the whole text; chunkers turn these into
# per-chunk fields (page, breadcrumb) instead of copying the lists into every chunk.
POSITIONAL_METADATA = ("page_starts", "sections")


def make_document(doc_id: str, text: str, metadata: dict[str, Any] | None = None) -> Document:
    """A LlamaIndex Document whose id is the corpus' doc id (a relative path or a dataset id)."""
    from llama_index.core.schema import Document  # importing llama_index costs seconds: only when a document is made

    meta = dict(metadata or {})
    meta["doc_id"] = doc_id
    return Document(id_=doc_id, text=text, metadata=meta)


class DocumentRecord(NamedTuple):
    """A document before it is a LlamaIndex Document (``make_record``); it has the Document's
    ``id_``, ``text`` and ``metadata``, so code reading those reads either (and ``DocumentRows``
    takes records as it takes Documents)."""

    id_: str
    text: str
    metadata: dict[str, Any]


def make_record(doc_id: str, text: str, metadata: dict[str, Any] | None = None) -> DocumentRecord:
    """What ``make_document`` would make, without LlamaIndex: the same id, text and metadata."""
    return DocumentRecord(doc_id, text, {**(metadata or {}), "doc_id": doc_id})


def document_to_json(document: Document) -> dict[str, Any]:
    return {"doc_id": document.id_, "text": document.text, "metadata": document.metadata}


def document_from_json(value: dict[str, Any]) -> Document:
    return make_document(value["doc_id"], value["text"], value.get("metadata"))


@runtime_checkable
class TextsInFiles(Protocol):
    """Texts left in their files and read back a batch at a time when sliced: a dataset's
    corpus.jsonl (``jsonl_texts.JsonlTexts``) or an ingested corpus's parsed files
    (``parsed_texts.ParsedTexts``). Both keep the texts' digests from the scan until the corpus
    key is made, so the key needs no second read."""

    def __len__(self) -> int: ...

    def take(self, order: Sequence[int]) -> Sequence[str]:
        """The texts at positions ``order``, still in their files (the same kind of sequence)."""

    def sha256s(self) -> Iterator[str]: ...

    def forget_hashes(self) -> None: ...


class DocumentRows(Sequence["Document"]):
    """Documents kept as their parts (id, text, metadata) and made into LlamaIndex Documents when
    read. A Document object costs about 2 KB beyond its text (a million short documents: about
    2 GB, the largest part of a 1M-chunk build's memory); the parts cost their strings.

    ``metadata`` holds each document's metadata dict as made by ``make_document``, or None for
    the commonest one, ``{"doc_id": <id>}`` alone (a dataset row without a title).

    ``texts`` is a list, or a sequence that reads them from their files when asked
    (``TextsInFiles``: a dataset's corpus.jsonl keeps offsets, an ingested corpus the places in its
    parsed files, not texts); a slice of the rows holds its texts."""

    __slots__ = ("_ids", "_metadata", "_texts")

    def __init__(self, ids: list[str], texts: Sequence[str], metadata: list[dict[str, Any] | None]) -> None:
        if not len(ids) == len(texts) == len(metadata):
            raise ValueError(f"{len(ids)} ids, {len(texts)} texts and {len(metadata)} metadata must be as many")
        self._ids, self._texts, self._metadata = ids, texts, metadata

    @classmethod
    def from_parts(cls, rows: Iterable[tuple[str, str, dict[str, Any] | None]]) -> DocumentRows:
        """From (id, text, metadata) as ``make_document`` takes them."""
        ids: list[str] = []
        texts: list[str] = []
        metadata: list[dict[str, Any] | None] = []
        for doc_id, text, meta in rows:
            ids.append(doc_id)
            texts.append(text)
            metadata.append({**meta, "doc_id": doc_id} if meta else None)
        return cls(ids, texts, metadata)

    @classmethod
    def from_documents(cls, documents: Iterable[Document | DocumentRecord]) -> DocumentRows:
        if isinstance(documents, DocumentRows):
            return documents
        ids, texts, metadata = [], [], []
        for document in documents:
            ids.append(document.id_)
            texts.append(document.text)
            meta = document.metadata
            metadata.append(None if meta == {"doc_id": document.id_} else meta)
        return cls(ids, texts, metadata)

    def sorted_by_id(self) -> DocumentRows:
        order = sorted(range(len(self._ids)), key=self._ids.__getitem__)
        texts: Sequence[str]
        if isinstance(self._texts, TextsInFiles):
            texts = self._texts.take(order)
        else:
            texts = [self._texts[i] for i in order]
        return DocumentRows([self._ids[i] for i in order], texts, [self._metadata[i] for i in order])

    @property
    def ids(self) -> list[str]:
        return self._ids

    @property
    def texts(self) -> Sequence[str]:
        return self._texts

    def record(self, position: int) -> DocumentRecord:
        """The document at ``position`` as a record (no LlamaIndex)."""
        doc_id = self._ids[position]
        return DocumentRecord(doc_id, self._texts[position], dict(self._metadata[position] or {"doc_id": doc_id}))

    def _document(self, position: int) -> Document:
        from llama_index.core.schema import Document

        meta = self._metadata[position]
        if meta is None:
            return make_document(self._ids[position], self._texts[position])
        return Document(id_=self._ids[position], text=self._texts[position], metadata=dict(meta))

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> Document: ...

    @overload
    def __getitem__(self, index: slice) -> DocumentRows: ...

    def __getitem__(self, index: int | slice) -> Document | DocumentRows:
        if isinstance(index, slice):
            return DocumentRows(self._ids[index], self._texts[index], self._metadata[index])
        return self._document(range(len(self._ids))[index])

    def __iter__(self) -> Iterator[Document]:
        # A thousand at a time: texts left in their file are read a batch per open, not one each.
        for start in range(0, len(self._ids), 1_000):
            batch = self[start:start + 1_000]
            yield from (batch._document(position) for position in range(len(batch)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DocumentRows):
            return NotImplemented
        return (self._ids, self._metadata) == (other._ids, other._metadata) and self._texts == other._texts

    __hash__ = None  # type: ignore[assignment]  # mutable lists inside, like a list


@dataclass(frozen=True)
class Corpus:
    """A named set of documents; corpus_id is a hash of the documents' ids and texts.

    ``documents`` is a sequence of LlamaIndex Documents in id order, each made when read
    (``DocumentRows``): iterate it, or slice it (``batches``) rather than listing it whole."""

    name: str
    corpus_id: str
    documents: DocumentRows

    @classmethod
    def from_documents(cls, name: str, documents: Iterable[Document | DocumentRecord]) -> Corpus:
        ordered = DocumentRows.from_documents(documents).sorted_by_id()
        texts = ordered.texts
        hashes = texts.sha256s() if isinstance(texts, TextsInFiles) else map(text_sha256, texts)
        key = content_key_of_rows("corpus", zip(ordered.ids, hashes))
        if isinstance(texts, TextsInFiles):
            texts.forget_hashes()  # sorted_by_id made this copy: nothing else holds it
        return cls(name=name, corpus_id=key, documents=ordered)

    def batches(self, size: int) -> Iterator[DocumentRows]:
        """The documents in id order, ``size`` at a time."""
        for start in range(0, len(self.documents), size):
            yield self.documents[start:start + size]

    def by_id(self) -> Mapping[str, Document]:
        """The documents by id, each made when looked up: answer spans and reference contexts
        read the few documents their questions name, not the whole corpus."""
        return DocumentsById(self.documents)

    def texts_by_id(self) -> Mapping[str, DocumentRecord]:
        """The documents by id as records (id, text, metadata), made when looked up and without
        LlamaIndex: for code that reads only ids and texts (answer spans), so a finished grid's
        re-run imports no LlamaIndex."""
        return DocumentsById(self.documents, records=True)


class DocumentsById(Mapping[str, Any]):
    """A read-only mapping of id -> Document (or ``DocumentRecord`` with ``records``) over
    ``DocumentRows``; keeps positions, not Documents."""

    def __init__(self, documents: DocumentRows, records: bool = False) -> None:
        self._documents = documents
        self._records = records
        self._index: dict[str, int] | None = None  # made on the first lookup: most question sets need none

    @property
    def _positions(self) -> dict[str, int]:
        if self._index is None:
            self._index = {doc_id: position for position, doc_id in enumerate(self._documents.ids)}
        return self._index

    def __getitem__(self, doc_id: str) -> Any:
        position = self._positions[doc_id]
        if self._records:
            return self._documents.record(position)
        return self._documents[position]

    def __iter__(self) -> Iterator[str]:
        return iter(self._documents.ids)

    def __len__(self) -> int:
        return len(self._documents)

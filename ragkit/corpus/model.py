"""The in-memory shape of a corpus, shared by file ingestion and dataset corpora.

A corpus may be made of ``DocumentRecord``s (a dataset's corpus.jsonl is read that way) and turns
them into LlamaIndex Documents on first use of ``Corpus.documents``: its id and the questions'
answer spans need only ids and texts, so a finished grid's re-run imports no LlamaIndex.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from ragkit.hashing import content_key, text_sha256

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
    ``id_``, ``text`` and ``metadata``, so code reading those reads either."""

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


@dataclass(frozen=True)
class Corpus:
    """A named set of documents; corpus_id is a hash of the documents' ids and texts."""

    name: str
    corpus_id: str
    # In id order: Documents, or records made into Documents on first use of ``documents``.
    sources: tuple[Document | DocumentRecord, ...] = field(repr=False)

    @classmethod
    def from_documents(cls, name: str, documents: Sequence[Document | DocumentRecord]) -> Corpus:
        ordered = sorted(documents, key=lambda d: d.id_)
        key = content_key("corpus", [(d.id_, text_sha256(d.text)) for d in ordered])
        return cls(name=name, corpus_id=key, sources=tuple(ordered))

    @cached_property
    def documents(self) -> tuple[Document, ...]:
        return tuple(make_document(*source) if isinstance(source, DocumentRecord) else source
                     for source in self.sources)

    def by_id(self) -> dict[str, Document]:
        return {d.id_: d for d in self.documents}

    def texts_by_id(self) -> dict[str, DocumentRecord | Document]:
        """Each document by id as it is held (records stay records): for code reading only ids and texts."""
        return {source.id_: source for source in self.sources}

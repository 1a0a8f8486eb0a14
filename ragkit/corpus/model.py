"""The in-memory shape of a corpus, shared by file ingestion and dataset corpora."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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


def document_to_json(document: Document) -> dict[str, Any]:
    return {"doc_id": document.id_, "text": document.text, "metadata": document.metadata}


def document_from_json(value: dict[str, Any]) -> Document:
    return make_document(value["doc_id"], value["text"], value.get("metadata"))


@dataclass(frozen=True)
class Corpus:
    """A named set of documents; corpus_id is a hash of the documents' ids and texts."""

    name: str
    corpus_id: str
    documents: tuple[Document, ...]

    @classmethod
    def from_documents(cls, name: str, documents: list[Document]) -> Corpus:
        ordered = sorted(documents, key=lambda d: d.id_)
        key = content_key("corpus", [(d.id_, text_sha256(d.text)) for d in ordered])
        return cls(name=name, corpus_id=key, documents=tuple(ordered))

    def by_id(self) -> dict[str, Document]:
        return {d.id_: d for d in self.documents}

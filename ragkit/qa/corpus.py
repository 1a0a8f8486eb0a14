"""The corpus shipped with a dataset, read alongside its questions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from ragkit.corpus.model import DocumentRecord, make_document, make_record
from ragkit.errors import ConfigError
from ragkit.qa.rows import RowModel, jsonl_rows, parse_row
from ragkit.qa.squad import squad_paragraphs
from ragkit.quoting import clipped

if TYPE_CHECKING:
    from llama_index.core.schema import Document


class _CorpusRow(RowModel):
    id: str = Field(alias="_id")
    title: str | None = None
    text: str


def load_dataset_corpus(path: str | Path) -> list[Document] | None:
    """The corpus shipped with a dataset as LlamaIndex Documents (``dataset_corpus_records``)."""
    records = dataset_corpus_records(path)
    return None if records is None else [make_document(*record) for record in records]


def dataset_corpus_records(path: str | Path) -> list[DocumentRecord] | None:
    """The corpus shipped with a dataset: corpus.jsonl in its folder, or a SQuAD file's contexts.

    A BEIR row's title goes into metadata "title" and is not prepended to the text (chunkers do
    that when asked to contextualize). None means the dataset has no corpus of its own, so the
    experiment must name an ingested corpus.
    """
    path = Path(path)
    documents: dict[str, DocumentRecord] = {}
    if path.is_file() and path.suffix.lower() == ".json":
        for doc_id, context, _, where in squad_paragraphs(path):
            if doc_id in documents and documents[doc_id].text != context:
                raise ConfigError(f"{path}, {where}: doc id '{clipped(doc_id)}' is used for two different contexts")
            documents[doc_id] = make_record(doc_id, context)
        return list(documents.values())
    corpus_path = (path if path.is_dir() else path.parent) / "corpus.jsonl"
    if not corpus_path.is_file():
        return None
    for line_no, obj in jsonl_rows(corpus_path):
        row = parse_row(_CorpusRow, obj, f"{corpus_path}, line {line_no}")
        if row.id in documents:
            raise ConfigError(f"{corpus_path}, line {line_no}: duplicate document id '{clipped(row.id)}'")
        documents[row.id] = make_record(row.id, row.text, {"title": row.title} if row.title else None)
    return list(documents.values())

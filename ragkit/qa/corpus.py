"""The corpus shipped with a dataset, read alongside its questions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ragkit.corpus.model import DocumentRows
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
    """The corpus shipped with a dataset, as Documents (see ``dataset_corpus_rows``)."""
    rows = dataset_corpus_rows(path)
    return None if rows is None else list(rows)


def dataset_corpus_rows(path: str | Path) -> DocumentRows | None:
    """The corpus shipped with a dataset: corpus.jsonl in its folder, or a SQuAD file's contexts,
    kept as rows (a Document object each would cost about 2 KB: 2 GB at a million documents).

    A BEIR row's title goes into metadata "title" and is not prepended to the text (chunkers do
    that when asked to contextualize). None means the dataset has no corpus of its own, so the
    experiment must name an ingested corpus.
    """
    path = Path(path)
    if path.is_file() and path.suffix.lower() == ".json":
        contexts: dict[str, str] = {}
        for doc_id, context, _, where in squad_paragraphs(path):
            if doc_id in contexts and contexts[doc_id] != context:
                raise ConfigError(f"{path}, {where}: doc id '{clipped(doc_id)}' is used for two different contexts")
            contexts[doc_id] = context
        return DocumentRows.from_parts((doc_id, context, None) for doc_id, context in contexts.items())
    corpus_path = (path if path.is_dir() else path.parent) / "corpus.jsonl"
    if not corpus_path.is_file():
        return None
    seen: set[str] = set()

    def rows() -> Iterator[tuple[str, str, dict[str, Any] | None]]:
        for line_no, obj in jsonl_rows(corpus_path):
            row = parse_row(_CorpusRow, obj, f"{corpus_path}, line {line_no}")
            if row.id in seen:
                raise ConfigError(f"{corpus_path}, line {line_no}: duplicate document id '{clipped(row.id)}'")
            seen.add(row.id)
            yield row.id, row.text, {"title": row.title} if row.title else None

    return DocumentRows.from_parts(rows())

"""The corpus shipped with a dataset, read alongside its questions."""

from __future__ import annotations

import hashlib
import json
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field

from ragkit.corpus.jsonl_texts import JsonlTexts, file_stamp, scan_lines
from ragkit.corpus.model import DocumentRows
from ragkit.errors import ConfigError
from ragkit.json_input import load_json
from ragkit.questions.rows import RowModel, jsonl_rows, parse_row
from ragkit.questions.squad import squad_paragraphs
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
    return _jsonl_corpus_rows(corpus_path)


def _jsonl_corpus_rows(corpus_path: Path) -> DocumentRows:
    """corpus.jsonl's rows with their texts left in the file (``JsonlTexts``: each line's offset
    and its text's hash are kept, the text is read again when the corpus is chunked).

    Lines are cut at ``\\n``; text mode also cuts at a lone ``\\r`` (old Mac files), so a file that
    has one is read whole in memory (``_rows_in_memory``), the way text mode parses it."""
    stamp = file_stamp(corpus_path)
    seen: set[str] = set()
    ids: list[str] = []
    metadata: list[dict[str, Any] | None] = []
    offsets = array("q")
    hashes = bytearray()
    for line_no, offset, line in scan_lines(corpus_path):
        try:
            decoded = line.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ConfigError(f"{corpus_path}, line {line_no}: not UTF-8 text ({error.reason})") from None
        if not decoded.strip():  # blank as ``numbered_lines`` sees it (str.strip: any Unicode space)
            continue
        if "\r" in decoded.rstrip("\r\n"):
            return DocumentRows.from_parts(_rows_in_memory(corpus_path))
        row = _parse_line(decoded, corpus_path, line_no)
        if row.id in seen:
            raise ConfigError(f"{corpus_path}, line {line_no}: duplicate document id '{clipped(row.id)}'")
        seen.add(row.id)
        ids.append(row.id)
        metadata.append({"title": row.title, "doc_id": row.id} if row.title else None)
        offsets.append(offset)
        hashes += hashlib.sha256(row.text.encode("utf-8")).digest()
    del seen
    texts = JsonlTexts(corpus_path, np.frombuffer(offsets, dtype=np.int64).copy(), _line_text, stamp,
                       np.frombuffer(hashes, dtype=np.uint8).reshape(-1, 32))  # no copy
    return DocumentRows(ids, texts, metadata)


def _rows_in_memory(corpus_path: Path) -> Iterator[tuple[str, str, dict[str, Any] | None]]:
    """(id, text, metadata) of every row, texts held: for files ``scan_lines`` cannot cut."""
    seen: set[str] = set()
    for line_no, obj in jsonl_rows(corpus_path):
        row = parse_row(_CorpusRow, obj, f"{corpus_path}, line {line_no}")
        if row.id in seen:
            raise ConfigError(f"{corpus_path}, line {line_no}: duplicate document id '{clipped(row.id)}'")
        seen.add(row.id)
        yield row.id, row.text, {"title": row.title} if row.title else None


def _parse_line(line: str, corpus_path: Path, line_no: int) -> _CorpusRow:
    """One corpus.jsonl line as ``jsonl_rows`` and ``parse_row`` read it (the same bounds, the
    same errors)."""
    where = f"{corpus_path}, line {line_no}"
    obj = load_json(line, str(corpus_path), line_no)
    if not isinstance(obj, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    row: _CorpusRow = parse_row(_CorpusRow, obj, where)
    return row


def _line_text(line: bytes) -> str:
    """The text of a line already checked by ``_parse_line`` (a JsonlTexts reader; the file's stamp
    is checked before each read, so the line is the one whose bounds were checked). A string is
    the row's text as validated; anything else (a number read as a string) goes through the model:
    validating every row again cost a third of the CPU of reading a million texts back."""
    text = json.loads(line)["text"]
    return text if type(text) is str else _CorpusRow.model_validate(json.loads(line)).text

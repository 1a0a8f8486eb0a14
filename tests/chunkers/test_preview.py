"""A chunk preview: one row per chunk, boundaries that slice the document back to the chunk's
text, and token counts in cl100k (hand-counted)."""

from __future__ import annotations

import pytest
from llama_index.core.schema import Document

from ragkit.chunkers.preview import PREVIEW_COLUMNS, chunk_preview
from ragkit.errors import ConfigError

pytestmark = pytest.mark.unit


def test_one_row_per_chunk_whose_boundaries_slice_the_document_to_its_text():
    document = Document(text="Cats purr when content. " * 80, id_="cats")
    table = chunk_preview(document, "recursive", {"chunk_size": 64, "chunk_overlap": 0})
    assert list(table.columns) == PREVIEW_COLUMNS and len(table) > 1
    assert table["chunk"].tolist() == list(range(len(table)))
    for row in table.itertuples():
        assert document.text[row.start_char:row.end_char] == row.text
        assert 0 < row.tokens <= 64


def test_tokens_are_counted_in_cl100k():
    # cl100k_base: "Hello" 9906, " world" 1917, "." 13.
    table = chunk_preview(Document(text="Hello world.", id_="d"), "document", {})
    assert table[["start_char", "end_char", "tokens", "text"]].values.tolist() == [[0, 12, 3, "Hello world."]]


def test_an_unknown_chunker_or_bad_params_are_one_line_config_errors():
    document = Document(text="x", id_="d")
    with pytest.raises(ConfigError, match="recursive"):
        chunk_preview(document, "no-such-chunker", {})
    with pytest.raises(ConfigError, match="chunk_size"):
        chunk_preview(document, "recursive", {"chunk_size": -1})

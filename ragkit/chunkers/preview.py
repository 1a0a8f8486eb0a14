"""One document's chunks under one chunker, as a table: what the Corpora page and a user deciding
between chunkers look at (boundaries in the source text, breadcrumb, token count, text)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from llama_index.core.schema import Document

from ragkit.chunkers import chunkers
from ragkit.chunkers.token import cl100k_tokenizer

PREVIEW_COLUMNS = ["chunk", "start_char", "end_char", "breadcrumb", "tokens", "text"]


def chunk_preview(document: Document, chunker: str, params: dict[str, Any]) -> pd.DataFrame:
    """One row per chunk of ``document`` under the registered chunker ``chunker`` with ``params``;
    tokens are counted with cl100k, the tokenizer chunk sizes are measured in."""
    nodes = chunkers.build({"type": chunker, "params": params}).chunk([document])
    tokenizer = cl100k_tokenizer()
    return pd.DataFrame(
        [
            {
                "chunk": node.metadata.get("chunk_index"),
                "start_char": node.metadata.get("start_char"),
                "end_char": node.metadata.get("end_char"),
                "breadcrumb": node.metadata.get("breadcrumb", ""),
                "tokens": len(tokenizer(node.text)),
                "text": node.text,
            }
            for node in nodes
        ],
        columns=PREVIEW_COLUMNS,
    )

"""One chunk per document: for abstract-sized corpora such as BEIR.

Published BEIR numbers retrieve whole documents, so comparing to them needs chunk == document.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragkit.chunkers.base import Chunker, Span
from ragkit.chunkers.params import DocumentChunkerInfo


class DocumentChunker(DocumentChunkerInfo, Chunker):

    def split_spans(self, text: str, metadata: Mapping[str, Any]) -> list[Span]:
        return [Span(0, len(text))]

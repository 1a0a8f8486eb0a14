"""Recursive character splitting (LangChain's RecursiveCharacterTextSplitter semantics).

llama-index-core has no recursive character splitter (its LangchainNodeParser would pull in
langchain and still return strings that must be re-located), so the algorithm runs directly
over offsets: every piece is a ``(start, end)`` slice of the source, exact by construction.
The markdown and code chunkers reuse ``recursive_spans`` for their long sections.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from ragkit.chunkers.base import Chunker, Span
from ragkit.chunkers.params import DEFAULT_SEPARATORS, RecursiveChunkerInfo, RecursiveSplitterParams


def recursive_spans(
    text: str,
    start: int,
    end: int,
    chunk_size: int,
    chunk_overlap: int,
    separators: Sequence[str] = DEFAULT_SEPARATORS,
) -> list[tuple[int, int]]:
    """Spans of ``text[start:end]``, each at most ``chunk_size`` characters.

    Split on the first separator that occurs, merge neighbouring pieces up to chunk_size with
    up to chunk_overlap characters repeated, and recurse with the next separators into pieces
    that are still too long. "" (single characters) is always the last resort, so no chunk
    can exceed chunk_size.
    """
    if end - start <= chunk_size:
        return [(start, end)]
    remaining = list(separators)
    while remaining and remaining[0] and text.find(remaining[0], start, end) < 0:
        remaining.pop(0)
    separator = remaining.pop(0) if remaining else ""
    spans: list[tuple[int, int]] = []
    small: list[tuple[int, int]] = []
    for piece in _split_keeping_separator(text, start, end, separator):
        if piece[1] - piece[0] <= chunk_size:
            small.append(piece)
            continue
        spans.extend(_merge(small, chunk_size, chunk_overlap))
        small = []
        spans.extend(recursive_spans(text, piece[0], piece[1], chunk_size, chunk_overlap, remaining))
    spans.extend(_merge(small, chunk_size, chunk_overlap))
    return spans


def _split_keeping_separator(text: str, start: int, end: int, separator: str) -> list[tuple[int, int]]:
    """Consecutive pieces covering start..end; a separator stays at the end of its piece."""
    if not separator:
        return [(i, i + 1) for i in range(start, end)]
    pieces = []
    position = start
    while position < end:
        found = text.find(separator, position, end)
        cut = end if found < 0 else found + len(separator)
        pieces.append((position, cut))
        position = cut
    return pieces


def _merge(pieces: list[tuple[int, int]], chunk_size: int, chunk_overlap: int) -> list[tuple[int, int]]:
    """Join consecutive pieces into windows; a new window keeps the previous one's tail."""
    spans: list[tuple[int, int]] = []
    window: deque[tuple[int, int]] = deque()
    total = 0
    for piece in pieces:
        length = piece[1] - piece[0]
        if window and total + length > chunk_size:
            spans.append((window[0][0], window[-1][1]))
            while window and (total > chunk_overlap or total + length > chunk_size):
                first = window.popleft()
                total -= first[1] - first[0]
        window.append(piece)
        total += length
    if window:
        spans.append((window[0][0], window[-1][1]))
    return spans


class RecursiveChunker(RecursiveChunkerInfo, Chunker):
    """``file_types``: a document whose file suffix has a rule is cut with that rule's sizes and
    separators (its file name, else its id, gives the suffix); every other document as configured."""

    params: RecursiveSplitterParams

    def split_spans(self, text: str, metadata: Mapping[str, Any]) -> list[Span]:
        p = self.params
        size, overlap, separators = p.chunk_size, p.chunk_overlap, p.separators
        suffix = PurePosixPath(str(metadata.get("file_name") or metadata.get("doc_id") or "")).suffix.lower()
        rule = p.file_types.get(suffix)
        if rule is not None:
            size, overlap = p.sizes(rule)
            separators = rule.separators or separators
        return [Span(s, e) for s, e in recursive_spans(text, 0, len(text), size, overlap, separators)]

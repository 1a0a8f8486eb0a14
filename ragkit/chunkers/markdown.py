"""Markdown: one chunk per header section, recursive splitting inside long sections.

Headers are scanned over offsets here rather than with LlamaIndex's MarkdownNodeParser,
which strips section text and records only the parent headers ("/A/"), not the section's
own; our breadcrumb "A > B > C" ends with the section's header and offsets stay exact.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from ragkit.chunkers.base import Chunker, Span
from ragkit.chunkers.params import MarkdownChunkerInfo, RecursiveParams
from ragkit.chunkers.recursive import recursive_spans
from ragkit.corpus.parsers.markdown import atx_heading

_FENCE = re.compile(r" {0,3}(```|~~~)")


class Section(NamedTuple):
    start: int
    breadcrumb: str


def markdown_sections(text: str) -> list[Section]:
    """Where each header section starts and its breadcrumb; headers inside code fences are ignored."""
    sections: list[Section] = []
    trail: list[tuple[int, str]] = []  # (level, title) of the enclosing headers
    fence: str | None = None
    position = 0
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        fence_match = _FENCE.match(bare)
        if fence is not None:
            if fence_match and fence_match.group(1) == fence:
                fence = None
        elif fence_match:
            fence = fence_match.group(1)
        elif header := atx_heading(bare):
            level, title = header[0], header[1].strip()
            while trail and trail[-1][0] >= level:
                trail.pop()
            trail.append((level, title))
            sections.append(Section(position, " > ".join(t for _, t in trail if t)))
        position += len(line)
    return sections


class MarkdownChunker(MarkdownChunkerInfo, Chunker):
    params: RecursiveParams

    def split_spans(self, text: str, metadata: Mapping[str, Any]) -> list[Span]:
        p = self.params
        sections = markdown_sections(text)
        # Text before the first header is a section without a breadcrumb of its own.
        bounds = [Section(0, ""), *sections] if not sections or sections[0].start > 0 else sections
        spans: list[Span] = []
        for section, following in zip(bounds, [*bounds[1:], Section(len(text), "")]):
            extra = {"breadcrumb": section.breadcrumb} if section.breadcrumb else {}
            pieces = recursive_spans(text, section.start, following.start, p.chunk_size, p.chunk_overlap, p.separators)
            spans.extend(Span(start, end, extra) for start, end in pieces)
        return spans

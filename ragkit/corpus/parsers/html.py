"""HTML files: the visible text with collapsed whitespace, h1-h6 as sections, <title> and
<meta> description and keywords as metadata."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ragkit.corpus.parsers.parsed import ParsedDocument, as_tags, heading_sections, short_description

# Tags whose end is a line break in the visible text; the rest are inline.
_HTML_BLOCKS = frozenset(
    "address article aside blockquote br dd div dl dt figcaption figure footer form h1 h2 h3 h4 h5 h6 "
    "header hr li main nav ol p pre section table td th tr ul".split()
)
_HTML_HIDDEN = frozenset({"script", "style", "noscript", "template", "head", "title", "iframe", "object"})


class _TextBuilder:
    """Accumulates visible text with collapsed whitespace, so offsets are final as they are taken."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.line_start = True
        self.pending_space = False

    def _append(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    def line_break(self) -> None:
        if self.length and not self.line_start:
            self._append("\n")
        self.line_start, self.pending_space = True, False

    def add(self, text: str, preformatted: bool) -> None:
        if preformatted:
            self._append(text)
            self.line_start, self.pending_space = text.endswith("\n"), False
            return
        words = text.split()
        if not words:
            self.pending_space = self.pending_space or bool(text)
            return
        if (self.pending_space or text[0].isspace()) and not self.line_start:
            self._append(" ")
        self._append(" ".join(words))
        self.line_start, self.pending_space = False, text[-1].isspace()


def parse_html(path: Path) -> list[ParsedDocument]:
    from bs4 import BeautifulSoup, NavigableString, Tag

    # Bytes, not text: bs4 detects the encoding from <meta charset> or the content.
    soup = BeautifulSoup(path.read_bytes(), "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    builder, headings, preformatted = _TextBuilder(), [], 0
    # An explicit stack instead of recursion: unclosed tags can nest thousands deep.
    stack: list[tuple[Any, bool]] = [(soup, False)]
    while stack:
        node, leaving = stack.pop()
        if leaving:
            preformatted -= node.name == "pre"
            if node.name in _HTML_BLOCKS:
                builder.line_break()
        elif isinstance(node, Tag) and node.name not in _HTML_HIDDEN:
            if node.name in _HTML_BLOCKS:
                builder.line_break()
            if re.fullmatch(r"h[1-6]", node.name) and (heading := node.get_text(" ", strip=True)):
                headings.append((builder.length, int(node.name[1]), heading))
            preformatted += node.name == "pre"
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node.contents))
        elif type(node) is NavigableString:  # subclasses are comments, doctypes, CDATA
            builder.add(str(node), preformatted > 0)
    metadata: dict[str, Any] = {"sections": heading_sections(headings)}
    if title:
        metadata["title"] = title
    metadata.update(_html_meta(soup))
    return [ParsedDocument("".join(builder.parts).rstrip(), metadata)]


def _html_meta(soup: Any) -> dict[str, Any]:
    """description and tags (keywords) from the page's <meta name=...> tags."""
    found: dict[str, Any] = {}
    for tag in soup.find_all("meta"):
        name, content = str(tag.get("name") or "").lower(), tag.get("content")
        if not isinstance(content, str) or not content.strip():
            continue
        if name == "description":
            found["description"] = short_description(content)
        elif name == "keywords":
            found["tags"] = as_tags(content)
    return found

"""Markdown files: the raw text (so offsets match the file), headers as sections, front matter
as title, description and tags."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ragkit.corpus.parsers.parsed import ParsedDocument, as_tags, heading_sections, short_description
from ragkit.corpus.parsers.plain import read_text
from ragkit.yaml_input import DocumentLoader, parse_yaml

FRONT_MATTER = re.compile(r"\A---\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL)

_MD_ATX_OPEN = re.compile(r" {0,3}(#{1,6})(?=[ \t]|$)")
_MD_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_MD_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_MD_BLOCK_START = re.compile(r"^ {0,3}([-*+>]|\d+[.)]|#|\||<)")


def front_matter(text: str) -> dict[str, Any]:
    """description, tags and title from a markdown file's YAML front matter (safe_load within the
    bounds of ``ragkit.yaml_input``), if any."""
    match = FRONT_MATTER.match(text)
    if not match:
        return {}
    try:
        data = parse_yaml(match.group(1), DocumentLoader)
    except (yaml.YAMLError, RecursionError):
        return {}  # not YAML after all: the text is still the document
    if not isinstance(data, dict):
        return {}
    found: dict[str, Any] = {}
    if isinstance(data.get("description"), str) and data["description"].strip():
        found["description"] = short_description(data["description"])
    tags = data.get("tags", data.get("keywords"))
    if tags:
        found["tags"] = as_tags(tags)
    if isinstance(data.get("title"), str) and data["title"].strip():
        found["title"] = data["title"].strip()
    return found


def atx_heading(line: str) -> tuple[int, str] | None:
    r"""(level, title) of an ATX header line such as "## Title ##", or None.

    It reads a line as ``^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`` would (the closing
    hashes are optional, as in CommonMark) without that regex's backtracking, which took minutes
    on one 40 KB line of spaces followed by hashes.
    """
    opening = _MD_ATX_OPEN.match(line)
    if opening is None:
        return None
    title = line[opening.end() :].strip(" \t")
    without_closing = title.rstrip("#")
    if without_closing != title and without_closing[-1:] in (" ", "\t"):
        title = without_closing.rstrip(" \t")
    return len(opening.group(1)), title


def markdown_headings(text: str) -> list[tuple[int, int, str]]:
    """Header lines (ATX and setext) outside fenced code blocks and YAML front matter."""
    headings: list[tuple[int, int, str]] = []
    fence: str | None = None
    in_front_matter = text.startswith("---\n") or text.startswith("---\r\n")
    # previous: (start, line) of the current paragraph's first line, a setext heading candidate
    offset, previous, paragraph_lines = 0, None, 0
    for index, raw_line in enumerate(text.splitlines(keepends=True)):
        start, offset = offset, offset + len(raw_line)
        line = raw_line.rstrip("\r\n")
        if in_front_matter:
            in_front_matter = index == 0 or line.strip() not in ("---", "...")
            continue
        fence_match = _MD_FENCE.match(line)
        if fence is not None:
            if fence_match and fence_match.group(1)[0] == fence[0] and len(fence_match.group(1)) >= len(fence):
                fence = None
            continue
        if fence_match:
            fence = fence_match.group(1)
        elif atx := atx_heading(line):
            if title := atx[1].strip():
                headings.append((start, atx[0], title))
        elif _MD_SETEXT.match(line) and previous is not None and paragraph_lines == 1:
            # Only a one-line paragraph counts: a longer one followed by "---" is usually a rule.
            headings.append((previous[0], 1 if line.strip()[0] == "=" else 2, previous[1].strip()))
        elif line.strip() and not line.startswith(("    ", "\t")) and not _MD_BLOCK_START.match(line):
            previous = previous or (start, line)
            paragraph_lines += 1
            continue
        previous, paragraph_lines = None, 0
    return headings


def parse_markdown(path: Path) -> list[ParsedDocument]:
    text = read_text(path)
    headings = markdown_headings(text)
    metadata: dict[str, Any] = {"sections": heading_sections(headings)}
    title = next((heading for _, level, heading in headings if level == 1 and heading), None)
    if title:
        metadata["title"] = title
    metadata.update(front_matter(text))  # the author's own title, description and tags win
    return [ParsedDocument(text, metadata)]

"""What a parser returns, and the metadata helpers several parsers share."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

DESCRIPTION_CHARS = 300
MAX_TAGS = 20

# Values that PDF/DOCX-writing libraries put in when the author set none; not real metadata.
_PLACEHOLDER_META = frozenset({"", "untitled", "anonymous", "python-docx", "unknown"})


@dataclass(frozen=True)
class ParsedDocument:
    """One document of a file before it is named; ``own_id`` is set when the file names it."""

    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    own_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"doc_id": self.own_id, "text": self.text, "metadata": self.metadata}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> ParsedDocument:
        return cls(text=value["text"], metadata=dict(value.get("metadata") or {}), own_id=value.get("doc_id"))


def short_description(text: str) -> str:
    """``text`` on one line, whitespace collapsed, cut to DESCRIPTION_CHARS."""
    # Words are read until the description is full, not the whole text (``\S`` and ``str.split``
    # agree on what whitespace is).
    words: list[str] = []
    length = 0
    for word in re.finditer(r"\S+", text):
        words.append(word.group())
        length += len(words[-1]) + 1
        if length > DESCRIPTION_CHARS:
            break
    return " ".join(words)[:DESCRIPTION_CHARS]


def as_tags(value: Any) -> list[str]:
    """A tag list from a list or a comma-separated string; blanks dropped, once each."""
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else [value]
    return list(dict.fromkeys(str(item).strip() for item in items if str(item).strip()))[:MAX_TAGS]


def _clean_meta(value: Any) -> str | None:
    text = str(value).strip() if value is not None else ""
    return None if text.lower() in _PLACEHOLDER_META else text


def title_author(title: Any, author: Any) -> dict[str, Any]:
    """The document properties a file declares, placeholders ("Untitled", "python-docx") left out."""
    found = {"title": _clean_meta(title), "author": _clean_meta(author)}
    return {key: value for key, value in found.items() if value}


def heading_sections(headings: list[tuple[int, int, str]]) -> list[list[Any]]:
    """[start_char, "A > B > C"] for each (start_char, level, heading text), by header hierarchy."""
    trail: list[tuple[int, str]] = []
    sections: list[list[Any]] = []
    for start, level, title in headings:
        while trail and trail[-1][0] >= level:
            trail.pop()
        trail.append((level, title))
        sections.append([start, " > ".join(text for _, text in trail)])
    return sections

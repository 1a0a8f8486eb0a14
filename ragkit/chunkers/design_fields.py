"""The context-enhancement design's document fields, for the ``by_file_type`` chunker's
``document_fields: design``: what title, author and tags a file's chunks carry.

- **title**: a Python module's docstring, its first line; a file whose loader found no title of its
  own (the loader then uses the file stem) gets its stem title-cased, ``retry_policy.md`` ->
  ``Retry Policy``; a title the file gave itself (a markdown heading or front matter) stays.
- **author**: the loader's when it found one; else the first ``Author: name`` line (also ``By:``,
  ``@author``, ``__author__ = "name"``) in the first 2,000 characters.
- **tags**: a Python file's are ``python`` and ``code`` before any the loader found.

The chunker applies them to a copy of the document's metadata, so the corpus's documents (shared
by every chunker of a grid) are never changed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

# Where an author line is looked for: a header, not the body of a long file.
AUTHOR_SCAN_CHARS = 2000
AUTHOR = re.compile(
    r"""^[ \t#*_/>-]*(?:(?:author|by)[ \t*_]*:[ \t*_]*|@author\b[ \t]*)(?P<name>[^\n]{1,100}?)[ \t*_]*$"""
    r"""|^[ \t]*__author__[ \t]*=[ \t]*(?P<quote>["'])(?P<dunder>[^"'\n]{1,100})(?P=quote)""",
    re.IGNORECASE | re.MULTILINE,
)
PYTHON_TAGS = ("python", "code")


def title_cased_stem(file_name: str) -> str:
    """``retry_policy.md`` -> ``Retry Policy``: underscores and dashes as spaces, each word capitalised."""
    stem = PurePosixPath(file_name).stem
    return " ".join(word[:1].upper() + word[1:] for word in re.split(r"[\s_\-]+", stem) if word)


def docstring_line(text: str) -> str | None:
    """A Python module's docstring, its first non-empty line; None when there is none or it does not parse."""
    try:
        doc = ast.get_docstring(ast.parse(text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    first = next((line.strip() for line in (doc or "").splitlines() if line.strip()), None)
    return first[:200] if first else None


def author_in(text: str) -> str | None:
    match = AUTHOR.search(text[:AUTHOR_SCAN_CHARS])
    if match is None:
        return None
    name = (match["name"] or match["dunder"] or "").strip()
    return name or None


def design_fields(text: str, metadata: Mapping[str, Any], python: bool) -> dict[str, Any]:
    """The fields to set on a document's metadata (only those that change)."""
    name = str(metadata.get("file_name") or metadata.get("file_path") or "")
    found: dict[str, Any] = {}
    title = docstring_line(text) if python else None
    own_title = metadata.get("title")
    if title is None and name and (not own_title or own_title == PurePosixPath(name).stem):
        title = title_cased_stem(name) or None
    if title and title != own_title:
        found["title"] = title
    if not metadata.get("author") and (author := author_in(text)):
        found["author"] = author
    if python:
        tags = [str(tag) for tag in metadata.get("tags") or []]
        found["tags"] = [*PYTHON_TAGS, *(tag for tag in tags if tag not in PYTHON_TAGS)]
    return found

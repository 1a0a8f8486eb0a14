"""Word (DOCX) files: paragraphs and tables as text, heading styles as sections."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ragkit.corpus.parsers.parsed import ParsedDocument, heading_sections, title_author
from ragkit.errors import IngestError

_DOCX_HEADING = re.compile(r"^Heading (\d)$")


def parse_docx(path: Path) -> list[ParsedDocument]:
    import docx
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(str(path))
    except Exception as error:  # python-docx raises zip, XML and package errors on bad files
        raise IngestError(f"corrupt DOCX: {error}") from error
    blocks: list[str] = []
    headings: list[tuple[int, int, str]] = []
    offset = 0
    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            text = block.text
            match = _DOCX_HEADING.match(block.style.name if block.style is not None else "")
            if match and text.strip():
                headings.append((offset, int(match.group(1)), text.strip()))
        else:  # a table: one line per row, so its content is searchable rather than dropped
            text = "\n".join(" | ".join(cell.text for cell in row.cells) for row in block.rows)
        blocks.append(text)
        offset += len(text) + 1
    metadata: dict[str, Any] = {"sections": heading_sections(headings)}
    metadata |= title_author(document.core_properties.title, document.core_properties.author)
    return [ParsedDocument("\n".join(blocks), metadata)]

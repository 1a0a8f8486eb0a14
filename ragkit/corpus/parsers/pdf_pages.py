"""PDF files: the pages' text (``ragkit.corpus.pdf`` reads it) as one document with page starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragkit.corpus.parsers.parsed import ParsedDocument, title_author
from ragkit.corpus.pdf import PdfError, read_pdf
from ragkit.errors import IngestError
from ragkit.settings import get_settings


def parse_pdf(path: Path) -> list[ParsedDocument]:
    try:
        pdf = read_pdf(path, get_settings().pdf_timeout_s)
    except PdfError as error:
        raise IngestError(str(error)) from None
    page_starts, offset = [], 0
    for text in pdf.pages:
        page_starts.append(offset)
        offset += len(text) + 2
    metadata: dict[str, Any] = {"page_starts": page_starts, "pages": len(pdf.pages), "parser": pdf.parser}
    metadata |= title_author(pdf.title, pdf.author)
    return [ParsedDocument("\n\n".join(pdf.pages), metadata)]

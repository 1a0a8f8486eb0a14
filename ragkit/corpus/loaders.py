"""Turn one file into LlamaIndex Documents, keeping the structure chunkers need.

Each format uses its own library directly rather than ``llama_index.readers.file``, because
those readers drop what we keep: PDFReader loses title/author and retries a corrupt file three
times before wrapping the error; DocxReader (docx2txt) loses heading styles; MarkdownReader
rewrites the text into header chunks, so offsets into the raw file are gone; HTMLTagReader reads
one tag kind only. The parsers live in ``ragkit.corpus.parsers``, one module per family; this
module picks one by file type and names what it returns.

Parsing is split from naming. ``parse_file`` depends only on the file's bytes and type, so the
store caches it by content hash; ``label_documents`` adds everything that depends on the name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ragkit.corpus.model import DocumentRecord, make_document, make_record
from ragkit.corpus.parsers.code import CODE_LANGUAGES, parse_code
from ragkit.corpus.parsers.html import parse_html
from ragkit.corpus.parsers.markdown import FRONT_MATTER, parse_markdown
from ragkit.corpus.parsers.office import parse_docx
from ragkit.corpus.parsers.parsed import ParsedDocument, short_description
from ragkit.corpus.parsers.pdf_pages import parse_pdf
from ragkit.corpus.parsers.plain import is_utf8, parse_txt
from ragkit.corpus.parsers.structured import parse_json, parse_jsonl, parse_yaml
from ragkit.corpus.parsers.tabular import parse_csv
from ragkit.corpus.validation import file_type_of
from ragkit.errors import IngestError

if TYPE_CHECKING:
    from llama_index.core.schema import Document

# Part of the parse cache key: bump it when a parser's output changes, so files are re-parsed.
# 2: PDFs read by pypdfium2 first (pypdf second); lone surrogates replaced; CSV read by the csv
#    module (rows of empty cells are left out).
# 3: JSON and YAML documents carry their top-level keys as sections; source code files; text that
#    is not UTF-8 is read as Latin-1 (recorded as the document's `encoding`).
LOADER_VERSION = 3

_PARSERS: dict[str, Callable[[Path], list[ParsedDocument]]] = {
    "pdf": parse_pdf,
    "docx": parse_docx,
    "txt": parse_txt,
    "md": parse_markdown,
    "html": parse_html,
    "htm": parse_html,
    "csv": parse_csv,
    "json": parse_json,
    "jsonl": parse_jsonl,
    "yaml": parse_yaml,
    "yml": parse_yaml,
    **dict.fromkeys(CODE_LANGUAGES, parse_code),
}


def load_file(path: Path, doc_id: str) -> list[Document]:
    """Parse ``path`` into Documents named ``doc_id`` (BEIR-style jsonl lines keep their own ids)."""
    modified = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).isoformat(timespec="seconds")
    return label_documents(parse_file(path), doc_id, file_type_of(path), path.stat().st_size, modified)


def parse_file(path: Path, file_type: str | None = None) -> list[ParsedDocument]:
    file_type = file_type or file_type_of(path)
    parser = _PARSERS.get(file_type)
    if parser is None:
        raise IngestError(f"no loader for '.{file_type}' files; supported: {', '.join(sorted(_PARSERS))}")
    if path.stat().st_size == 0:
        raise IngestError("empty file")
    documents = [_valid_unicode(document) for document in parser(path)]
    if not any(document.text.strip() for document in documents):
        raise IngestError("no extractable text")
    if file_type not in ("pdf", "docx") and not is_utf8(path):
        # read_text fell back to Latin-1: say so, since a wrong guess shows as odd characters.
        documents = [ParsedDocument(d.text, {**d.metadata, "encoding": "latin-1"}, d.own_id) for d in documents]
    return documents


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_unicode(document: ParsedDocument) -> ParsedDocument:
    """Lone surrogates (JSON can spell them as escapes) replaced: no UTF-8 writer or tokenizer takes them."""

    def fix(value: Any) -> Any:
        return _LONE_SURROGATE.sub("\ufffd", value) if isinstance(value, str) else value

    metadata = {key: fix(value) for key, value in document.metadata.items()}
    return ParsedDocument(fix(document.text), metadata, fix(document.own_id))


def label_documents(parsed: list[ParsedDocument], doc_id: str, file_type: str, size_bytes: int,
                    modified: str | None = None) -> list[Document]:
    """``label_records`` as LlamaIndex Documents."""
    return [make_document(*record) for record in label_records(parsed, doc_id, file_type, size_bytes, modified)]


def label_records(parsed: list[ParsedDocument], doc_id: str, file_type: str, size_bytes: int,
                  modified: str | None = None) -> list[DocumentRecord]:
    """Name parsed documents after their file; the title falls back to the file stem.

    A document with its own id (a BEIR corpus line) keeps that id, so qrels that reference it
    match, and records the file it came from in ``source_file``. Every document gets a
    ``description`` (its own, e.g. markdown front matter or an HTML meta tag, else its first
    paragraph of prose), ``tags`` (its own, else none) and, for a file, ``modified`` (the file's
    modification time, UTC). None of these is embedded or part of any content key.
    """
    file_name = PurePosixPath(doc_id).name
    documents = []
    for item in parsed:
        metadata = dict(item.metadata)
        metadata.update(file_name=file_name, file_type=file_type, size_bytes=size_bytes)
        if modified is not None:
            metadata["modified"] = modified
        if not metadata.get("description"):
            metadata["description"] = first_paragraph(item.text)
        metadata.setdefault("tags", [])
        if item.own_id is not None:
            metadata["source_file"] = doc_id
        if not metadata.get("title"):
            metadata["title"] = item.own_id if item.own_id is not None else PurePosixPath(file_name).stem
        documents.append(make_record(item.own_id if item.own_id is not None else doc_id, item.text, metadata))
    return documents


def first_paragraph(text: str) -> str:
    """The first block of prose: not a heading, front matter, code fence or a line of symbols;
    at least 4 words; whitespace collapsed, at most DESCRIPTION_CHARS characters."""
    body = FRONT_MATTER.sub("", text, count=1)
    for block in re.split(r"\n[ \t]*\n", body):
        block = block.strip()
        if not block or block.startswith(("#", "```", "---", "===")):
            continue
        # Four words decide; a long block (a whole text without a blank line) is not scanned to its end.
        if len(list(islice(re.finditer(r"[^\W\d_]{2,}", block), 4))) == 4:
            return short_description(block)
    return ""

"""Turn one file into LlamaIndex Documents, keeping the structure chunkers need.

Each format uses its own library directly rather than ``llama_index.readers.file``, because
those readers drop what we keep: PDFReader loses title/author and retries a corrupt file three
times before wrapping the error; DocxReader (docx2txt) loses heading styles; MarkdownReader
rewrites the text into header chunks, so offsets into the raw file are gone; HTMLTagReader reads
one tag kind only.

Parsing is split from naming. ``parse_file`` depends only on the file's bytes and type, so the
store caches it by content hash; ``label_documents`` adds everything that depends on the name.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from llama_index.core.schema import Document

from ragkit.corpus.model import make_document
from ragkit.corpus.pdf import PdfError, read_pdf
from ragkit.corpus.validation import file_type_of
from ragkit.errors import IngestError
from ragkit.settings import get_settings
from ragkit.yaml_input import DocumentLoader, parse_yaml, parse_yaml_documents

# Part of the parse cache key: bump it when a parser's output changes, so files are re-parsed.
# 2: PDFs read by pypdfium2 first (pypdf second); lone surrogates replaced; CSV read by the csv
#    module (rows of empty cells are left out).
# 3: JSON and YAML documents carry their top-level keys as sections; source code files; text that
#    is not UTF-8 is read as Latin-1 (recorded as the document's `encoding`).
LOADER_VERSION = 3

# Source code read as text; the code chunker splits Python by definition, the rest recursively.
CODE_LANGUAGES = {"py": "python", "pyi": "python", "js": "javascript", "ts": "typescript", "java": "java",
                  "go": "go", "rs": "rust", "c": "c", "h": "c", "cpp": "cpp", "hpp": "cpp", "rb": "ruby",
                  "sh": "shell", "sql": "sql", "toml": "toml"}

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
    if file_type not in ("pdf", "docx") and not _is_utf8(path):
        # _read_text fell back to Latin-1: say so, since a wrong guess shows as odd characters.
        documents = [ParsedDocument(d.text, {**d.metadata, "encoding": "latin-1"}, d.own_id) for d in documents]
    return documents


def _is_utf8(path: Path) -> bool:
    try:
        path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    return True


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_unicode(document: ParsedDocument) -> ParsedDocument:
    """Lone surrogates (JSON can spell them as escapes) replaced: no UTF-8 writer or tokenizer takes them."""

    def fix(value: Any) -> Any:
        return _LONE_SURROGATE.sub("\ufffd", value) if isinstance(value, str) else value

    metadata = {key: fix(value) for key, value in document.metadata.items()}
    return ParsedDocument(fix(document.text), metadata, fix(document.own_id))


DESCRIPTION_CHARS = 300
MAX_TAGS = 20


def label_documents(parsed: list[ParsedDocument], doc_id: str, file_type: str, size_bytes: int,
                    modified: str | None = None) -> list[Document]:
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
        documents.append(make_document(item.own_id if item.own_id is not None else doc_id, item.text, metadata))
    return documents


def first_paragraph(text: str) -> str:
    """The first block of prose: not a heading, front matter, code fence or a line of symbols;
    at least 4 words; whitespace collapsed, at most DESCRIPTION_CHARS characters."""
    body = _FRONT_MATTER.sub("", text, count=1)
    for block in re.split(r"\n[ \t]*\n", body):
        block = block.strip()
        if not block or block.startswith(("#", "```", "---", "===")):
            continue
        words = re.findall(r"[^\W\d_]{2,}", block)
        if len(words) >= 4:
            return " ".join(block.split())[:DESCRIPTION_CHARS]
    return ""


_FRONT_MATTER = re.compile(r"\A---\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL)


def front_matter(text: str) -> dict[str, Any]:
    """description, tags and title from a markdown file's YAML front matter (safe_load within the
    bounds of ``ragkit.yaml_input``), if any."""
    match = _FRONT_MATTER.match(text)
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
        found["description"] = " ".join(data["description"].split())[:DESCRIPTION_CHARS]
    tags = data.get("tags", data.get("keywords"))
    if tags:
        found["tags"] = as_tags(tags)
    if isinstance(data.get("title"), str) and data["title"].strip():
        found["title"] = data["title"].strip()
    return found


def as_tags(value: Any) -> list[str]:
    """A tag list from a list or a comma-separated string; blanks dropped, once each."""
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else [value]
    return list(dict.fromkeys(str(item).strip() for item in items if str(item).strip()))[:MAX_TAGS]


def _read_text(path: Path) -> str:
    """UTF-8 (a BOM dropped); text that is not UTF-8 is read as Latin-1, which decodes any byte.

    Binary content never gets here: validation rejects NUL and control bytes first. Latin-1
    rather than Windows-1252 because it is total: no byte sequence fails."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _clean_meta(value: Any) -> str | None:
    text = str(value).strip() if value is not None else ""
    return None if text.lower() in _PLACEHOLDER_META else text


def _title_author(title: Any, author: Any) -> dict[str, Any]:
    found = {"title": _clean_meta(title), "author": _clean_meta(author)}
    return {key: value for key, value in found.items() if value}


def _sections(headings: list[tuple[int, int, str]]) -> list[list[Any]]:
    """[start_char, "A > B > C"] for each (start_char, level, heading text), by header hierarchy."""
    trail: list[tuple[int, str]] = []
    sections: list[list[Any]] = []
    for start, level, title in headings:
        while trail and trail[-1][0] >= level:
            trail.pop()
        trail.append((level, title))
        sections.append([start, " > ".join(text for _, text in trail)])
    return sections


def _parse_txt(path: Path) -> list[ParsedDocument]:
    return [ParsedDocument(_read_text(path))]


def _parse_pdf(path: Path) -> list[ParsedDocument]:
    try:
        pdf = read_pdf(path, get_settings().pdf_timeout_s)
    except PdfError as error:
        raise IngestError(str(error)) from None
    page_starts, offset = [], 0
    for text in pdf.pages:
        page_starts.append(offset)
        offset += len(text) + 2
    metadata: dict[str, Any] = {"page_starts": page_starts, "pages": len(pdf.pages), "parser": pdf.parser}
    metadata |= _title_author(pdf.title, pdf.author)
    return [ParsedDocument("\n\n".join(pdf.pages), metadata)]


_DOCX_HEADING = re.compile(r"^Heading (\d)$")


def _parse_docx(path: Path) -> list[ParsedDocument]:
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
    metadata: dict[str, Any] = {"sections": _sections(headings)}
    metadata |= _title_author(document.core_properties.title, document.core_properties.author)
    return [ParsedDocument("\n".join(blocks), metadata)]


_MD_ATX_OPEN = re.compile(r" {0,3}(#{1,6})(?=[ \t]|$)")
_MD_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_MD_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_MD_BLOCK_START = re.compile(r"^ {0,3}([-*+>]|\d+[.)]|#|\||<)")


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


def _markdown_headings(text: str) -> list[tuple[int, int, str]]:
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


def _parse_markdown(path: Path) -> list[ParsedDocument]:
    text = _read_text(path)
    headings = _markdown_headings(text)
    metadata: dict[str, Any] = {"sections": _sections(headings)}
    title = next((heading for _, level, heading in headings if level == 1 and heading), None)
    if title:
        metadata["title"] = title
    metadata.update(front_matter(text))  # the author's own title, description and tags win
    return [ParsedDocument(text, metadata)]


def _parse_csv(path: Path) -> list[ParsedDocument]:
    # The csv module rather than pandas: pandas renames repeated column names in quadratic time
    # (a 20 KB header of one repeated name took a minute) and builds a frame we do not need.
    rows: list[list[str]] = []
    reader = csv.reader(io.StringIO(_read_text(path), newline=""))
    try:
        for row in reader:
            if rows and len(row) > len(rows[0]):
                raise IngestError(
                    f"malformed CSV: line {reader.line_num} has {len(row)} fields, the header {len(rows[0])}"
                )
            if any(cell.strip() for cell in row):
                rows.append(row)
    except csv.Error as error:  # e.g. a field over csv.field_size_limit(), an unclosed quote at the end
        raise IngestError(f"malformed CSV: {error} (line {reader.line_num})") from None
    if not rows:
        raise IngestError("no extractable text")
    columns = [name or f"column {number}" for number, name in enumerate(rows[0], start=1)]
    # Empty cells are left out: a sparse table would otherwise be mostly "col: ;" noise.
    lines = [
        "; ".join(f"{column}: {value}" for column, value in zip(columns, row) if value.strip()) for row in rows[1:]
    ]
    return [ParsedDocument("\n".join(lines), {"columns": columns, "rows": len(rows) - 1})]


def _load_json(text: str, where: str = "") -> Any:
    """``json.loads`` with every failure an IngestError: syntax, over-long integers, deep nesting."""
    try:
        return json.loads(text)
    except ValueError as error:  # JSONDecodeError, or an integer over Python's digit limit
        raise IngestError(f"invalid JSON{where}: {error}") from None
    except RecursionError:
        raise IngestError(f"invalid JSON{where}: nested too deeply to read") from None


def _dump_json(value: Any, indent: int | None = None) -> str:
    try:
        return json.dumps(value, indent=indent, ensure_ascii=False)
    except RecursionError:  # the indenting encoder recurses in Python, deeper than the decoder did
        raise IngestError("JSON nested too deeply to render as text") from None


# A top-level key in json.dumps(indent=2): two spaces, never more (nested keys have four or more).
_JSON_TOP_KEY = re.compile(r'^  "((?:[^"\\]|\\.)*)": ', re.MULTILINE)
# A top-level key in block YAML: at column 0, not a comment, a document marker or a list item.
_YAML_TOP_KEY = re.compile(r"^(?![#\-\s.])(?:\"([^\"]*)\"|'([^']*)'|([^:\n]+?))[ \t]*:(?:[ \t]|$)", re.MULTILINE)


def _key_sections(text: str, pattern: re.Pattern[str], decode: Callable[[re.Match[str]], str]) -> list[list[Any]]:
    """[start_char, key] per top-level key, so chunks carry the key as their breadcrumb."""
    return [[match.start(), decode(match)] for match in pattern.finditer(text)]


def _parse_json(path: Path) -> list[ParsedDocument]:
    value = _load_json(_read_text(path))
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return [ParsedDocument(value["text"], _title_author(value.get("title"), value.get("author")))]
    text = _dump_json(value, indent=2)
    # An object's top-level keys are its sections; a top-level array has none (its items are
    # records of one kind, which a chunker cuts by size like any list).
    if not isinstance(value, dict):
        return [ParsedDocument(text)]
    sections = _key_sections(text, _JSON_TOP_KEY, lambda match: json.loads(f'"{match.group(1)}"'))
    return [ParsedDocument(text, {"sections": sections} if sections else {})]


def _parse_yaml(path: Path) -> list[ParsedDocument]:
    """The file's own text (so answer spans and line numbers match it), checked to be YAML with
    ``yaml.safe_load`` within the bounds of ``ragkit.yaml_input``, its top-level keys as sections."""
    text = _read_text(path)
    try:
        parse_yaml_documents(text)
    except yaml.YAMLError as error:
        raise IngestError(f"invalid YAML: {str(error).splitlines()[0]}") from None
    except RecursionError:
        raise IngestError("invalid YAML: nested too deeply to read") from None
    sections = _key_sections(text, _YAML_TOP_KEY, lambda match: next(g for g in match.groups() if g is not None))
    return [ParsedDocument(text, {"sections": sections} if sections else {})]


def _parse_code(path: Path) -> list[ParsedDocument]:
    language = CODE_LANGUAGES.get(file_type_of(path), "text")
    text = _read_text(path)
    metadata: dict[str, Any] = {"language": language}
    if language == "python":
        try:
            docstring = ast.get_docstring(ast.parse(text))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            docstring = None  # not valid Python: still a text document
        if docstring:
            metadata["description"] = " ".join(docstring.split("\n\n")[0].split())[:DESCRIPTION_CHARS]
    return [ParsedDocument(text, metadata)]


def _parse_jsonl(path: Path) -> list[ParsedDocument]:
    records: list[tuple[int, Any]] = []
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if line.strip():
            records.append((number, _load_json(line, f" on line {number}")))
    if records and all(_is_beir_record(record) for _, record in records):
        return _beir_documents(records)
    texts = [
        record["text"] if isinstance(record, dict) and isinstance(record.get("text"), str)
        else _dump_json(record)
        for _, record in records
    ]
    return [ParsedDocument("\n".join(texts))]


def _is_beir_record(record: Any) -> bool:
    return isinstance(record, dict) and isinstance(record.get("text"), str) and ("_id" in record or "id" in record)


def _beir_documents(records: list[tuple[int, Any]]) -> list[ParsedDocument]:
    documents, seen = [], set()
    for number, record in records:
        own_id = str(record["_id"] if "_id" in record else record["id"])
        if own_id in seen:
            raise IngestError(f"duplicate document id '{own_id}' on line {number}")
        seen.add(own_id)
        metadata = {"title": record["title"]} if isinstance(record.get("title"), str) and record["title"] else {}
        documents.append(ParsedDocument(record["text"], metadata, own_id=own_id))
    return documents


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


def _parse_html(path: Path) -> list[ParsedDocument]:
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
    metadata: dict[str, Any] = {"sections": _sections(headings)}
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
            found["description"] = " ".join(content.split())[:DESCRIPTION_CHARS]
        elif name == "keywords":
            found["tags"] = as_tags(content)
    return found


_PARSERS: dict[str, Callable[[Path], list[ParsedDocument]]] = {
    "pdf": _parse_pdf,
    "docx": _parse_docx,
    "txt": _parse_txt,
    "md": _parse_markdown,
    "html": _parse_html,
    "htm": _parse_html,
    "csv": _parse_csv,
    "json": _parse_json,
    "jsonl": _parse_jsonl,
    "yaml": _parse_yaml,
    "yml": _parse_yaml,
    **dict.fromkeys(CODE_LANGUAGES, _parse_code),
}

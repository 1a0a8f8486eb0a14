"""Fuzzing every loader: hostile bytes give documents or an IngestError, never anything else.

Profiles and inputs: tests/corpus/fuzzing.py (RAGKIT_FUZZ=full for the long run).
"""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragkit.chunkers import chunkers
from ragkit.corpus.loaders import parse_file
from ragkit.corpus.model import make_document
from ragkit.corpus.parsers.markdown import atx_heading
from ragkit.errors import IngestError
from tests.corpus import pdf_samples
from tests.corpus.fuzzing import (
    fuzz_settings,
    hostile_text,
    mixed_encodings,
    mutated,
    nested_markdown,
)

TEXT_TYPES = ["txt", "md", "html", "csv", "json", "jsonl"]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def parse_or_refuse(folder: Path, file_type: str, data: bytes) -> None:
    """The loader contract: documents with text in valid Unicode, or IngestError with a reason."""
    path = folder / f"input.{file_type}"
    path.write_bytes(data)
    try:
        documents = parse_file(path, file_type)
    except IngestError as error:
        assert error.reason.strip(), "an IngestError must say why"
        return
    assert documents and any(document.text.strip() for document in documents)
    for document in documents:
        document.text.encode("utf-8")  # no lone surrogates: caches, indexes and tokenizers need UTF-8
        json.dumps(document.to_json(), ensure_ascii=False).encode("utf-8")


def _json_values(depth: int) -> st.SearchStrategy:
    leaves = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True), st.integers(), hostile_text)
    return st.recursive(leaves,
                        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
                        max_leaves=depth)


@st.composite
def json_documents(draw: st.DrawFn) -> bytes:
    """Valid JSON of any shape, JSON nested past the parser's recursion limit, huge numbers, escapes."""
    kind = draw(st.sampled_from(["value", "text-record", "deep", "number", "escapes"]))
    if kind == "value":
        return json.dumps(draw(_json_values(30)), ensure_ascii=draw(st.booleans())).encode("utf-8")
    if kind == "text-record":
        record = {"text": draw(hostile_text), "title": draw(hostile_text | st.integers()),
                  "author": draw(st.none() | hostile_text)}
        return json.dumps(record).encode("utf-8")
    if kind == "deep":
        depth = draw(st.integers(500, 100_000))
        opener = draw(st.sampled_from(["[", '{"a":']))
        return (opener * depth + "1" + ("]" if opener == "[" else "}") * depth).encode()
    if kind == "number":
        return (draw(st.sampled_from(["", "-"])) + "9" * draw(st.integers(1, 20_000))).encode()
    surrogates = draw(st.lists(st.sampled_from(["\\ud800", "\\udfff", "\\ud83d\\ude00", "\\u0000", "\\ud83d"]),
                               min_size=1))
    return ('{"text": "' + "x".join(surrogates) + '", "title": "\\udc80"}').encode()


@st.composite
def jsonl_documents(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.one_of(
        json_documents(),
        st.builds(lambda i, text: json.dumps({"_id": i, "text": text}).encode(),
                  st.text(max_size=5) | st.integers(), hostile_text),
        st.builds(lambda text: json.dumps({"id": "same", "text": text}).encode(), hostile_text),
        mixed_encodings(),
    ), max_size=6))
    return b"\n".join(line.replace(b"\n", b" ") for line in lines)


@st.composite
def csv_documents(draw: st.DrawFn) -> bytes:
    cell = st.one_of(hostile_text, st.sampled_from(['"', '""', '"a,b"', ",", "\n", "\r\n", "\x00", "=1+1", ""]))
    rows = draw(st.lists(st.lists(cell, max_size=6), max_size=8))
    delimiter = draw(st.sampled_from([",", ";", "\t"]))
    return "\n".join(delimiter.join(row) for row in rows).encode("utf-8", errors="surrogatepass")


@st.composite
def html_documents(draw: st.DrawFn) -> bytes:
    tags = ["p", "div", "h1", "h3", "pre", "script", "style", "table", "td", "br", "b", "!--", "title", "head",
            "![CDATA["]
    depth = draw(st.integers(0, 3_000))
    soup = "".join(f"<{draw(st.sampled_from(tags))}>" for _ in range(min(depth, 50)))
    body = draw(hostile_text)
    charset = draw(st.sampled_from(["utf-8", "latin-1", "shift_jis", "utf-16", "bogus-charset"]))
    text = f'<meta charset="{charset}">' + "<div>" * depth + soup + body + "</p>" * draw(st.integers(0, 50))
    return text.encode(draw(st.sampled_from(["utf-8", "latin-1", "utf-16"])), errors="ignore")


def raw_bytes(extra: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    text = hostile_text.map(lambda value: value.encode("utf-8"))
    return st.one_of(st.binary(max_size=2_000), mixed_encodings(), text, extra)


TYPE_INPUTS = {
    "txt": raw_bytes(st.nothing()),
    "md": raw_bytes(nested_markdown().map(str.encode)),
    "html": raw_bytes(html_documents()),
    "csv": raw_bytes(csv_documents()),
    "json": raw_bytes(json_documents()),
    "jsonl": raw_bytes(jsonl_documents()),
}


@pytest.mark.parametrize("file_type", TEXT_TYPES)
@fuzz_settings(ci=30, full=900)
@given(data=st.data())
def test_fuzz_text_loaders(scratch: Path, file_type: str, data: st.DataObject) -> None:
    parse_or_refuse(scratch, file_type, data.draw(TYPE_INPUTS[file_type], label="bytes"))


@pytest.fixture(scope="module")
def real_pdf(scratch: Path) -> bytes:
    return pdf_samples.report_pdf(scratch / "real.pdf", pages=3, lines=5).read_bytes()


@pytest.fixture(scope="module")
def real_docx() -> bytes:
    import docx

    word = docx.Document()
    word.core_properties.title = "Handbook"
    word.add_heading("Chapter", level=1)
    word.add_paragraph("Body text with a table below.")
    table = word.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "cell"
    word.add_heading("Detail", level=2)
    out = io.BytesIO()
    word.save(out)
    return out.getvalue()


def broken(original: bytes, magic: bytes) -> st.SearchStrategy[bytes]:
    return st.one_of(mutated(original), st.binary(max_size=2_000).map(lambda junk: magic + junk))


@fuzz_settings(ci=30, full=1200)
@given(data=st.data())
def test_fuzz_pdf_loader(scratch: Path, real_pdf: bytes, data: st.DataObject) -> None:
    parse_or_refuse(scratch, "pdf", data.draw(broken(real_pdf, b"%PDF-1.7\n"), label="bytes"))


@fuzz_settings(ci=30, full=1200)
@given(data=st.data())
def test_fuzz_docx_loader(scratch: Path, real_docx: bytes, data: st.DataObject) -> None:
    parse_or_refuse(scratch, "docx", data.draw(broken(real_docx, b"PK\x03\x04"), label="bytes"))


# The header regex atx_heading replaced: the same reading, with catastrophic backtracking.
ATX_REFERENCE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")


@fuzz_settings(ci=300, full=2000)
@given(line=st.text(st.sampled_from(" #\tax\u3000\u00a0"), max_size=30))
def test_fuzz_atx_heading_reads_lines_as_the_reference_regex(line: str) -> None:
    match = ATX_REFERENCE.match(line)
    assert atx_heading(line) == (None if match is None else (len(match.group(1)), match.group(2) or ""))


@pytest.mark.integration
def test_a_long_header_line_of_spaces_then_hashes_is_read_in_linear_time(scratch: Path) -> None:
    line = "# x" + " " * 40_000 + "#" * 40_000 + " y"
    started = time.process_time()  # this process's CPU time: a loaded machine's other work does not count
    path = scratch / "long.md"
    path.write_text(line, encoding="utf-8")
    [document] = parse_file(path, "md")
    chunks = chunkers.build({"type": "markdown", "params": {"chunk_size": 5000, "chunk_overlap": 0}}).chunk(
        [make_document("long.md", document.text)])
    assert time.process_time() - started < 10 and "".join(chunk.text for chunk in chunks).count("#") == 40_001

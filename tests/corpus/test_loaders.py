"""Per-format loading: text, structure metadata (pages, sections) and failure reasons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragkit.corpus.loaders import load_file
from ragkit.errors import IngestError
from tests.factories import make_pdf

PAGE_ONE = "First page says hello."
PAGE_TWO = "Second page talks about llamas."




@pytest.fixture
def two_page_pdf(tmp_path: Path) -> Path:
    return make_pdf(tmp_path / "report.pdf", [PAGE_ONE, PAGE_TWO], title="Llama Report", author="Ann Author")


@pytest.mark.integration
def test_pdf_pages_are_joined_and_page_starts_point_at_each_page(two_page_pdf: Path) -> None:
    [document] = load_file(two_page_pdf, "docs/report.pdf")
    starts = document.metadata["page_starts"]
    assert len(starts) == 2 and starts[0] == 0
    assert document.text[: starts[1]].startswith(PAGE_ONE)
    assert document.text[starts[1] :].startswith(PAGE_TWO)
    assert document.text[starts[1] - 2 : starts[1]] == "\n\n"
    assert document.metadata["title"] == "Llama Report"
    assert document.metadata["author"] == "Ann Author"


@pytest.mark.integration
def test_every_document_carries_the_common_metadata(two_page_pdf: Path) -> None:
    [document] = load_file(two_page_pdf, "docs/report.pdf")
    assert document.id_ == "docs/report.pdf"
    assert document.metadata["doc_id"] == "docs/report.pdf"
    assert document.metadata["file_name"] == "report.pdf"
    assert document.metadata["file_type"] == "pdf"
    assert document.metadata["size_bytes"] == two_page_pdf.stat().st_size


@pytest.mark.integration
def test_pdf_without_metadata_falls_back_to_file_stem(tmp_path: Path) -> None:
    # reportlab writes "untitled"/"anonymous" when none is set: placeholders, not a title.
    [document] = load_file(make_pdf(tmp_path / "plain.pdf", ["text"]), "plain.pdf")
    assert document.metadata["title"] == "plain"
    assert "author" not in document.metadata


@pytest.mark.integration
def test_truncated_pdf_is_reported_as_corrupt(two_page_pdf: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(two_page_pdf.read_bytes()[:300])
    with pytest.raises(IngestError, match=r"^corrupt PDF"):
        load_file(broken, "broken.pdf")


@pytest.mark.integration
def test_pdf_with_no_text_has_no_extractable_text(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="no extractable text"):
        load_file(make_pdf(tmp_path / "scan.pdf", [""]), "scan.pdf")


MARKDOWN = """# Guide

Intro.

## Install

```bash
# not a header, inside a fence
```

### Linux ###

Steps.

## Usage

Setext Title
============

# Appendix
"""


@pytest.mark.integration
def test_markdown_sections_are_breadcrumbs_at_header_offsets(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text(MARKDOWN, encoding="utf-8")
    [document] = load_file(path, "guide.md")
    assert document.text == MARKDOWN
    expected = [
        ("# Guide", "Guide"),
        ("## Install", "Guide > Install"),
        ("### Linux ###", "Guide > Install > Linux"),
        ("## Usage", "Guide > Usage"),
        ("Setext Title\n====", "Setext Title"),
        ("# Appendix", "Appendix"),
    ]
    assert document.metadata["sections"] == [[MARKDOWN.index(line), crumb] for line, crumb in expected]
    assert document.metadata["title"] == "Guide"


@pytest.mark.integration
def test_docx_paragraphs_headings_and_core_properties(tmp_path: Path) -> None:
    import docx

    word = docx.Document()
    word.core_properties.title = "Handbook"
    word.core_properties.author = "Bo Writer"
    word.add_heading("Chapter", level=1)
    word.add_paragraph("Chapter body.")
    word.add_heading("Detail", level=2)
    word.add_paragraph("Detail body.")
    word.add_heading("Next", level=1)
    path = tmp_path / "handbook.docx"
    word.save(str(path))

    [document] = load_file(path, "handbook.docx")
    assert document.text == "Chapter\nChapter body.\nDetail\nDetail body.\nNext"
    sections = document.metadata["sections"]
    assert [crumb for _, crumb in sections] == ["Chapter", "Chapter > Detail", "Next"]
    assert [document.text[start:].split("\n")[0] for start, _ in sections] == ["Chapter", "Detail", "Next"]
    assert document.metadata["title"] == "Handbook"
    assert document.metadata["author"] == "Bo Writer"


@pytest.mark.integration
def test_html_visible_text_title_and_heading_sections(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(
        "<html><head><title>My Page</title><style>p {color: red}</style></head><body>"
        "<script>var hidden = 1;</script><h1>Top</h1><p>Hello   <b>bold</b>\nworld.</p>"
        "<!-- a comment --><h2>Sub</h2><ul><li>one</li><li>two</li></ul></body></html>",
        encoding="utf-8",
    )
    [document] = load_file(path, "page.html")
    assert document.text == "Top\nHello bold world.\nSub\none\ntwo"
    assert document.metadata["title"] == "My Page"
    assert document.metadata["sections"] == [[0, "Top"], [document.text.index("Sub"), "Top > Sub"]]


@pytest.mark.integration
def test_csv_rows_render_as_column_value_lines(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text("name,age\nAnn,31\nBob,\n", encoding="utf-8")
    [document] = load_file(path, "people.csv")
    assert document.text == "name: Ann; age: 31\nname: Bob"
    assert document.metadata["title"] == "people"


@pytest.mark.integration
def test_json_uses_text_field_or_pretty_prints(tmp_path: Path) -> None:
    with_text = tmp_path / "note.json"
    with_text.write_text(json.dumps({"title": "A note", "text": "The body."}), encoding="utf-8")
    plain = tmp_path / "config.json"
    plain.write_text('{"a": [1, 2]}', encoding="utf-8")
    [note] = load_file(with_text, "note.json")
    [config] = load_file(plain, "config.json")
    assert (note.text, note.metadata["title"]) == ("The body.", "A note")
    assert config.text == json.dumps({"a": [1, 2]}, indent=2)


@pytest.mark.integration
def test_beir_jsonl_gives_one_document_per_line_with_its_own_id(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    lines = [{"_id": "d1", "title": "First", "text": "one"}, {"_id": "d2", "title": "", "text": "two"}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    documents = load_file(path, "beir/corpus.jsonl")
    assert [(d.id_, d.text, d.metadata["title"]) for d in documents] == [("d1", "one", "First"), ("d2", "two", "d2")]
    assert {d.metadata["source_file"] for d in documents} == {"beir/corpus.jsonl"}


@pytest.mark.integration
def test_other_jsonl_is_one_document(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"text": "first"}\n{"level": "info"}\n', encoding="utf-8")
    [document] = load_file(path, "log.jsonl")
    assert document.id_ == "log.jsonl"
    assert document.text == 'first\n{"level": "info"}'


@pytest.mark.integration
@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("empty.txt", b"", "empty file"),
        ("blank.md", b"  \n\n", "no extractable text"),
        ("bad.json", b"{nope", "invalid JSON"),
        ("bad.jsonl", b'{"a": 1}\n{oops\n', "invalid JSON on line 2"),
        ("dupes.jsonl", b'{"_id": "x", "text": "a"}\n{"_id": "x", "text": "b"}\n', "duplicate document id 'x'"),
        ("bad.docx", b"PK\x03\x04 not really a zip", "corrupt DOCX"),
        ("data.xml", b"<a/>", "no loader for '.xml'"),
    ],
)
def test_unreadable_files_raise_a_reason(tmp_path: Path, name: str, content: bytes, reason: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(IngestError, match=reason):
        load_file(path, name)


@pytest.mark.integration
def test_txt_keeps_text_and_drops_bom(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes("\ufeffhello\nworld".encode("utf-8"))
    [document] = load_file(path, "notes.txt")
    assert document.text == "hello\nworld"

"""Document and chunk metadata: description, tags, modification time, total chunks, code
definitions, JSON/YAML top-level keys as sections, Latin-1 text; and none of it changes what is
embedded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ragkit.chunkers import chunkers
from ragkit.corpus.loaders import first_paragraph, load_file, parse_file
from ragkit.corpus.validation import validate_file
from ragkit.errors import IngestError
from ragkit.settings import get_settings

pytestmark = pytest.mark.unit


def write(folder: Path, name: str, content: str | bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def test_markdown_front_matter_gives_description_tags_and_title(tmp_path):
    path = write(tmp_path, "guide.md", "---\ntitle: The Guide\ndescription: How to  use it.\ntags: [setup, cli]\n---\n"
                                       "# Heading\n\nSome words here to read first.\n")
    (document,) = load_file(path, "guide.md")
    meta = document.metadata
    assert (meta["title"], meta["description"], meta["tags"]) == ("The Guide", "How to use it.", ["setup", "cli"])


def test_without_its_own_description_a_document_gets_its_first_paragraph_of_prose(tmp_path):
    path = write(tmp_path, "notes.md", "# Notes\n\n---\n\nThe queue keeps jobs   in SQLite\nfor restarts.\n\nMore.\n")
    (document,) = load_file(path, "notes.md")
    assert document.metadata["description"] == "The queue keeps jobs in SQLite for restarts."
    assert document.metadata["tags"] == []


@pytest.mark.parametrize(("text", "expected"), [
    ("", ""),
    ("# Only a heading", ""),
    ("Too short.\n\nThis paragraph has enough words in it.", "This paragraph has enough words in it."),
    ("```\ncode block here with words\n```\n\nProse comes after the code.", "Prose comes after the code."),
    ("word " * 100, ("word " * 100).strip()[:300]),
])
def test_first_paragraph(text, expected):
    assert first_paragraph(text) == expected


def test_html_meta_description_and_keywords(tmp_path):
    path = write(tmp_path, "page.html", '<html><head><title>T</title><meta name="description" content="A page.">'
                                        '<meta name="keywords" content="a, b, a"></head><body><p>Body text '
                                        'that is long enough.</p></body></html>')
    (document,) = load_file(path, "page.html")
    assert document.metadata["description"] == "A page." and document.metadata["tags"] == ["a", "b"]


def test_modification_time_is_recorded_in_utc(tmp_path):
    path = write(tmp_path, "a.txt", "Some plain text for the test file.")
    os.utime(path, (1_700_000_000, 1_700_000_000))
    (document,) = load_file(path, "a.txt")
    assert document.metadata["modified"] == "2023-11-14T22:13:20+00:00"


def test_json_objects_have_their_top_level_keys_as_sections(tmp_path):
    value = {"server": {"port": 80, "tls": {"on": True}}, 'we"ird': [1, 2], "z": "last"}
    path = write(tmp_path, "conf.json", json.dumps(value))
    (parsed,) = parse_file(path)
    assert parsed.text == json.dumps(value, indent=2)  # the text is unchanged
    assert [key for _, key in parsed.metadata["sections"]] == ["server", 'we"ird', "z"]  # nested "tls" is not
    for start, key in parsed.metadata["sections"]:
        assert parsed.text[start:].startswith(f"  {json.dumps(key)}: ")


def test_a_json_array_has_no_sections(tmp_path):
    (parsed,) = parse_file(write(tmp_path, "list.json", json.dumps([{"a": 1}, {"a": 2}])))
    assert "sections" not in parsed.metadata


def test_yaml_keeps_its_text_and_has_top_level_keys_as_sections(tmp_path):
    text = "# settings\nqueue:\n  timeout: 30\n  nested: {a: 1}\n'quoted key': 2\nlist:\n  - x\n---\nsecond: doc\n"
    (parsed,) = parse_file(write(tmp_path, "s.yaml", text))
    assert parsed.text == text
    sections = parsed.metadata["sections"]
    assert [key for _, key in sections] == ["queue", "quoted key", "list", "second"]
    assert [text[start:].split(":")[0] for start, _ in sections] == ["queue", "'quoted key'", "list", "second"]


def test_invalid_yaml_is_refused_with_the_reason(tmp_path):
    with pytest.raises(IngestError, match="invalid YAML"):
        parse_file(write(tmp_path, "bad.yml", "a: [1\n"))


def test_sections_become_chunk_breadcrumbs(tmp_path):
    text = "alpha:\n" + "  x: 1\n" * 10 + "beta:\n" + "  y: 2\n" * 10
    (document,) = load_file(write(tmp_path, "s.yaml", text), "s.yaml")
    chunker = chunkers.build({"type": "recursive", "params": {"chunk_size": 60, "chunk_overlap": 0}})
    crumbs = [node.metadata.get("breadcrumb") for node in chunker.chunk([document])]
    assert crumbs[0] == "alpha" and crumbs[-1] == "beta"


def test_latin_1_text_is_read_and_recorded(tmp_path):
    path = write(tmp_path, "old.txt", "Un café crème, s'il vous plaît.".encode("latin-1"))
    validate_file(path, get_settings())
    (document,) = load_file(path, "old.txt")
    assert document.text == "Un café crème, s'il vous plaît." and document.metadata["encoding"] == "latin-1"
    (utf8,) = load_file(write(tmp_path, "new.txt", "Un café."), "new.txt")
    assert "encoding" not in utf8.metadata


def test_a_binary_file_named_text_is_still_refused(tmp_path):
    with pytest.raises(IngestError, match="binary content"):
        validate_file(write(tmp_path, "x.txt", b"\x7fELF\x00\x01\x02" * 50), get_settings())


PYTHON = '''"""A small module.

More text."""

import os
from pathlib import Path
from . import sibling


class Store(Base):
    """Keeps things.

    Details."""

    def put(self, key: str, value: int = 1) -> None:
        """Put one thing."""
        self.items[key] = value

    def get(self, key: str) -> int:
        """Get one thing back, or fail with a KeyError naming the key."""
        return self.items[key]


async def fetch(url, *, timeout=5):
    return url
'''


def test_python_files_and_chunks_describe_their_definitions(tmp_path):
    (document,) = load_file(write(tmp_path, "pkg/store.py", PYTHON), "pkg/store.py")
    assert document.metadata["language"] == "python" and document.metadata["description"] == "A small module."
    chunker = chunkers.build({"type": "code", "params": {"max_chars": 200, "chunk_overlap": 20}})
    chunks = {node.metadata.get("breadcrumb", ""): node.metadata for node in chunker.chunk([document])}
    method = chunks["Store > put"]
    assert (method["function"], method["class"], method["signature"], method["docstring"]) == (
        "put", "Store", "def put(self, key: str, value: int=1) -> None", "Put one thing.")
    function = chunks["fetch"]
    assert function["signature"] == "async def fetch(url, *, timeout=5)" and "class" not in function
    assert "docstring" not in function
    assert chunks["Store"]["class"] == "Store"
    assert all(meta["imports"] == ["os", "pathlib", "."] for meta in chunks.values())
    assert {meta["total_chunks"] for meta in chunks.values()} == {len(chunker.chunk([document]))}


def test_other_code_files_are_text_without_definitions(tmp_path):
    (document,) = load_file(write(tmp_path, "app.js", "function hello() { return 1; }\n"), "app.js")
    assert document.metadata["language"] == "javascript"
    (node, *_) = chunkers.build("code").chunk([document])
    assert "function" not in node.metadata and node.metadata["chunk_fallback"] == "recursive"


def test_new_metadata_is_not_embedded_or_shown_to_the_llm(tmp_path):
    from llama_index.core.schema import MetadataMode

    (document,) = load_file(write(tmp_path, "a.md", "---\ndescription: d\ntags: [t]\n---\n# A\n\nText to chunk."),
                            "a.md")
    for contextualize in (False, True):
        chunker = chunkers.build({"type": "markdown", "params": {"contextualize": contextualize}})
        for node in chunker.chunk([document]):
            assert node.get_content(MetadataMode.EMBED) == node.get_content()
            context = [part for part in (node.metadata["title"], node.metadata.get("breadcrumb")) if part]
            # The text alone, or the title and breadcrumb before it: nothing of the new fields.
            expected = "\n".join(context) + "\n\n" + node.text if contextualize else node.text
            assert node.metadata["embed_text"] == expected
            assert "modified" not in node.get_content(MetadataMode.LLM)
            assert "total_chunks" not in node.get_content(MetadataMode.LLM)

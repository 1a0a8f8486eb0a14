from __future__ import annotations

from typing import Any, ClassVar

import pytest

from ragkit.chunkers import chunkers
from ragkit.chunkers.markdown import markdown_sections
from ragkit.corpus.model import make_document
from tests.chunkers.test_chunker_contract import MARKDOWN, ChunkerContract

pytestmark = pytest.mark.unit


class TestMarkdownChunker(ChunkerContract):
    spec: ClassVar[dict[str, Any]] = {"type": "markdown", "params": {"chunk_size": 120, "chunk_overlap": 30}}
    out_of_bounds: ClassVar[dict[str, Any]] = {"chunk_overlap": -5}


def test_one_chunk_per_section_with_exact_breadcrumbs():
    nodes = chunkers.build("markdown").chunk([make_document("guide.md", MARKDOWN)])
    assert [(n.text.split("\n")[0], n.metadata.get("breadcrumb")) for n in nodes] == [
        ("Preamble line before any header.", None),
        ("# Intro", "Intro"),
        ("## Setup", "Intro > Setup"),
        ("## Usage", "Intro > Usage"),
        ("# Reference", "Reference"),
    ]
    setup = nodes[2]
    assert "# not a header, a shell comment" in setup.text and setup.text.endswith("```")


def test_header_lines_inside_fences_are_ignored():
    text = "# A\n~~~\n# no\n~~~\n## B\n```python\n## no\n```\n### C\ntext\n"
    assert [s.breadcrumb for s in markdown_sections(text)] == ["A", "A > B", "A > B > C"]


@pytest.mark.parametrize(
    ("line", "breadcrumb"),
    [("# Title #", "Title"), ("   ## C# tips", "C# tips"), ("#NoSpace", None), ("    # indented code", None)],
)
def test_header_syntax(line, breadcrumb):
    sections = markdown_sections(line + "\n")
    assert (sections[0].breadcrumb if sections else None) == breadcrumb


def test_a_long_section_is_split_recursively_and_keeps_its_breadcrumb():
    text = "# Intro\n\n## Setup\n\n" + "Install things carefully. " * 40
    chunker = chunkers.build({"type": "markdown", "params": {"chunk_size": 200, "chunk_overlap": 50}})
    nodes = chunker.chunk([make_document("d", text)])
    setup = [n for n in nodes if n.metadata.get("breadcrumb") == "Intro > Setup"]
    assert len(setup) > 3 and all(len(n.text) <= 200 for n in nodes)


def test_contextualized_chunks_carry_the_breadcrumb():
    chunker = chunkers.build({"type": "markdown", "params": {"contextualize": True}})
    document = make_document("guide.md", MARKDOWN, {"title": "Guide"})
    setup = chunker.chunk([document])[2]
    assert setup.metadata["embed_text"] == "Guide\nIntro > Setup\n\n" + setup.text

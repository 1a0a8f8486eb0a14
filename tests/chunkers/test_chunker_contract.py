"""ChunkerContract: the tests every chunker (built-in or plugin) inherits.

A test class sets ``spec`` (small sizes, so the documents below give several chunks) and
inherits; it may override the class-scoped ``chunker_deps`` or ``documents`` fixtures.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, ClassVar

import pytest
from llama_index.core.schema import Document, MetadataMode, TextNode

from ragkit.chunkers import chunkers
from ragkit.corpus.model import make_document
from ragkit.errors import ConfigError

PROSE = (
    "Retrieval-augmented generation grounds a language model in documents. "
    "A retriever finds passages; the generator reads them and answers.\n\n"
    "Chunking decides what a passage is. Small chunks are precise but lose context. "
    "Large chunks keep context but dilute the embedding, and they cost more tokens.\n\n"
    "Overlap between chunks keeps a sentence that straddles a boundary retrievable. "
    "Evaluation compares configurations on the same questions and the same ground truth."
)
MARKDOWN = (
    "Preamble line before any header.\n\n"
    "# Intro\n\nRAG systems combine retrieval and generation.\n\n"
    "## Setup\n\nInstall the package, then run the quickstart experiment.\n\n"
    "```bash\n# not a header, a shell comment\npip install ragkit\n```\n\n"
    "## Usage\n\nWrite a YAML grid and run it. Compare the runs in the dashboard.\n\n"
    "# Reference\n\nEvery component has a schema with bounds and descriptions.\n"
)
PYTHON = (
    '"""A small module."""\n\nimport math\n\nRATE = 0.5\n\n\n'
    "# Scales a value.\n@staticmethod\ndef scale(x: float) -> float:\n    return x * RATE\n\n\n"
    "def area(r: float) -> float:\n    return math.pi * r * r\n\n\n"
    "class Shape:\n    sides = 0\n\n    def describe(self) -> str:\n        return f'{self.sides} sides'\n\n\n"
    "if __name__ == '__main__':\n    print(area(2.0))\n"
)
ODD_WHITESPACE = "a  b\n\n\n c\t d  \n\n\t \n" + "word " * 40 + "\n\n  end  "
UNICODE = "Ünïcödé text — naïve café. 日本語の文章です。これは二文目です。 Ελληνικά κείμενα εδώ. " * 6
PAGED = (
    "First page talks about embeddings and vector search. " * 4
    + "Second page is about rerankers and judges. " * 4
    + "Third page covers metrics such as recall and nDCG. " * 4
)


def contract_documents() -> list[Document]:
    page_starts = [0, PAGED.index("Second"), PAGED.index("Third")]
    return [
        make_document("prose.txt", PROSE),
        make_document("guide.md", MARKDOWN, {"file_name": "guide.md"}),
        make_document("shapes.py", PYTHON, {"file_name": "shapes.py"}),
        make_document("odd.txt", ODD_WHITESPACE),
        make_document("unicode.txt", UNICODE),
        make_document("blank.txt", " \n\t \n"),
        make_document(
            "paged.pdf",
            PAGED,
            {
                "title": "Paged report",
                "page_starts": page_starts,
                "sections": [[0, "Report"], [page_starts[1], "Report > Judges"]],
            },
        ),
    ]


class ChunkerContract:
    spec: ClassVar[dict[str, Any]]
    # A value outside the bounds of one of the chunker's own parameters.
    out_of_bounds: ClassVar[dict[str, Any]] = {"contextualize": "sometimes"}

    # Class-scoped so a chunker that embeds (semantic) chunks the documents once per class.
    @pytest.fixture(scope="class")
    def chunker_deps(self) -> dict[str, Any]:
        return {}

    @pytest.fixture(scope="class")
    def documents(self) -> list[Document]:
        return contract_documents()

    @pytest.fixture(scope="class")
    def build(self, chunker_deps):
        def build(params: dict[str, Any] | None = None) -> Any:
            spec = {"type": self.spec["type"], "params": {**self.spec.get("params", {}), **(params or {})}}
            return chunkers.build(spec, **chunker_deps)

        return build

    @pytest.fixture(scope="class")
    def nodes(self, build, documents) -> list[TextNode]:
        return build().chunk(documents)

    def test_node_text_is_the_exact_slice(self, nodes, documents):
        by_id = {d.id_: d for d in documents}
        assert nodes
        for node in nodes:
            start, end = node.metadata["start_char"], node.metadata["end_char"]
            assert by_id[node.metadata["doc_id"]].text[start:end] == node.text
            assert (node.start_char_idx, node.end_char_idx) == (start, end)

    def test_chunk_indexes_are_consecutive_per_document(self, nodes, documents):
        for document in documents:
            mine = [n for n in nodes if n.metadata["doc_id"] == document.id_]
            assert [n.metadata["chunk_index"] for n in mine] == list(range(len(mine)))
            assert all(n.ref_doc_id == document.id_ for n in mine)
        assert len({n.node_id for n in nodes}) == len(nodes)

    def test_no_empty_or_padded_chunks(self, nodes):
        assert not [n for n in nodes if n.metadata["doc_id"] == "blank.txt"]
        for node in nodes:
            assert node.text and node.text == node.text.strip()

    def test_spans_cover_every_non_whitespace_character(self, nodes, documents):
        for document in documents:
            covered = [False] * len(document.text)
            for node in nodes:
                if node.metadata["doc_id"] == document.id_:
                    covered[node.metadata["start_char"] : node.metadata["end_char"]] = [True] * len(node.text)
            missed = [i for i, ch in enumerate(document.text) if not ch.isspace() and not covered[i]]
            assert not missed, f"{document.id_}: characters at {missed[:5]} are in no chunk"

    def test_chunking_is_deterministic(self, build, documents, nodes):
        again = build().chunk(documents)
        assert [(n.node_id, n.text, n.metadata) for n in again] == [(n.node_id, n.text, n.metadata) for n in nodes]

    def test_llama_index_entry_point_gives_the_same_nodes(self, build, documents, nodes):
        through_llama = build().get_nodes_from_documents(documents)
        assert [(n.node_id, n.text, n.metadata) for n in through_llama] == [
            (n.node_id, n.text, n.metadata) for n in nodes
        ]

    def test_positional_metadata_becomes_page_and_breadcrumb(self, nodes, documents):
        paged = documents[-1]
        starts, sections = paged.metadata["page_starts"], paged.metadata["sections"]
        mine = [n for n in nodes if n.metadata["doc_id"] == paged.id_]
        for node in mine:
            assert "page_starts" not in node.metadata and "sections" not in node.metadata
            start = node.metadata["start_char"]
            assert node.metadata["page"] == bisect_right(starts, start)
            assert node.metadata["breadcrumb"] == [s for s in sections if s[0] <= start][-1][1]
            assert node.metadata["title"] == "Paged report"

    def test_embed_text_is_the_chunk_unless_contextualized(self, build, nodes, documents):
        for node in nodes:
            assert node.metadata["embed_text"] == node.text
            assert node.get_content(metadata_mode=MetadataMode.EMBED) == node.text
        paged = documents[-1]
        for node in build({"contextualize": True}).chunk([paged]):
            prefix = f"Paged report\n{node.metadata['breadcrumb']}\n\n"
            assert node.metadata["embed_text"] == prefix + node.text

    def test_spec_key_is_stable_and_depends_on_params(self, build):
        chunker = build()
        assert chunker.spec_key() == build().spec_key()
        assert chunker.spec_key() != build({"contextualize": True}).spec_key()
        assert chunkers.resolve(chunker.spec_dict()).model_dump() == chunker.spec_dict()
        assert chunker.kind == "chunker" and chunker.name == self.spec["type"]

    def test_unknown_param_is_a_config_error_listing_valid_ones(self):
        with pytest.raises(ConfigError) as error:
            chunkers.build({"type": self.spec["type"], "params": {"no_such_param": 1}})
        message = str(error.value)
        assert "no_such_param" in message and "Valid parameters:" in message and "contextualize" in message

    def test_out_of_bounds_param_is_a_config_error_naming_it(self):
        with pytest.raises(ConfigError) as error:
            chunkers.build({"type": self.spec["type"], "params": self.out_of_bounds})
        assert all(name in str(error.value) for name in self.out_of_bounds)

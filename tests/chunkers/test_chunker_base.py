"""The span -> node plumbing every chunker shares, exercised through a minimal plugin chunker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
from llama_index.core.schema import MetadataMode, NodeRelationship

from ragkit.chunkers import Chunker, ChunkerParams, Span, chunkers, clean_spans, close_gaps, locate_chunks
from ragkit.corpus.model import make_document

pytestmark = pytest.mark.unit


class LineChunker(Chunker):
    """One chunk per line, untrimmed: the base must trim and drop blank lines."""

    name: ClassVar[str] = "lines"
    Params: ClassVar[type[ChunkerParams]] = ChunkerParams

    def split_spans(self, text: str, metadata: Mapping[str, Any]) -> list[Span]:
        spans, start = [], 0
        for line in text.splitlines(keepends=True):
            spans.append(Span(start, start + len(line)))
            start += len(line)
        return spans


def test_spans_are_trimmed_and_blank_ones_dropped():
    document = make_document("d", "  first line  \n\n   \nsecond\n")
    nodes = LineChunker().chunk([document])
    assert [n.text for n in nodes] == ["first line", "second"]
    assert [(n.metadata["start_char"], n.metadata["end_char"]) for n in nodes] == [(2, 12), (20, 26)]
    assert [n.node_id for n in nodes] == ["d:0", "d:1"]


@pytest.mark.parametrize(
    ("start", "page"),
    [(0, 1), (9, 1), (10, 2), (11, 2), (25, 3), (29, 3)],
)
def test_page_is_found_by_bisecting_page_starts(start, page):
    text = "x" * 30
    document = make_document("d", text, {"page_starts": [0, 10, 25]})

    class At(LineChunker):
        def split_spans(self, text: str, metadata: Mapping[str, Any]) -> list[Span]:
            return [Span(start, start + 1)]

    (node,) = At().chunk([document])
    assert node.metadata["page"] == page


def test_breadcrumb_is_the_last_section_starting_at_or_before_the_chunk():
    text = "alpha\nbeta\ngamma\n"
    document = make_document("d", text, {"sections": [[6, "A > B"], [0, "A"], [11, ""]]})
    nodes = LineChunker().chunk([document])
    assert [n.metadata.get("breadcrumb") for n in nodes] == ["A", "A > B", None]


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"title": "T", "sections": [[0, "S > U"]]}, "T\nS > U\n\nbody"),
        ({"sections": [[0, "S"]]}, "S\n\nbody"),
        ({"title": "T"}, "T\n\nbody"),
        ({}, "body"),
    ],
)
def test_contextualized_embed_text_skips_missing_parts(metadata, expected):
    document = make_document("d", "body", metadata)
    (node,) = LineChunker({"contextualize": True}).chunk([document])
    assert node.metadata["embed_text"] == expected
    assert node.text == "body"


def test_node_metadata_modes_and_relationships():
    document = make_document("d", "one\ntwo\nthree", {"title": "T", "columns": ["a", "b"], "page_starts": [0]})
    nodes = LineChunker().chunk([document])
    middle = nodes[1]
    assert middle.get_content(metadata_mode=MetadataMode.EMBED) == "two"
    llm_view = middle.get_content(metadata_mode=MetadataMode.LLM)
    assert "title: T" in llm_view and "doc_id: d" in llm_view and "page: 1" in llm_view
    assert "start_char" not in llm_view and "embed_text" not in llm_view and "columns" not in llm_view
    assert middle.relationships[NodeRelationship.SOURCE].node_id == "d"
    assert middle.relationships[NodeRelationship.PREVIOUS].node_id == "d:0"
    assert middle.relationships[NodeRelationship.NEXT].node_id == "d:2"


def test_params_may_be_given_as_a_mapping_or_left_out():
    assert LineChunker().params == ChunkerParams()
    assert LineChunker({"contextualize": True}).params.contextualize is True


def test_a_registered_plugin_builds_through_the_registry():
    with chunkers.registered("lines", LineChunker):
        chunker = chunkers.build({"type": "lines", "params": {"contextualize": True}})
        assert isinstance(chunker, LineChunker)
        assert chunker.spec_dict() == {"type": "lines", "params": {"contextualize": True}}
    assert "lines" not in chunkers.names()


def test_clean_spans_sorts_and_drops_spans_inside_the_previous_one():
    text = "aaaa bbbb cccc"
    spans = [Span(5, 14), Span(0, 4), Span(0, 9), Span(5, 9), Span(4, 5)]
    assert [(s.start, s.end) for s in clean_spans(text, spans)] == [(0, 9), (5, 14)]


def test_clean_spans_rejects_spans_outside_the_text():
    with pytest.raises(ValueError, match="outside a text of 3 characters"):
        clean_spans("abc", [Span(1, 5)])


@pytest.mark.parametrize(
    ("text", "chunks", "expected"),
    [
        ("one two three", ["one two", "three"], [(0, 7), (8, 13)]),
        # whitespace collapsed by the splitter
        ("a  b\n\n\n c\t d", ["a b", "c d"], [(0, 4), (8, 12)]),
        # a repeated passage goes to its next occurrence, not back to the first
        ("same. same. same.", ["same.", "same.", "same."], [(0, 5), (6, 11), (12, 17)]),
        # punctuation dropped inside a chunk stays in it; dropped between chunks joins the next
        ("x a...b y;; z", ["x a.b", "y", "z"], [(0, 7), (8, 9), (9, 13)]),
    ],
)
def test_locate_chunks_finds_exact_spans(text, chunks, expected):
    assert [(s.start, s.end) for s in locate_chunks(text, chunks)] == expected


def test_close_gaps_covers_leading_and_trailing_text():
    text = "..abc..def.."
    spans = close_gaps(text, [Span(2, 5), Span(7, 10)])
    assert [(s.start, s.end) for s in spans] == [(0, 5), (5, 12)]
    assert close_gaps("  ", []) == [] and close_gaps("ab", []) == [Span(0, 2)]


def test_every_registered_chunker_defines_split_spans_without_an_instrumentation_span():
    """split_spans is called once per document: LlamaIndex wraps implementations of abstract
    methods in a dispatcher span (about 70 us a call), so the base does not declare it abstract,
    and each chunker must define it itself."""
    from llama_index_instrumentation.dispatcher import DISPATCHER_SPAN_DECORATED_ATTR

    for name in [*chunkers.names(), "lines"]:
        cls = chunkers.get(name) if name != "lines" else LineChunker
        method = next(klass.__dict__["split_spans"] for klass in cls.__mro__ if "split_spans" in klass.__dict__)
        assert method is not Chunker.split_spans, f"chunker '{name}' does not define split_spans"
        assert not hasattr(method, DISPATCHER_SPAN_DECORATED_ATTR), name


def test_a_chunker_without_split_spans_says_so_when_used():
    class Nameless(Chunker):
        name: ClassVar[str] = "nameless"
        Params: ClassVar[type[ChunkerParams]] = ChunkerParams

    with pytest.raises(NotImplementedError, match="chunker 'nameless' does not define split_spans"):
        Nameless().chunk([make_document("d", "text")])

from __future__ import annotations

from itertools import pairwise
from typing import Any, ClassVar

import pytest

from ragkit.chunkers import chunkers
from ragkit.chunkers.recursive import recursive_spans
from ragkit.corpus.model import make_document
from ragkit.errors import ConfigError
from tests.chunkers.test_chunker_contract import ChunkerContract, contract_documents

pytestmark = pytest.mark.unit

SPEC = {"type": "recursive", "params": {"chunk_size": 120, "chunk_overlap": 40}}


class TestRecursiveChunker(ChunkerContract):
    spec = SPEC
    out_of_bounds: ClassVar[dict[str, Any]] = {"chunk_size": 10}


@pytest.mark.parametrize(
    ("text", "size", "overlap", "expected"),
    [
        # fits: one span
        ("short", 10, 0, [(0, 5)]),
        # paragraphs first; the separator stays with the piece before it
        ("aaaa\n\nbbbb\n\ncccc", 8, 0, [(0, 6), (6, 12), (12, 16)]),
        # lines when paragraphs are too long, then words inside a line still too long
        ("aaa\nbbb\nccc ddd eee", 8, 0, [(0, 8), (8, 16), (16, 19)]),
        # words, merged up to the size, with the previous window's tail repeated
        ("aa bb cc dd ee", 6, 3, [(0, 6), (3, 9), (6, 12), (9, 14)]),
        # characters as the last resort
        ("abcdefghij", 4, 0, [(0, 4), (4, 8), (8, 10)]),
    ],
)
def test_recursive_spans_by_hand(text, size, overlap, expected):
    assert recursive_spans(text, 0, len(text), size, overlap) == expected


def test_chunks_fit_in_chunk_size_characters():
    nodes = chunkers.build(SPEC).chunk(contract_documents())
    assert all(len(n.text) <= 120 for n in nodes)


def test_consecutive_chunks_overlap_by_at_most_chunk_overlap():
    text = " ".join(f"Sentence {i} is here." for i in range(60))
    nodes = chunkers.build(SPEC).chunk([make_document("d", text)])
    assert len(nodes) > 5
    for before, after in pairwise(nodes):
        shared = before.metadata["end_char"] - after.metadata["start_char"]
        assert 0 < shared <= 40


def test_a_custom_separator_list_is_used():
    text = "one|two|three|four|five|six|seven|eight|nine|ten|" * 4
    params = {"chunk_size": 50, "chunk_overlap": 0, "separators": ["|"]}
    chunker = chunkers.build({"type": "recursive", "params": params})
    assert all(n.text.endswith("|") for n in chunker.chunk([make_document("d", text)]))


def test_defaults_and_overlap_validation():
    chunker = chunkers.build("recursive")
    assert (chunker.params.chunk_size, chunker.params.chunk_overlap) == (1000, 200)
    assert chunker.params.separators == ["\n\n", "\n", ". ", " ", ""]
    with pytest.raises(ConfigError, match=r"chunk_overlap \(300\) must be smaller than chunk_size \(300\)"):
        chunkers.build({"type": "recursive", "params": {"chunk_size": 300, "chunk_overlap": 300}})

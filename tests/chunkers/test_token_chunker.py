from __future__ import annotations

from itertools import pairwise
from typing import Any, ClassVar

import pytest
from llama_index.core.node_parser import TokenTextSplitter

from ragkit.chunkers import chunkers
from ragkit.chunkers.token import cl100k_tokenizer, place_chunks
from ragkit.corpus.model import make_document
from ragkit.errors import ConfigError
from tests.chunkers.test_chunker_contract import PROSE, ChunkerContract, contract_documents

pytestmark = pytest.mark.unit


class TestTokenChunker(ChunkerContract):
    spec: ClassVar[dict[str, Any]] = {"type": "token", "params": {"chunk_size": 24, "chunk_overlap": 6}}
    out_of_bounds: ClassVar[dict[str, Any]] = {"chunk_size": 8}


def test_chunks_fit_in_chunk_size_tokens():
    tokenizer = cl100k_tokenizer()
    chunker = chunkers.build({"type": "token", "params": {"chunk_size": 24, "chunk_overlap": 6}})
    nodes = chunker.chunk(contract_documents())
    assert all(len(tokenizer(n.text)) <= 24 for n in nodes)


def test_spans_hold_exactly_what_the_llama_splitter_returns():
    # Guards the use of the splitter's private _split/_merge against a LlamaIndex change.
    splitter = TokenTextSplitter(chunk_size=24, chunk_overlap=6, tokenizer=cl100k_tokenizer())
    chunker = chunkers.build({"type": "token", "params": {"chunk_size": 24, "chunk_overlap": 6}})
    for document in contract_documents():
        expected = [c.strip() for c in splitter.split_text(document.text) if c.strip()]
        assert [n.text for n in chunker.chunk([document])] == expected


@pytest.mark.parametrize("text", ["ab" * 800 + " end", "0 " * 800, "x" * 1500])
def test_overlapping_windows_of_repeated_text_land_where_they_were_cut(text):
    chunker = chunkers.build({"type": "token", "params": {"chunk_size": 64, "chunk_overlap": 16}})
    spans = [(n.metadata["start_char"], n.metadata["end_char"]) for n in chunker.chunk([make_document("d", text)])]
    assert len(spans) > 5
    starts = [s for s, _ in spans]
    assert starts == sorted(set(starts))
    assert all(next_start < end for (_, end), (next_start, _) in pairwise(spans))  # they overlap
    assert max(e - s for s, e in spans) < 200  # no chunk swallowed the rest


@pytest.mark.parametrize(
    ("text", "chunks", "overlap", "expected"),
    [
        # identical windows of a repeated character: the overlap budget says where each starts
        ("x" * 8, ["xxxx", "xxxx", "xxxx"], 2, [(0, 4), (2, 6), (4, 8)]),
        # a chunk that only adds whitespace to its overlap lies inside the previous chunk
        ("a b c   d", ["a b c", "c", "c   d"], 1, [(0, 5), (3, 5), (3, 9)]),  # untrimmed: the base trims
    ],
)
def test_place_chunks_by_hand(text, chunks, overlap, expected):
    pieces = [text[i] for i in range(len(text))] if text.startswith("x") else ["a", " b", " c", "  ", " d"]
    splits = [(piece, 1) for piece in pieces]
    assert [(s.start, s.end) for s in place_chunks(text, splits, chunks, overlap)] == expected


def test_overlap_not_below_size_names_both_values():
    with pytest.raises(ConfigError, match=r"chunk_overlap \(64\) must be smaller than chunk_size \(64\)"):
        chunkers.build({"type": "token", "params": {"chunk_size": 64, "chunk_overlap": 64}})


def test_defaults_and_cheap_construction():
    chunker = chunkers.build("token")
    assert (chunker.params.chunk_size, chunker.params.chunk_overlap) == (256, 32)
    assert chunker._splitter is None  # the tokenizer-backed splitter loads on first use
    assert chunker.chunk([make_document("d", PROSE)])

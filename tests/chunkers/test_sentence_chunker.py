from __future__ import annotations

from typing import Any, ClassVar

import pytest
from llama_index.core.node_parser import SentenceSplitter

from ragkit.chunkers import chunkers
from ragkit.chunkers.token import cl100k_tokenizer
from ragkit.corpus.model import make_document
from ragkit.errors import ConfigError
from tests.chunkers.test_chunker_contract import ChunkerContract, contract_documents

pytestmark = pytest.mark.unit

SPEC = {"type": "sentence", "params": {"chunk_size": 32, "chunk_overlap": 8}}


class TestSentenceChunker(ChunkerContract):
    spec = SPEC
    out_of_bounds: ClassVar[dict[str, Any]] = {"chunk_overlap": -1}


def test_spans_hold_exactly_what_the_llama_splitter_returns():
    splitter = SentenceSplitter(chunk_size=32, chunk_overlap=8, tokenizer=cl100k_tokenizer())
    chunker = chunkers.build(SPEC)
    for document in contract_documents():
        assert [n.text for n in chunker.chunk([document])] == splitter.split_text(document.text)


def test_chunks_end_at_sentence_ends_when_sentences_fit():
    text = " ".join(f"Sentence number {i} is short." for i in range(30))
    nodes = chunkers.build(SPEC).chunk([make_document("d", text)])
    assert len(nodes) > 2 and all(n.text.endswith(".") for n in nodes)
    assert all(len(cl100k_tokenizer()(n.text)) <= 32 for n in nodes)


def test_punctuation_dropped_inside_an_overlong_sentence_stays_covered():
    # SentenceSplitter's sub-sentence regex drops runs such as "..." and ";;" it cannot attach.
    text = "start " + "alpha...beta;;gamma,,delta " * 12 + "end."
    (document,) = [make_document("d", text)]
    nodes = chunkers.build(SPEC).chunk([document])
    covered = set()
    for node in nodes:
        assert text[node.metadata["start_char"] : node.metadata["end_char"]] == node.text
        covered.update(range(node.metadata["start_char"], node.metadata["end_char"]))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def test_defaults_and_overlap_validation():
    chunker = chunkers.build("sentence")
    assert (chunker.params.chunk_size, chunker.params.chunk_overlap) == (512, 64)
    with pytest.raises(ConfigError, match=r"chunk_overlap \(100\) must be smaller than chunk_size \(50\)"):
        chunkers.build({"type": "sentence", "params": {"chunk_size": 50, "chunk_overlap": 100}})

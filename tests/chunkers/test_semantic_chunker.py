"""The semantic chunker against the real bundled MiniLM (kept to two short documents)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from ragkit.chunkers import chunkers
from ragkit.corpus.model import make_document
from ragkit.errors import ConfigError
from tests.chunkers.test_chunker_contract import ChunkerContract, contract_documents

TWO_TOPICS = (
    "Cats are small domesticated carnivores. Cats sleep for most of the day. A cat purrs when it is content. "
    "Kittens learn to hunt by playing with their siblings. "
    "The central bank raised interest rates by half a point. Bond yields rose after the announcement. "
    "Inflation expectations shape monetary policy decisions."
)


@pytest.mark.integration
class TestSemanticChunker(ChunkerContract):
    spec: ClassVar[dict[str, Any]] = {"type": "semantic", "params": {"breakpoint_percentile_threshold": 80}}
    out_of_bounds: ClassVar[dict[str, Any]] = {"buffer_size": 0}

    @pytest.fixture(scope="class")
    def chunker_deps(self, minilm_embed_model):
        return {"embed_model": minilm_embed_model}

    @pytest.fixture(scope="class")
    def documents(self):
        blank = make_document("blank.txt", "  \n")
        return [make_document("topics.txt", TWO_TOPICS), blank, contract_documents()[-1]]


@pytest.mark.integration
def test_no_chunk_mixes_the_two_topics(minilm_embed_model):
    spec = {"type": "semantic", "params": {"breakpoint_percentile_threshold": 50}}
    nodes = chunkers.build(spec, embed_model=minilm_embed_model).chunk([make_document("topics.txt", TWO_TOPICS)])
    assert len(nodes) >= 2
    for node in nodes:
        assert not ("cat" in node.text.lower() and "bank" in node.text.lower())
        assert not ("Kittens" in node.text and "interest" in node.text)


@pytest.mark.unit
def test_without_an_embedder_it_fails_with_a_clear_message():
    with pytest.raises(ConfigError, match="the semantic chunker needs an embedder"):
        chunkers.build("semantic")

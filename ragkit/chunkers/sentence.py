"""Sentence-aware token windows: LlamaIndex's SentenceSplitter, placed back at exact offsets."""

from __future__ import annotations

from typing import Any

from llama_index.core.node_parser import SentenceSplitter

from ragkit.chunkers.params import SentenceChunkerInfo, SentenceParams
from ragkit.chunkers.token import TokenWindowChunker, cl100k_tokenizer


class SentenceChunker(SentenceChunkerInfo, TokenWindowChunker):
    """Fills each chunk with whole sentences (NLTK punkt); a sentence is cut only if it alone is too long.

    It takes the same two steps as SentenceSplitter.split_text, keeping the splits to place chunks
    on (they may drop punctuation runs inside an over-long sentence; place_chunks covers them)."""

    params: SentenceParams

    def _make_splitter(self) -> SentenceSplitter:
        return SentenceSplitter(
            chunk_size=self.params.chunk_size,
            chunk_overlap=self.params.chunk_overlap,
            tokenizer=cl100k_tokenizer(),
        )

    def _sized_splits(self, splits: list[Any]) -> list[tuple[str, int]]:
        return [(split.text, split.token_size) for split in splits]

"""Sentence-aware token windows: LlamaIndex's SentenceSplitter, placed back at exact offsets."""

from __future__ import annotations

from typing import Any, ClassVar

from llama_index.core.node_parser import SentenceSplitter
from pydantic import Field

from ragkit.chunkers.token import TokenWindowChunker, TokenWindowParams, cl100k_tokenizer


class SentenceParams(TokenWindowParams):
    chunk_size: int = Field(default=512, ge=16, le=8192, description="Maximum chunk length in tokens (cl100k_base).")
    chunk_overlap: int = Field(default=64, ge=0, le=4096, description="Tokens repeated between consecutive chunks.")


class SentenceChunker(TokenWindowChunker):
    """Fills each chunk with whole sentences (NLTK punkt); a sentence is cut only if it alone is too long.

    It takes the same two steps as SentenceSplitter.split_text, keeping the splits to place chunks
    on (they may drop punctuation runs inside an over-long sentence; place_chunks covers them)."""

    name: ClassVar[str] = "sentence"
    Params: ClassVar[type[SentenceParams]] = SentenceParams
    params: SentenceParams

    def _make_splitter(self) -> SentenceSplitter:
        return SentenceSplitter(
            chunk_size=self.params.chunk_size,
            chunk_overlap=self.params.chunk_overlap,
            tokenizer=cl100k_tokenizer(),
        )

    def _sized_splits(self, splits: list[Any]) -> list[tuple[str, int]]:
        return [(split.text, split.token_size) for split in splits]

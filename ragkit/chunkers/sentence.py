"""Sentence-aware token windows: LlamaIndex's SentenceSplitter, placed back at exact offsets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from llama_index.core.node_parser import SentenceSplitter
from pydantic import Field, PrivateAttr

from ragkit.chunkers.base import Chunker, Span
from ragkit.chunkers.token import TokenWindowParams, cl100k_tokenizer, place_chunks


class SentenceParams(TokenWindowParams):
    chunk_size: int = Field(default=512, ge=16, le=8192, description="Maximum chunk length in tokens (cl100k_base).")
    chunk_overlap: int = Field(default=64, ge=0, le=4096, description="Tokens repeated between consecutive chunks.")


class SentenceChunker(Chunker):
    """Fills each chunk with whole sentences (NLTK punkt); a sentence is cut only if it alone is too long."""

    name: ClassVar[str] = "sentence"
    Params: ClassVar[type[SentenceParams]] = SentenceParams
    params: SentenceParams
    _splitter: SentenceSplitter | None = PrivateAttr(default=None)

    def _make_splitter(self) -> SentenceSplitter:
        return SentenceSplitter(
            chunk_size=self.params.chunk_size,
            chunk_overlap=self.params.chunk_overlap,
            tokenizer=cl100k_tokenizer(),
        )

    def split_spans(self, text: str, metadata: Mapping[str, Any]) -> list[Span]:
        if self._splitter is None:  # built on first use: construction stays free of tokenizer loading
            self._splitter = self._make_splitter()
        # The same two steps as SentenceSplitter.split_text, keeping the splits to place chunks on
        # (they may drop punctuation runs inside an over-long sentence; place_chunks covers them).
        size = self.params.chunk_size
        splits = self._splitter._split(text, size)
        chunks = self._splitter._merge(splits, size)
        return place_chunks(text, [(s.text, s.token_size) for s in splits], chunks, self.params.chunk_overlap)

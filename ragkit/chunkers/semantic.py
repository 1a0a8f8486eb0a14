"""Semantic chunks: LlamaIndex's SemanticSplitterNodeParser cuts where neighbouring sentences drift apart."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.node_parser import SemanticSplitterNodeParser
from llama_index.core.schema import Document
from pydantic import PrivateAttr

from ragkit.chunkers.base import Chunker, Span, locate_chunks
from ragkit.chunkers.params import SemanticChunkerInfo, SemanticParams
from ragkit.errors import ConfigError


class SemanticChunker(SemanticChunkerInfo, Chunker):
    """Needs ``embed_model`` (a LlamaIndex BaseEmbedding), passed explicitly: never read from Settings.

    The embedder is not part of the spec key, so whoever builds this chunker must keep it fixed
    for a given chunk-set cache (the executor uses the bundled MiniLM).
    """

    params: SemanticParams
    _parser: SemanticSplitterNodeParser | None = PrivateAttr(default=None)

    def __init__(
        self, params: SemanticParams | Mapping[str, Any] | None = None, embed_model: BaseEmbedding | None = None
    ) -> None:
        if embed_model is None:
            raise ConfigError(
                "the semantic chunker needs an embedder: pass embed_model=<a LlamaIndex BaseEmbedding>, "
                "e.g. chunkers.build(spec, embed_model=embedder.embed_model())"
            )
        super().__init__(params, embed_model=embed_model)

    def _make_parser(self) -> SemanticSplitterNodeParser:
        if self._embed_model is None:  # __init__ refuses to build without one
            raise ConfigError("the semantic chunker needs an embedder (embed_model)")
        return SemanticSplitterNodeParser(
            embed_model=self._embed_model,
            buffer_size=self.params.buffer_size,
            breakpoint_percentile_threshold=self.params.breakpoint_percentile_threshold,
        )

    def split_spans(self, text: str, metadata: Mapping[str, Any]) -> list[Span]:
        if not text.strip():
            return []
        if self._parser is None:
            self._parser = self._make_parser()
        # The parser joins whole sentences back together, so its chunks are verbatim slices.
        nodes = self._parser.build_semantic_nodes_from_documents([Document(text=text)])
        return locate_chunks(text, [node.get_content() for node in nodes])

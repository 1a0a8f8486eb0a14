"""Chunkers: one strategy per module, each a LlamaIndex NodeParser returning exact spans.

Import concrete chunkers from their modules (or build them with the registry ``chunkers``);
this package only re-exports the base so that plugins can subclass it.
"""

from ragkit.chunkers.base import Chunker, ChunkerParams, Span, chunkers, clean_spans, close_gaps, locate_chunks

__all__ = ["Chunker", "ChunkerParams", "Span", "chunkers", "clean_spans", "close_gaps", "locate_chunks"]

"""Chunker base: a subclass returns exact character spans, this class turns them into nodes.

Keeping the span -> node step in one place is what guarantees the ground-truth property:
every node's text is ``doc.text[start_char:end_char]``, whatever splitter produced it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import BaseNode, Document, NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.utils import get_tqdm_iterable
from pydantic import Field, PrivateAttr

from ragkit.chunkers.params import ChunkerInfo, ChunkerParams
from ragkit.corpus.model import POSITIONAL_METADATA
from ragkit.errors import ConfigError

# Bookkeeping keys: useful in tables and traces, noise (or duplicated text) in an LLM prompt.
SUMMARY_CHARS = 200
SUMMARY_SOURCE_CHARS = 4000
SUMMARY_SYSTEM = "You summarise text. Reply with one sentence only."
SUMMARY_PROMPT = "Text: {text}\n\nSummarise the text in one sentence of at most 30 words."
_NOT_FOR_LLM = ("start_char", "end_char", "chunk_index", "embed_text", "chunk_fallback", "total_chunks", "modified")
_LONG_METADATA_CHARS = 200


class Span(NamedTuple):
    """A chunk as ``text[start:end]`` plus metadata that only the chunker knows (breadcrumb...)."""

    start: int
    end: int
    metadata: Mapping[str, Any] = MappingProxyType({})


class Chunker(ChunkerInfo, NodeParser):
    """A registered component (params, spec key) that is also a LlamaIndex NodeParser; what it
    declares (kind, Params, uses_llm...) is in its info class, readable without LlamaIndex."""

    params: ChunkerParams = Field(description="Validated parameters; the spec key is computed from them.")
    # Only chunkers that embed (semantic) use it; kept private so it never enters a spec or a dump.
    _embed_model: BaseEmbedding | None = PrivateAttr(default=None)
    # The LLM client of chunkers that call one (llm_semantic, or summaries on), set by use_llm.
    _llm: Any = PrivateAttr(default=None)

    def __init__(
        self, params: ChunkerParams | Mapping[str, Any] | None = None, embed_model: BaseEmbedding | None = None
    ) -> None:
        if not isinstance(params, self.Params):
            params = self.Params.model_validate(dict(params or {}))
        # pydantic's __init__ takes every field of this class; mypy checks it against NodeParser's fields.
        super().__init__(params=params)  # type: ignore[call-arg]
        self._embed_model = embed_model

    @classmethod
    def class_name(cls) -> str:
        return cls.__name__

    def use_llm(self, llm: Any) -> None:
        """The LLM client for chunk summaries (and for a chunker that splits with one)."""
        self._llm = llm

    # Not an @abstractmethod on purpose: LlamaIndex's DispatcherSpanMixin (a base of NodeParser)
    # wraps every implementation of an abstract method in an instrumentation span, about 70 us a
    # call, which was 64% of the time to chunk 200k one-chunk documents. Every built-in chunker
    # defines it (tests/chunkers check each registered one).
    def split_spans(self, text: str, metadata: Mapping[str, Any]) -> list[Span]:
        """Spans of ``text`` in reading order; the base trims whitespace and drops empty ones."""
        raise NotImplementedError(f"chunker '{self.name}' does not define split_spans")

    def chunk(self, documents: Iterable[BaseNode]) -> list[TextNode]:
        """Nodes of every document in order; what ``get_nodes_from_documents`` returns too."""
        return [node for document in documents for node in self.chunk_document(document)]

    def chunk_document(self, document: BaseNode) -> list[TextNode]:
        text: str = document.text  # type: ignore[attr-defined]
        metadata = document.metadata
        spans = clean_spans(text, self.split_spans(text, metadata))
        base = {k: v for k, v in metadata.items() if k not in POSITIONAL_METADATA}
        page_starts = metadata.get("page_starts") or None
        sections = sorted(metadata.get("sections") or [], key=lambda section: section[0])
        section_starts = [section[0] for section in sections]
        source = document.as_related_node_info()
        ids = [f"{document.node_id}:{index}" for index in range(len(spans))]
        nodes = []
        for index, span in enumerate(spans):
            meta = dict(base)
            if page_starts:
                meta["page"] = max(1, bisect_right(page_starts, span.start))
            position = bisect_right(section_starts, span.start) - 1
            if position >= 0 and sections[position][1]:
                meta["breadcrumb"] = sections[position][1]
            meta.update(span.metadata)  # the chunker's own breadcrumb wins over the document's sections
            meta.update(doc_id=document.node_id, start_char=span.start, end_char=span.end, chunk_index=index,
                        total_chunks=len(spans))
            chunk_text = text[span.start : span.end]
            if self.params.summaries:
                meta.update(self._summary(chunk_text))
            meta["embed_text"] = self._embed_text(chunk_text, meta)
            node = TextNode(
                id_=ids[index],
                text=chunk_text,
                start_char_idx=span.start,
                end_char_idx=span.end,
                metadata=meta,
                # The embedder reads `embed_text`; excluding every key keeps get_content(EMBED)
                # equal to the plain text, so contextualize=False really embeds nothing else.
                excluded_embed_metadata_keys=list(meta),
                excluded_llm_metadata_keys=[k for k, v in meta.items() if _hide_from_llm(k, v)],
            )
            node.relationships[NodeRelationship.SOURCE] = source
            if self.include_prev_next_rel and index > 0:
                node.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=ids[index - 1])
            if self.include_prev_next_rel and index + 1 < len(spans):
                node.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=ids[index + 1])
            nodes.append(node)
        return nodes

    def _summary(self, text: str) -> dict[str, Any]:
        """``{"summary": ...}`` of one chunk, or ``{"summary_error": ...}`` when the call failed
        (the chunk is kept without one). Replies are cached by the client."""
        from ragkit.errors import LLMError

        if self._llm is None:
            raise ConfigError(f"chunker '{self.name}': summaries need an LLM (the chunking role's model)")
        try:
            result = self._llm.call(SUMMARY_PROMPT.format(text=text[:SUMMARY_SOURCE_CHARS]), stage="chunk",
                                    system=SUMMARY_SYSTEM, max_tokens=80)
        except LLMError as error:
            return {"summary_error": str(error)[:300]}
        summary = " ".join(result.text.split())[:SUMMARY_CHARS]
        return {"summary": summary} if summary else {"summary_error": "empty reply"}

    def _embed_text(self, text: str, meta: Mapping[str, Any]) -> str:
        if not self.params.contextualize:
            return text
        context = [str(part) for part in (meta.get("title"), meta.get("breadcrumb"), meta.get("summary")) if part]
        return "\n".join(context) + "\n\n" + text if context else text

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        return list(self.chunk(get_tqdm_iterable(nodes, show_progress, "Chunking")))

    def _postprocess_parsed_nodes(self, nodes: list[BaseNode], parent_doc_map: dict[str, Document]) -> list[BaseNode]:
        # LlamaIndex's version re-finds each node's text in its document (a repeated passage can
        # land on the wrong occurrence) and copies the document's metadata back in, including
        # the positional lists. Our nodes are already complete.
        return nodes


def _hide_from_llm(key: str, value: Any) -> bool:
    if key in _NOT_FOR_LLM:
        return True
    return not isinstance(value, (str, int, float, bool)) or len(str(value)) > _LONG_METADATA_CHARS


def clean_spans(text: str, spans: Sequence[Span]) -> list[Span]:
    """Spans trimmed to non-whitespace bounds, in text order, without empty or redundant ones."""
    trimmed: list[Span] = []
    for span in spans:
        if not 0 <= span.start <= span.end <= len(text):
            raise ValueError(f"span ({span.start}, {span.end}) is outside a text of {len(text)} characters")
        piece = text[span.start : span.end]
        start = span.start + len(piece) - len(piece.lstrip())
        end = span.end - len(piece) + len(piece.rstrip())
        if start < end:
            trimmed.append(span._replace(start=start, end=end))
    cleaned: list[Span] = []
    for span in sorted(trimmed, key=lambda s: (s.start, -s.end)):
        # A span inside the previous one (e.g. a trailing overlap) would only duplicate it.
        if not cleaned or span.end > cleaned[-1].end:
            cleaned.append(span)
    return cleaned


def locate_chunks(text: str, chunks: Sequence[str]) -> list[Span]:
    """Exact spans of a non-overlapping splitter's output strings, in order, in their source text.

    Splitters may strip or collapse whitespace, so a chunk is searched exactly first and then
    tolerating non-word characters between its own. Each search starts at the previous
    chunk's end, so a repeated passage lands on its next occurrence, not an earlier one.
    (Overlapping splitters need their split boundaries to be placed: see ``token.place_chunks``.)
    """
    spans: list[Span] = []
    for chunk in chunks:
        needle = chunk.strip()
        if not needle:
            continue
        cursor = spans[-1].end if spans else 0
        index = text.find(needle, cursor)
        if index >= 0:
            spans.append(Span(index, index + len(needle)))
            continue
        pattern = r"\W*?".join(re.escape(char) for char in needle if not char.isspace())
        match = re.compile(pattern).search(text, cursor)
        if match is None:
            raise ValueError(f"cannot locate chunk {needle[:60]!r} in its document after offset {cursor}")
        spans.append(Span(match.start(), match.end()))
    return close_gaps(text, spans)


def close_gaps(text: str, spans: list[Span]) -> list[Span]:
    """Give characters a splitter dropped between chunks to the chunk after them.

    Span-level ground truth needs every non-whitespace character inside some chunk.
    """
    if not spans:
        return [Span(0, len(text))] if text.strip() else []
    covered = 0
    for i, span in enumerate(spans):
        if span.start > covered and text[covered : span.start].strip():
            spans[i] = span._replace(start=covered)
        covered = max(covered, spans[i].end)
    if text[covered:].strip():
        spans[-1] = spans[-1]._replace(end=len(text))
    return spans

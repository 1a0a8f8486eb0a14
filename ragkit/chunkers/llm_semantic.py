"""LLM-marked chunks: the model reads the document and says where each chunk starts.

The document is read in windows of at most ``window_chars`` characters. For each window the model
replies with the opening words of every chunk after the first, copied from the text (a small
model cannot count characters, but it can copy words). Each quote is located exactly in the
source, in order after the previous boundary (first verbatim, then with whitespace differences
allowed), so every chunk is ``text[start:end]`` of the document. The next window starts at the
last boundary found, so a chunk is never cut by a window's edge.

A window whose reply cannot be used (not JSON, an LLM error, no quote found in the text) is split
by the recursive splitter instead, and its chunks say so: ``boundary: fallback`` with the reason
(``boundary: llm`` otherwise). A chunk longer than ``max_chunk_chars`` is split recursively
inside its boundaries. Replies are cached by the LLM client, so building the chunk set again
makes no call; the chunk set's key includes the model (``plan.chunker_uses_llm``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import BaseModel, Field

from ragkit.chunkers.base import Chunker, Span
from ragkit.chunkers.params import LLMSemanticChunkerInfo, LLMSemanticParams
from ragkit.chunkers.recursive import recursive_spans
from ragkit.errors import ConfigError, LLMError


class BoundaryReply(BaseModel):
    starts: list[str] = Field(description="The opening words of each chunk after the first, copied exactly.")


SYSTEM = "You split documents into self-contained chunks. Reply with one JSON object only."

EXAMPLE = (
    "Example:\n"
    "Text: Cats purr when content. They also purr when hurt. Dogs bark at strangers. Dogs wag their tails.\n"
    '{"starts": ["Dogs bark at strangers."]}'
)


def build_prompt(window: str, target_chars: int, quote_words: int) -> str:
    return (
        f"{EXAMPLE}\n\n"
        f"Text: {window}\n\n"
        f"Split the text into chunks of about {target_chars} characters, each about one topic. "
        f"Reply as JSON with starts: the first {quote_words} words of each chunk after the first, copied exactly "
        "from the text, in order."
    )


def locate(quote: str, text: str, start: int, end: int) -> int | None:
    """Where ``quote`` begins in ``text[start:end]``: verbatim first, then with any whitespace
    between its words; None when it is not there."""
    quote = quote.strip()
    if not quote:
        return None
    found = text.find(quote, start, end)
    if found >= 0:
        return found
    words = quote.split()
    match = re.compile(r"\s+".join(re.escape(word) for word in words)).search(text, start, end)
    return match.start() if match else None


class LLMSemanticChunker(LLMSemanticChunkerInfo, Chunker):
    """Needs ``llm`` (an LLMClient), passed explicitly like a judge's."""

    params: LLMSemanticParams

    def __init__(self, params: LLMSemanticParams | Mapping[str, Any] | None = None,
                 embed_model: BaseEmbedding | None = None, llm: Any = None) -> None:
        if llm is None:
            raise ConfigError("chunker 'llm_semantic' needs an LLM: it runs on the chunking role's model "
                              "(llm.roles.chunking, else llm.default)")
        super().__init__(params, embed_model=embed_model)
        self._llm = llm

    def split_spans(self, text: str, metadata: Mapping[str, Any]) -> list[Span]:
        spans: list[Span] = []
        position = 0
        while position < len(text):
            window_end = min(len(text), position + self.params.window_chars)
            boundaries, problem = self._boundaries(text, position, window_end)
            if problem is not None:
                spans += self._fallback(text, position, window_end, problem)
                position = window_end
                continue
            last_window = window_end == len(text)
            # The piece after the last boundary may run on past the window: unless the window
            # reaches the end, the next window starts at that boundary instead.
            cut = [*boundaries, window_end] if last_window or len(boundaries) == 1 else boundaries
            for start, end in itertools.pairwise(cut):
                spans += self._piece(text, start, end)
            position = window_end if last_window or len(boundaries) == 1 else boundaries[-1]
        return spans

    def _boundaries(self, text: str, start: int, end: int) -> tuple[list[int], str | None]:
        """Chunk starts in ``text[start:end]`` (``start`` first), or the reason the reply is unusable."""
        window = text[start:end]
        try:
            result = self._llm.call(build_prompt(window, self.params.target_chars, self.params.quote_words),
                                    stage="chunk", schema=BoundaryReply, system=SYSTEM,
                                    max_tokens=self.params.max_tokens)
        except LLMError as error:
            return [], f"LLM error: {error}"
        if result.parsed is None:
            return [], f"unusable reply: {result.parse_error}"
        boundaries = [start]
        missing = 0
        for quote in result.parsed.starts:
            found = locate(quote, text, boundaries[-1] + 1, end)
            if found is None:
                missing += 1
                continue
            if found - boundaries[-1] >= self.params.min_chunk_chars:
                boundaries.append(found)
        # No boundary is an answer only for a window short enough to be one chunk.
        if len(boundaries) == 1 and end - start > self.params.max_chunk_chars:
            if result.parsed.starts and missing == len(result.parsed.starts):
                return [], f"none of the {missing} quoted starts is in the text"
            return [], "no boundary in a window longer than max_chunk_chars"
        return boundaries, None

    def _piece(self, text: str, start: int, end: int) -> list[Span]:
        if end - start <= self.params.max_chunk_chars:
            return [Span(start, end, {"boundary": "llm"})]
        pieces = recursive_spans(text, start, end, self.params.max_chunk_chars,
                                 min(self.params.fallback_overlap, self.params.max_chunk_chars // 2))
        return [Span(s, e, {"boundary": "llm", "split": "max_chunk_chars"}) for s, e in pieces]

    def _fallback(self, text: str, start: int, end: int, reason: str) -> list[Span]:
        pieces = recursive_spans(text, start, end, self.params.fallback_chunk_size, self.params.fallback_overlap)
        return [Span(s, e, {"boundary": "fallback", "boundary_error": reason[:300]}) for s, e in pieces]

"""Fixed-size token windows: LlamaIndex's TokenTextSplitter, placed back at exact offsets.

Overlapping windows of repeated text (a table of zeros, a long rule of dashes) match the
source in many places, so searching for each chunk's text cannot say where the splitter took
it from. ``place_chunks`` instead keeps the splitter's own splits: it runs the splitter's
``_split`` and ``_merge`` steps (what ``split_text`` does; private, hence the <0.15 pin) and
puts every chunk on a run of splits.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from llama_index.core.node_parser import TokenTextSplitter
from pydantic import Field, PrivateAttr

from ragkit.chunkers.base import Chunker, Span, WindowParams, close_gaps


@functools.cache
def cl100k_encoding() -> Any:
    """The tiktoken ``cl100k_base`` encoding (LlamaIndex's default), loaded from LlamaIndex's
    bundled file so it works offline; for decoding. Encode with ``cl100k_tokenizer``."""
    import llama_index.core
    import tiktoken

    bundled = Path(llama_index.core.__file__).parent / "_static" / "tiktoken_cache"
    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))  # works offline
    try:
        return tiktoken.get_encoding("cl100k_base")
    finally:
        if previous is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]


@functools.cache
def cl100k_tokenizer() -> Callable[[str], list[int]]:
    """The cl100k_base tokenizer (LlamaIndex's default), loaded from LlamaIndex's bundled file.

    Not ``llama_index.core.utils.get_tokenizer()``: that returns a process-wide tokenizer which
    any caller may replace, and chunk sizes must not depend on who ran first.
    """
    return functools.partial(cl100k_encoding().encode, allowed_special="all")


def place_chunks(text: str, splits: Sequence[tuple[str, int]], chunks: Sequence[str], overlap: int) -> list[Span]:
    """Exact spans of ``chunks`` that a splitter merged from ``splits`` (split text, token count).

    A chunk is a run of consecutive splits, whitespace-stripped. It goes on the first run, from
    the previous chunk's first split on, that spells it, ends after the previous chunk and
    overlaps it by at most ``overlap`` tokens counted as the splitter counts them (per split).
    """
    starts, ends = [], []
    cursor = 0
    for piece, _ in splits:
        index = text.find(piece, cursor)  # splits are verbatim and in order; dropped characters leave gaps
        if index < 0:
            raise ValueError(f"cannot locate split {piece[:60]!r} in its document after offset {cursor}")
        starts.append(index)
        ends.append(index + len(piece))
        cursor = ends[-1]
    pieces = [piece for piece, _ in splits]
    spans: list[Span] = []
    first, stop = 0, 0  # the previous chunk's splits: pieces[first:stop]
    for chunk in chunks:
        needle = chunk.strip()
        if not needle:
            continue
        # The earliest split a chunk may start at and still overlap the previous one by <= overlap.
        lowest, budget = stop, overlap
        while lowest > first and splits[lowest - 1][1] <= budget:
            budget -= splits[lowest - 1][1]
            lowest -= 1
        place = _first_run(pieces, needle, lowest, stop, beyond=True)
        # Rarely a chunk adds only whitespace to its overlap (so lies inside the previous chunk),
        # or token counts drift from the splitter's: then the earliest place is the right one.
        place = place or _first_run(pieces, needle, first, stop, beyond=False) or _unplaceable(needle)
        spans.append(Span(starts[place[0]], ends[place[1] - 1]))
        first, stop = place
    return close_gaps(text, spans)


def _first_run(pieces: Sequence[str], needle: str, lowest: int, stop: int, beyond: bool) -> tuple[int, int] | None:
    """The first run from ``lowest`` that reads ``needle`` and ends after (or at) split ``stop``."""
    for k in range(lowest, len(pieces)):
        if k > stop and pieces[k - 1].strip():
            return None  # a chunk never skips a split that has text in it
        end = _run_end(pieces, k, needle)
        if end is not None and (end > stop if beyond else end >= stop):
            return k, end
    return None


def _run_end(pieces: Sequence[str], k: int, needle: str) -> int | None:
    """End (exclusive) of the shortest run of pieces from ``k`` that reads ``needle`` once stripped.

    Shortest: whitespace splits after a chunk's text may or may not belong to it; leaving them
    out keeps the overlap counted for the next chunk from exceeding the splitter's.
    """
    matched = 0
    for j in range(k, len(pieces)):
        piece = pieces[j].lstrip() if matched == 0 else pieces[j]
        rest = needle[matched:]
        if piece.startswith(rest) and not piece[len(rest) :].strip():
            return j + 1
        if not needle.startswith(piece, matched):
            return None
        matched += len(piece)
    return None


def _unplaceable(needle: str) -> tuple[int, int]:  # a splitter change would show up here
    raise ValueError(f"cannot place chunk {needle[:60]!r} on the splitter's splits")


class TokenWindowParams(WindowParams):
    """Token-counted sizes, shared by the token and sentence chunkers."""

    chunk_size: int = Field(default=256, ge=16, le=8192, description="Maximum chunk length in tokens (cl100k_base).")
    chunk_overlap: int = Field(default=32, ge=0, le=4096, description="Tokens repeated between consecutive chunks.")


class TokenChunker(Chunker):
    name: ClassVar[str] = "token"
    Params: ClassVar[type[TokenWindowParams]] = TokenWindowParams
    params: TokenWindowParams
    _splitter: TokenTextSplitter | None = PrivateAttr(default=None)

    def _make_splitter(self) -> TokenTextSplitter:
        return TokenTextSplitter(
            chunk_size=self.params.chunk_size, chunk_overlap=self.params.chunk_overlap, tokenizer=cl100k_tokenizer()
        )

    def split_spans(self, text: str, metadata: Mapping[str, Any]) -> list[Span]:
        if self._splitter is None:  # built on first use: construction stays free of tokenizer loading
            self._splitter = self._make_splitter()
        size, tokenizer = self.params.chunk_size, cl100k_tokenizer()
        splits = self._splitter._split(text, size)
        chunks = self._splitter._merge(splits, size)
        return place_chunks(text, [(s, len(tokenizer(s))) for s in splits], chunks, self.params.chunk_overlap)

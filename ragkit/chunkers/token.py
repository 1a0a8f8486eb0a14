"""Fixed-size token windows: LlamaIndex's TokenTextSplitter, placed back at exact offsets.

Overlapping windows of repeated text (a table of zeros, a long rule of dashes) match the
source in many places, so searching for each chunk's text cannot say where the splitter took
it from. ``place_chunks`` instead keeps the splitter's own splits: it runs the splitter's
``_split`` and ``_merge`` steps (what ``split_text`` does; private, hence the <0.15 pin) and
puts every chunk on a run of splits.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from llama_index.core.node_parser import TokenTextSplitter
from pydantic import PrivateAttr

from ragkit.chunkers.base import Chunker, Span, close_gaps
from ragkit.chunkers.params import TokenChunkerInfo
from ragkit.chunkers.params import TokenWindowParams as TokenWindowParams  # re-exported: its old home


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
    Repeated text can satisfy that at two places, and the first may leave the next chunk none
    (the window really ended in whitespace the stripped chunk does not show): then the earlier
    chunk moves to its next place, as in any backtracking search, each dead end tried once.
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
    runs = _Runs([piece for piece, _ in splits], [size for _, size in splits], overlap)
    needles = [needle for needle in (chunk.strip() for chunk in chunks) if needle]
    placed: list[tuple[int, int]] = []  # (first split, end split) of each chunk placed so far
    options: list[Iterator[tuple[int, int]]] = []
    dead: set[tuple[int, int, int]] = set()  # (chunk, previous first, previous end) with no way on
    stuck = 0
    while len(placed) < len(needles):
        chunk = len(placed)
        previous = placed[-1] if placed else (0, 0)
        if len(options) == chunk:
            fresh = (chunk, *previous) not in dead
            options.append(runs.places(needles[chunk], *previous) if fresh else iter(()))
        place = next(options[chunk], None)
        if place is not None:
            placed.append(place)
            continue
        stuck = max(stuck, chunk)
        dead.add((chunk, *previous))
        options.pop()
        if not placed:
            raise ValueError(f"cannot place chunk {needles[stuck][:60]!r} on the splitter's splits")
        placed.pop()
    return close_gaps(text, [Span(starts[first], ends[end - 1]) for first, end in placed])


class _Runs:
    """Where a chunk's text can lie among the splits, given where the chunk before it lies."""

    def __init__(self, pieces: Sequence[str], sizes: Sequence[int], overlap: int) -> None:
        self.pieces, self.sizes, self.overlap = pieces, sizes, overlap
        # next_text[i]: the first split at or after i with text in it. A run of whitespace-only
        # splits (a long tail of tabs) is then stepped over at once, not read again per start.
        self.next_text = [len(pieces)] * (len(pieces) + 1)
        for index in range(len(pieces) - 1, -1, -1):
            self.next_text[index] = index if pieces[index].strip() else self.next_text[index + 1]

    def places(self, needle: str, first: int, stop: int) -> Iterator[tuple[int, int]]:
        """Runs for ``needle`` after a chunk on pieces[first:stop], the likeliest first."""
        # The earliest split a chunk may start at and still overlap the previous one by <= overlap.
        lowest, budget = stop, self.overlap
        while lowest > first and self.sizes[lowest - 1] <= budget:
            budget -= self.sizes[lowest - 1]
            lowest -= 1
        seen: set[tuple[int, int]] = set()
        # Rarely a chunk adds only whitespace to its overlap (so lies inside the previous chunk),
        # or token counts drift from the splitter's: then runs that only reach the previous end count.
        for place in itertools.chain(self._runs(needle, lowest, stop, True), self._runs(needle, first, stop, False)):
            if place not in seen:
                seen.add(place)
                yield place

    def _runs(self, needle: str, lowest: int, stop: int, beyond: bool) -> Iterator[tuple[int, int]]:
        """Runs from ``lowest`` on that read ``needle`` and end after (or at) split ``stop``.

        A run ends after ``stop`` also when only whitespace splits lie between its text and split
        ``stop``: the splitter's window took them, the stripped chunk does not show them.
        """
        for k in range(lowest, len(self.pieces)):
            if k > stop and self.pieces[k - 1].strip():
                return  # a chunk never skips a split that has text in it
            end = _run_end(self.pieces, self.next_text, k, needle)
            if end is not None and ((end > stop or self.next_text[end] > stop) if beyond else end >= stop):
                yield k, end


def _run_end(pieces: Sequence[str], next_text: Sequence[int], k: int, needle: str) -> int | None:
    """End (exclusive) of the shortest run of pieces from ``k`` that reads ``needle`` once stripped.

    Shortest: whitespace splits after a chunk's text may or may not belong to it; leaving them
    out keeps the overlap counted for the next chunk from exceeding the splitter's. Whitespace
    splits before its text read as nothing, so the reading starts at the first split with text.
    """
    matched = 0
    for j in range(next_text[k], len(pieces)):
        piece = pieces[j].lstrip() if matched == 0 else pieces[j]
        rest = needle[matched:]
        if piece.startswith(rest) and not piece[len(rest) :].strip():
            return j + 1
        if not needle.startswith(piece, matched):
            return None
        matched += len(piece)
    return None


class TokenWindowChunker(Chunker):
    """Runs a LlamaIndex splitter's ``_split`` and ``_merge`` steps and places each chunk on its
    run of splits (``place_chunks``). The token and sentence chunkers differ only in the splitter
    and in how a split's size is read."""

    # Its subclasses' info classes declare Params (TokenChunkerInfo, SentenceChunkerInfo).
    params: TokenWindowParams
    _splitter: Any = PrivateAttr(default=None)

    def _make_splitter(self) -> Any:
        raise NotImplementedError(f"chunker '{self.name}' does not define _make_splitter")

    def _sized_splits(self, splits: list[Any]) -> list[tuple[str, int]]:
        """Each split's text and its length in tokens."""
        raise NotImplementedError(f"chunker '{self.name}' does not define _sized_splits")

    def split_spans(self, text: str, metadata: Mapping[str, Any]) -> list[Span]:
        if self._splitter is None:  # built on first use: construction stays free of tokenizer loading
            self._splitter = self._make_splitter()
        size = self.params.chunk_size
        splits = self._splitter._split(text, size)
        chunks = self._splitter._merge(splits, size)
        return place_chunks(text, self._sized_splits(splits), chunks, self.params.chunk_overlap)


class TokenChunker(TokenChunkerInfo, TokenWindowChunker):
    def _make_splitter(self) -> TokenTextSplitter:
        return TokenTextSplitter(
            chunk_size=self.params.chunk_size, chunk_overlap=self.params.chunk_overlap, tokenizer=cl100k_tokenizer()
        )

    def _sized_splits(self, splits: list[Any]) -> list[tuple[str, int]]:
        tokenizer = cl100k_tokenizer()
        return [(split, len(tokenizer(split))) for split in splits]

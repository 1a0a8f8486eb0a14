"""Reference contexts located in the corpus as text, not as bytes.

A context another tool cut from a document (a ragas testset's ``reference_contexts``, a
LlamaIndex ``LabelledRagDataset``'s) was read by a different parser than ragkit's, so it differs
from ragkit's text of the same document in ligatures, quotes and dashes, line breaks and
hyphenation at line ends, spaces, and running headers and footers. The rule:

1. **Words, normalised, with their place.** Both sides are cut into words (``ragkit.text.WORD``:
   letters and digits, so quotes, dashes, whitespace and line breaks only separate words); each
   word is put in Unicode NFKC (the U+FB01 ligature reads "fi", full-width letters plain) and
   case-folded, and keeps its start and end in its own text. Pieces joined by a hyphen or a soft
   hyphen, alone or before a line break, are one word when the next piece starts lower-case:
   "infec-" line break "tion", "infec-tion" and "infection" all read "infection" (and a compound,
   "virus-cell", reads "viruscell" on both sides alike).
2. **Long enough.** A context of fewer than ``MIN_WORDS`` words is not located (it would match in
   too many places).
3. **Candidates by shared word k-grams.** Documents sharing at least ``MIN_SHARED_KGRAMS`` runs of
   ``KGRAM`` words with the context are candidates, the densest stretch of shared runs in each
   giving the window to align (a document the context names, ``reference_context_ids``, first;
   then by shared runs, at most ``CANDIDATES``).
4. **Exact, else aligned.** A context that occurs verbatim in a candidate is there (score 1.0,
   its first occurrence, candidates in order). Otherwise the context's words are aligned to the
   window's with rapidfuzz's longest common subsequence over word tokens
   (``rapidfuzz.distance.LCSseq.opcodes``); lone matched words outside the matched run are
   trimmed off both ends, and the run is aligned again, both ways, so that a repeated word is
   matched where the passage starts and ends. The **score** is the share of the context's words
   matched in order inside that place.
5. **Located** when the score is at least ``MIN_SHARE`` (0.8): a passage, the document and
   [start, end) in ragkit's text, from the first matched word's start to the last one's end.
   Otherwise the context is not located, with the reason and the best score seen.

Words of unrelated text share function words in order, and a shuffled context keeps its words
but not their order; both stay far below 0.8 (``tests/questions/test_passages.py``).
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from rapidfuzz.distance import LCSseq, MatchingBlock

from ragkit.text import WORD

MIN_SHARE = 0.8
MIN_WORDS = 5
KGRAM = 3
MIN_SHARED_KGRAMS = 2
# Candidate documents aligned per context, after the named one.
CANDIDATES = 3
# Extra document words on each side of the densest stretch (text the other parser put elsewhere).
_SLACK = 30

NOT_IN_CORPUS = "no document shares a run of words with it"
TOO_SHORT = f"fewer than {MIN_WORDS} words"
BELOW_SHARE = f"best match below {MIN_SHARE:.0%} of its words in order"
EMPTY = "no reference context"


@dataclass(frozen=True)
class Words:
    """A text's normalised words and where each is in the text."""

    tokens: list[str]
    starts: list[int]
    ends: list[int]


@dataclass(frozen=True)
class Passage:
    """A located context: ``text[start:end]`` of document ``doc_id``, and its match score."""

    doc_id: str
    start: int
    end: int
    score: float


@dataclass(frozen=True)
class ContextMatch:
    """The outcome for one context: its passage, or the reason there is none and the best score."""

    passage: Passage | None
    score: float
    doc_id: str | None
    reason: str | None


# A hyphen (or soft hyphen) between two pieces of a word, alone or before a line break.
_WORD_BREAK = re.compile(r"[-\u00ad\u2010\u2011\ufffe][ \t]*(?:\r?\n[ \t]*)?")


def text_words(text: str) -> Words:
    """The words of ``text`` (rule 1 of the module), each normalised, with its place in ``text``."""
    tokens: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    previous_end = -1
    for match in WORD.finditer(text):
        word = _normalised(match.group())
        if tokens and word[:1].islower() and match.group()[:1].islower() \
                and _WORD_BREAK.fullmatch(text, previous_end, match.start()):
            tokens[-1] += word
            ends[-1] = match.end()
        else:
            tokens.append(word)
            starts.append(match.start())
            ends.append(match.end())
        previous_end = match.end()
    return Words(tokens, starts, ends)


@lru_cache(maxsize=65536)
def _normalised(word: str) -> str:
    return unicodedata.normalize("NFKC", word).casefold()


class PassageLocator:
    """Locates contexts in a corpus; the documents' words are cut once, on first use.

    >>> locator = PassageLocator({"d1": "The e\ufb03cacy of the vaccine was 95 per cent."})
    >>> locator.locate("the efficacy of the vaccine was 95 per cent").passage
    Passage(doc_id='d1', start=0, end=41, score=1.0)
    """

    def __init__(self, texts: Mapping[str, str], min_share: float = MIN_SHARE) -> None:
        if not 0 < min_share <= 1:
            raise ValueError(f"min_share must be in (0, 1], got {min_share}")
        self.texts = texts
        self.min_share = min_share
        self._words: dict[str, Words] = {}
        self._sizes: dict[str, int] = {}
        self._order = {doc_id: rank for rank, doc_id in enumerate(texts)}

    def words(self, doc_id: str) -> Words:
        if doc_id not in self._words:
            self._words[doc_id] = text_words(self.texts[doc_id])
        return self._words[doc_id]

    def locate(self, context: str, doc_id: str | None = None) -> ContextMatch:
        """The context's passage: in the named document first, then anywhere (module rules)."""
        return self.locate_all([(context, doc_id)])[0]

    def locate_all(self, contexts: Sequence[tuple[str, str | None]]) -> list[ContextMatch]:
        """Each (context, named document or None)'s outcome, in order. The documents are read once
        for all contexts: only the k-grams some context holds are indexed."""
        words = [text_words(context) for context, _ in contexts]
        index = self._kgram_index({gram for item in words for gram in _kgrams(item.tokens)})
        return [self._locate(context, named, item, index)
                for (context, named), item in zip(contexts, words, strict=True)]

    def _locate(self, context: str, doc_id: str | None, words: Words,
                index: Mapping[tuple[str, ...], list[tuple[str, int]]]) -> ContextMatch:
        if not context.strip():
            return ContextMatch(None, 0.0, None, EMPTY)
        if len(words.tokens) < MIN_WORDS:
            return ContextMatch(None, 0.0, None, TOO_SHORT)
        named = doc_id if doc_id is not None and doc_id in self.texts else None
        candidates = self._candidates(words.tokens, named, index)
        # A verbatim context shares every k-gram with its document, so that is a candidate.
        for candidate, _ in candidates:
            offset = self.texts[candidate].find(context)
            if offset >= 0:
                return ContextMatch(Passage(candidate, offset, offset + len(context), 1.0), 1.0, candidate, None)
        best = ContextMatch(None, 0.0, None, NOT_IN_CORPUS)
        for candidate, (low, high) in candidates:
            passage = self._align(words.tokens, candidate, low, high)
            if passage.score > best.score:
                best = ContextMatch(passage, passage.score, candidate, None)
            if candidate == named and passage.score >= self.min_share:
                break
        if best.passage is None or best.score < self.min_share:
            return ContextMatch(None, best.score, best.doc_id, best.reason or BELOW_SHARE)
        return best

    def _kgram_index(self, grams: set[tuple[str, ...]]) -> dict[tuple[str, ...], list[tuple[str, int]]]:
        """k-gram -> (document, word position) of every k-gram in ``grams``; each document's words
        are cut and let go (only candidates' words are kept, in ``words``)."""
        index: dict[tuple[str, ...], list[tuple[str, int]]] = defaultdict(list)
        for doc_id, text in self.texts.items():
            tokens = self._words[doc_id].tokens if doc_id in self._words else text_words(text).tokens
            self._sizes[doc_id] = len(tokens)
            for position, gram in enumerate(_kgrams(tokens)):
                if gram in grams:
                    index[gram].append((doc_id, position))
        return index

    def _candidates(self, tokens: list[str], named: str | None,
                    index: Mapping[tuple[str, ...], list[tuple[str, int]]]) -> list[tuple[str, tuple[int, int]]]:
        """(document, word window) to align: the named document, then the documents with the most
        shared k-grams in one stretch of about the context's length (ties in corpus order)."""
        hits: dict[str, list[int]] = defaultdict(list)
        for gram in set(_kgrams(tokens)):
            for doc_id, position in index.get(gram, ()):
                hits[doc_id].append(position)
        reach = len(tokens) * 3 // 2 + _SLACK
        found: list[tuple[bool, int, int, str, tuple[int, int]]] = []
        for doc_id in ([named] if named is not None and named not in hits else []) + list(hits):
            count, low, high = _densest(sorted(hits.get(doc_id, [])), reach)
            if count < MIN_SHARED_KGRAMS and doc_id != named:
                continue
            size = self._sizes[doc_id]
            window = (max(0, low - _SLACK), min(size, high + KGRAM + _SLACK)) if count >= MIN_SHARED_KGRAMS \
                else (0, size)
            found.append((doc_id != named, -count, self._order[doc_id], doc_id, window))
        found.sort()
        return [(doc_id, window) for *_, doc_id, window in found[:CANDIDATES + (named is not None)]]

    def _align(self, tokens: list[str], doc_id: str, low: int, high: int) -> Passage:
        doc = self.words(doc_id)
        blocks = _matched(tokens, doc.tokens, low, high)
        if not blocks:
            return Passage(doc_id, 0, 0, 0.0)
        # Again over the matched run widened by the context words left unmatched at each end. Of
        # equally long alignments the first word of the context is matched as late as it can be
        # (aligning the reversed sequences) and the last as early as it can be, so a repeated word
        # ("respiratory viruses. Respiratory hygiene") is matched where the passage starts.
        first, last = blocks[0], blocks[-1]
        low = max(0, first.b - first.a)
        high = min(len(doc.tokens), last.b + len(tokens) - last.a)
        forward = _matched(tokens, doc.tokens, low, high) or blocks
        backward = _matched(tokens, doc.tokens, low, high, reverse=True) or forward
        start_word, end_word = backward[0].b, forward[-1].b + forward[-1].size
        if end_word <= start_word:
            start_word, end_word = forward[0].b, forward[-1].b + forward[-1].size
        share = LCSseq.similarity(tokens, doc.tokens[start_word:end_word]) / len(tokens)
        return Passage(doc_id, doc.starts[start_word], doc.ends[end_word - 1], round(share, 4))


def _matched(tokens: list[str], doc_tokens: list[str], low: int, high: int,
             reverse: bool = False) -> list[MatchingBlock]:
    """The context's matching blocks in the document's words [low, high), trimmed (lone words cut
    off the matched run at either end), with ``b`` in document word positions; ``reverse`` aligns
    the reversed sequences (ties then go to the latest match) and maps the blocks back."""
    window = doc_tokens[low:high]
    if not reverse:
        found = LCSseq.opcodes(tokens, window).as_matching_blocks()
        blocks = [MatchingBlock(block.a, low + block.b, block.size) for block in found if block.size]
    else:
        found = LCSseq.opcodes(tokens[::-1], window[::-1]).as_matching_blocks()
        blocks = sorted((MatchingBlock(len(tokens) - block.a - block.size, low + len(window) - block.b - block.size,
                                       block.size) for block in found if block.size), key=lambda block: block.a)
    return _trimmed(blocks)


def _kgrams(tokens: Sequence[str]) -> list[tuple[str, ...]]:
    return [tuple(tokens[i:i + KGRAM]) for i in range(len(tokens) - KGRAM + 1)]


def _densest(hits: Sequence[int], reach: int) -> tuple[int, int, int]:
    """(count, first, last) of the stretch of at most ``reach`` words holding the most hits."""
    if not hits:
        return 0, 0, 0
    best = (0, 0, 0)
    left = 0
    for right, position in enumerate(hits):
        while position - hits[left] > reach:
            left += 1
        if right - left + 1 > best[0]:
            best = (right - left + 1, hits[left], position)
    return best


def _trimmed(blocks: list[MatchingBlock]) -> list[MatchingBlock]:
    """The matching blocks without lone words cut off from the run at either end (a word that
    matched a common word far from the rest)."""
    def lone(block: MatchingBlock, neighbour: MatchingBlock) -> bool:
        gap = abs(neighbour.b - block.b) - (block.size if block.b < neighbour.b else neighbour.size)
        return block.size == 1 and gap > 3

    while len(blocks) > 1 and lone(blocks[0], blocks[1]):
        blocks = blocks[1:]
    while len(blocks) > 1 and lone(blocks[-1], blocks[-2]):
        blocks = blocks[:-1]
    return blocks

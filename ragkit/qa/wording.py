"""Word-level measures of questions: content words, overlap with a source, normalised text.

Shared by generation (reject paraphrases that copy their passage) and the quality report
(question-to-source overlap, duplicates), so both measure the same way.
"""

from __future__ import annotations

import re
import unicodedata

from ragkit.qa.language import STOPWORDS

_WORD = re.compile(r"[^\W_]+")
_ALL_STOPWORDS = frozenset().union(*STOPWORDS.values())
# A sentence ends at . ! or ? followed by space and an upper-case letter, digit or opening mark,
# or at a line break (headings, list items); crude, but it needs no model and never splits inside
# "e.g. the".
_SENTENCE_END = re.compile(r"(?<=[.!?])[ \t]+(?=[\"'(\[]?[A-Z0-9\u00C0-\u024F])|[ \t]*\n\s*")


def content_words(text: str) -> list[str]:
    """Lower-cased words without stopwords (of any listed language)."""
    return [word for word in (w.casefold() for w in _WORD.findall(text)) if word not in _ALL_STOPWORDS]


def word_overlap(question: str, source: str) -> float:
    """Share of the question's distinct content words that occur in ``source`` (0 to 1; 0 for a
    question without content words). Written questions score about 0.1, copied ones above 0.5."""
    asked = set(content_words(question))
    if not asked:
        return 0.0
    return len(asked & set(content_words(source))) / len(asked)


def normalise_question(text: str) -> str:
    """Case, accents, punctuation and spacing removed: the key for exact-duplicate detection."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(char for char in decomposed if not unicodedata.combining(char))
    return " ".join(_WORD.findall(plain))


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text[start:end]``, offsets into ``text``, whitespace trimmed."""
    end = len(text) if end is None else end
    spans = []
    cursor = start
    for match in _SENTENCE_END.finditer(text, start, end):
        spans.append((cursor, match.start()))
        cursor = match.end()
    spans.append((cursor, end))
    trimmed = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            trimmed.append((s, e))
    return trimmed


def passage_around(text: str, start: int, end: int, sentences: int = 1) -> tuple[int, int]:
    """The span's sentences plus ``sentences`` on each side: the source passage of an answer."""
    spans = sentence_spans(text)
    inside = [i for i, (s, e) in enumerate(spans) if s < end and e > start]
    if not inside:
        return max(0, start - 300), min(len(text), end + 300)
    first, last = max(0, inside[0] - sentences), min(len(spans) - 1, inside[-1] + sentences)
    return spans[first][0], spans[last][1]

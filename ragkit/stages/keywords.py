"""The judges' keywords: a question's or a chunk's words without stopwords, and query expansion with them."""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+")
STOPWORDS = frozenset(
    "a an and are as at be by can did do does for from had has have how i in is it its of on or that the "
    "their there these this to was were what when where which who whom whose why will with would you".split()
)


def keywords(text: str) -> list[str]:
    return [word for word in _WORD.findall(text.lower()) if word not in STOPWORDS]


def with_new_keywords(text: str, sources: list[str], exclude: frozenset[str] = frozenset(),
                      min_length: int = 1) -> str:
    """``text`` (whitespace collapsed) followed by the keywords of ``sources`` it lacks, each once,
    in order of appearance; words in ``exclude`` or shorter than ``min_length`` are left out."""
    present = set(keywords(text)) | exclude
    extra: list[str] = []
    for source in sources:
        for word in keywords(source):
            if word not in present and len(word) >= min_length:
                present.add(word)
                extra.append(word)
    return " ".join([" ".join(text.split()), *extra])

"""A cheap guess of a text's language from its stopwords (no dependency, no model).

Function words are the most frequent words of every language and differ between languages, so
counting them tells apart the languages listed here on a few sentences; a question of eight words
usually holds one or two. The guess is None when too few stopwords are seen to tell, so a check
built on it only acts on a confident difference.
"""

from __future__ import annotations

from collections import Counter

from ragkit.text import LANGUAGE_STOPWORDS, letter_words

LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian",
                  "nl": "Dutch", "pt": "Portuguese"}


def guess_language(text: str, min_hits: int = 2) -> str | None:
    """The language code whose stopwords occur most in ``text``; None below ``min_hits`` hits or
    on a tie (the text says too little to tell)."""
    words = letter_words(text)
    hits = Counter({code: sum(word in stopwords for word in words) for code, stopwords in LANGUAGE_STOPWORDS.items()})
    ranked = hits.most_common(2)
    best, count = ranked[0]
    if count < min_hits or (len(ranked) > 1 and ranked[1][1] == count):
        return None
    return best


def language_name(code: str | None) -> str:
    return LANGUAGE_NAMES.get(code or "", "the passage's language")

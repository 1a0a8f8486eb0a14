"""A cheap guess of a text's language from its stopwords (no dependency, no model).

Function words are the most frequent words of every language and differ between languages, so
counting them tells apart the languages listed here on a few sentences; a question of eight words
usually holds one or two. The guess is None when too few stopwords are seen to tell, so a check
built on it only acts on a confident difference.
"""

from __future__ import annotations

import re
from collections import Counter

# The most frequent function words per language, left out where two languages share them (e.g.
# "a", "de", "en", "in"), so each hit is evidence for one language only.
STOPWORDS: dict[str, frozenset[str]] = {
    "en": frozenset("the and of to is are was were that this with for what which who how why when where does "
                    "did has have from by be it its they their than or not".split()),
    "de": frozenset("der die das und ist sind nicht mit von zu den dem ein eine einer auf für wie was wer "
                    "warum welche wird werden auch sich bei oder aus".split()),
    "fr": frozenset("le la les et est sont une des du au aux pour dans qui que quoi quel quelle comment "
                    "pourquoi pas avec sur par ce cette ces ou".split()),
    "es": frozenset("el los las y es son del una por para con qué cuál cómo quién porque pero como sobre "
                    "este esta su sus al".split()),
    "it": frozenset("il lo gli della delle è sono che di per con una uno come perché quale quali chi cosa "
                    "nel nella sul questo questa".split()),
    "nl": frozenset("het een van is zijn niet met voor dat wat wie hoe waarom welke wordt worden ook op "
                    "bij deze aan".split()),
    "pt": frozenset("o os as é são do da dos das um uma para com não que qual quais como quem por porque "
                    "no na pelo pela".split()),
}
LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian",
                  "nl": "Dutch", "pt": "Portuguese"}

_WORD = re.compile(r"[^\W\d_]+")


def guess_language(text: str, min_hits: int = 2) -> str | None:
    """The language code whose stopwords occur most in ``text``; None below ``min_hits`` hits or
    on a tie (the text says too little to tell)."""
    words = [word.casefold() for word in _WORD.findall(text)]
    hits = Counter({code: sum(word in stopwords for word in words) for code, stopwords in STOPWORDS.items()})
    ranked = hits.most_common(2)
    best, count = ranked[0]
    if count < min_hits or (len(ranked) > 1 and ranked[1][1] == count):
        return None
    return best


def language_name(code: str | None) -> str:
    return LANGUAGE_NAMES.get(code or "", "the passage's language")

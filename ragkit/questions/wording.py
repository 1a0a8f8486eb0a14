"""Word-level measures of questions: overlap with a source, normalised text, an answer's passage.

The words and sentences are cut by ``ragkit.text`` (content words in any listed language).

Shared by generation (reject paraphrases that copy their passage) and the quality report
(question-to-source overlap, duplicates), so both measure the same way.
"""

from __future__ import annotations

import unicodedata

from ragkit.text import WORD, multilingual_content_words, sentence_spans


def word_overlap(question: str, source: str) -> float:
    """Share of the question's distinct content words that occur in ``source`` (0 to 1; 0 for a
    question without content words). Written questions score about 0.1, copied ones above 0.5."""
    asked = set(multilingual_content_words(question))
    if not asked:
        return 0.0
    return len(asked & set(multilingual_content_words(source))) / len(asked)


def normalise_question(text: str) -> str:
    """Case, accents, punctuation and spacing removed: the key for exact-duplicate detection."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(char for char in decomposed if not unicodedata.combining(char))
    return " ".join(WORD.findall(plain))


def passage_around(text: str, start: int, end: int, sentences: int = 1) -> tuple[int, int]:
    """The span's sentences plus ``sentences`` on each side: the source passage of an answer."""
    spans = sentence_spans(text)
    inside = [i for i, (s, e) in enumerate(spans) if s < end and e > start]
    if not inside:
        return max(0, start - 300), min(len(text), end + 300)
    first, last = max(0, inside[0] - sentences), min(len(spans) - 1, inside[-1] + sentences)
    return spans[first][0], spans[last][1]

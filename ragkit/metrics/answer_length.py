"""Answer length: how many words an answer has, its citation markers left out (``answer_length``),
and how many characters it has as written (``answer_chars``, the judges design's measure).

Descriptive, not graded (``metrics.names.DESCRIPTIVE_METRICS``): a judge that shortens answers
is reported beside quality metrics, never as better or worse for it. An empty answer is 0 words
(a real length), not a missing value.
"""

from __future__ import annotations

from ragkit.text import strip_citations, words


def answer_length(answer: str) -> int:
    """Words of ``answer`` without its ``[n]`` markers: whitespace-separated pieces holding a letter
    or digit, so "don't" and "COVID-19" are one word each and a lone dash is none."""
    return sum(1 for piece in strip_citations(answer, ranges=True).split() if words(piece))


def answer_chars(answer: str) -> int:
    """Characters of ``answer`` as the generator wrote it (citation markers included), leading and
    trailing whitespace left out."""
    return len(answer.strip())

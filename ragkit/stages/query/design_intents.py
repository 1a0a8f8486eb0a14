"""The agentic design's query analysis: intent factual, conceptual, comparative or procedural,
and complexity, by its rules (the profile judge's ``taxonomy: design``, heuristic mode).

The question word is the first of what, how, why, when, where, who, which (in that order) that
the lower-cased query holds as a word (none: a statement). Then the first rule that holds:

- procedural: the question word is "how", or a word of the query starts with step, tutorial or guide;
- comparative: a word starts with vs, versus, compare, difference, better or best;
- conceptual: the question word is why or what, or a word starts with explain, understand or concept;
- factual otherwise.

Complexity: fewer than 5 words -> simple; a conceptual or comparative query, or more than 12
words -> complex; otherwise moderate (words split on whitespace).
"""

from __future__ import annotations

import re
from typing import Literal

DesignIntent = Literal["factual", "conceptual", "comparative", "procedural"]
DESIGN_INTENTS: tuple[DesignIntent, ...] = ("factual", "conceptual", "comparative", "procedural")
QUESTION_WORDS = ("what", "how", "why", "when", "where", "who", "which")

_PROCEDURAL = re.compile(r"\b(?:step|tutorial|guide)")
_COMPARATIVE = re.compile(r"\b(?:vs|versus|compare|difference|better|best)")
_CONCEPTUAL = re.compile(r"\b(?:explain|understand|concept)")


def question_word(query: str) -> str | None:
    text = query.lower()
    return next((word for word in QUESTION_WORDS if re.search(rf"\b{word}\b", text)), None)


def design_intent(query: str) -> DesignIntent:
    text = query.lower()
    asked = question_word(query)
    if asked == "how" or _PROCEDURAL.search(text):
        return "procedural"
    if _COMPARATIVE.search(text):
        return "comparative"
    if asked in ("why", "what") or _CONCEPTUAL.search(text):
        return "conceptual"
    return "factual"


def design_complexity(query: str, intent: str) -> Literal["simple", "moderate", "complex"]:
    count = len(query.split())
    if count < 5:
        return "simple"
    if intent in ("conceptual", "comparative") or count > 12:
        return "complex"
    return "moderate"

"""Near-duplicate questions: the same normalised text, or embeddings closer than a threshold.

The first of a group is kept (in the set's order), the others are dropped with the question they
repeat. The embedding step is a function of texts to vectors, passed in (MiniLM from the CLI, a
fake in tests); without one only the normalised text is compared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ragkit.questions.wording import normalise_question

Embed = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class Duplicate:
    index: int  # of the dropped question
    of: int  # of the kept question it repeats
    how: str  # "text" or "embedding"
    similarity: float


def find_duplicates(texts: Sequence[str], embed: Embed | None = None, threshold: float = 0.92) -> list[Duplicate]:
    """Every question that repeats an earlier kept one; 1.0 similarity for equal normalised text."""
    found: list[Duplicate] = []
    first_of: dict[str, int] = {}
    for index, text in enumerate(texts):
        key = normalise_question(text)
        if key in first_of:
            found.append(Duplicate(index, first_of[key], "text", 1.0))
        else:
            first_of[key] = index
    if embed is None or len(first_of) < 2:
        return found
    kept = sorted(first_of.values())
    vectors = np.asarray(embed([texts[i] for i in kept]), dtype=float)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1.0, norms)
    similarity = vectors @ vectors.T
    alive: list[int] = []  # positions in kept still kept
    for position, index in enumerate(kept):
        if alive:
            scores = similarity[position, alive]
            best = int(np.argmax(scores))
            if scores[best] >= threshold:
                found.append(Duplicate(index, kept[alive[best]], "embedding", float(scores[best])))
                continue
        alive.append(position)
    return sorted(found, key=lambda duplicate: duplicate.index)

"""Which retrieval strategy a late re-retrieval searches with (hallucination correction, answer retry).

``same`` (the default) keeps the strategy in use; ``next`` moves to the one after
it in the design's rotation, semantic -> keyword -> hybrid -> semantic (dense -> bm25 -> hybrid ->
dense here), so each re-retrieval round searches in a way the last one did not; a named strategy
switches to that one. A switch needs the pipeline's switchable retriever (the grid point has one
when one of these options asks for a strategy other than ``same``).
"""

from __future__ import annotations

from typing import Literal

RetryStrategy = Literal["same", "next", "dense", "bm25", "hybrid"]
ROTATION = {"dense": "bm25", "bm25": "hybrid", "hybrid": "dense"}


def retry_strategy(choice: str, current: str | None) -> str | None:
    """The strategy to switch to before re-retrieving; None: keep the one in use (``same``, or
    ``next`` when the strategy in use is unknown)."""
    if choice == "same":
        return None
    if choice == "next":
        return ROTATION.get(current or "")
    return choice
